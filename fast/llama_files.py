"""fast/llama.py's models from files: a GGUF file's tensors as stored (its
blocks never widened; a 4-bit matrix's rows grouped, see `grouped_blocks`),
or a Llama checkpoint's float32 safetensors.

A GGUF file is read with step 29's reader (solutions/solution_29.py): the
tensors' names, shapes and block types, the config from the metadata, q's
and k's rows put back in step 19's half-split order (llama.cpp's converter
interleaves them; a row of blocks moves whole). Llama 3's scaled rotary
frequencies (a `rope_freqs.weight` tensor) and Qwen2's q/k/v biases load too."""

from __future__ import annotations

import math
from dataclasses import fields as dataclass_fields
from dataclasses import replace
from pathlib import Path

import numpy as np
from max.driver import Buffer
from max.dtype import DType
from max.experimental import functional as F

from common.ggml_blocks import BLOCK_FORMATS, HALF, Q6_K
from fast.llama import (
    ARCHITECTURES,
    BLOCK_KINDS,
    LAYER_NAMES,
    LAYER_TENSORS,
    REBLOCKED,
    ROW_DTYPES,
    WIDENED,
    FastLlama,
    FastLlamaConfig,
)
from solutions.solution_29 import (
    GGUFError,
    GGUFFile,
    byte_count,
    llama_config,
    read_gguf,
    unpermute,
)

# -- loading a GGUF file ------------------------------------------------------------

GROUP = 8  # fast/kernels/token_rows.mojo's GROUP
GROUPED = ("Q4_0", "Q4_1")  # the block types our kernels read grouped


def grouped_blocks(kind: str, rows: np.ndarray) -> np.ndarray:
    """A matrix's blocks [rows, row_bytes] as our kernels read them: a 4-bit
    matrix's rows in groups of GROUP, a group's blocks at one position side
    by side (the GROUP float16 scales d, then Q4_1's GROUP m's, then each
    row's 16 bytes of levels), the rows after the last whole group as they
    are (fast/kernels/token_rows.mojo says why). Other kinds as they are."""
    if kind not in GROUPED:
        return rows
    size = BLOCK_FORMATS[kind].size
    count, row_bytes = rows.shape
    whole, blocks = count // GROUP * GROUP, row_bytes // size
    # [groups, blocks, GROUP rows, the block's bytes]
    groups = rows[:whole].reshape(whole // GROUP, GROUP, blocks, size).transpose(0, 2, 1, 3)
    scales = size - HALF  # d, or Q4_1's d and m: two bytes each
    parts = [groups[..., at : at + 2] for at in range(0, scales, 2)] + [groups[..., scales:]]
    side_by_side = [part.reshape(*groups.shape[:2], GROUP * part.shape[-1]) for part in parts]
    grouped = np.concatenate(side_by_side, axis=-1).reshape(whole, row_bytes)
    return np.concatenate([grouped, rows[whole:]])


def fast_config(gguf: GGUFFile) -> FastLlamaConfig:
    """The model's shapes from the file's metadata, and each matrix's block type."""
    architecture = gguf.metadata.get("general.architecture")
    if architecture not in ARCHITECTURES:
        raise GGUFError(
            f"{gguf.path} holds a {architecture!r} model (general.architecture); the fast "
            f"path runs {', '.join(map(repr, ARCHITECTURES))}."
        )

    scaling = gguf.metadata.get(f"{architecture}.rope.scaling.type", "none")
    factors = None
    if "rope_freqs.weight" in gguf.tensors:  # Llama 3's divisors of the frequencies
        factors = tuple(float(f) for f in gguf.array("rope_freqs.weight").reshape(-1))
    elif scaling != "none":
        raise GGUFError(f"{gguf.path} scales its rotary frequencies by {scaling!r}, not run here.")
    embeddings = gguf.tensors.get("token_embd.weight")
    if embeddings is None:
        raise GGUFError(f"{gguf.path} has no token_embd.weight.")
    # The shapes as step 29 reads them, from the file's keys under "llama.".
    prefix = f"{architecture}."
    as_llama = {
        f"llama.{key.removeprefix(prefix)}" if key.startswith(prefix) else key: value
        for key, value in gguf.metadata.items()
        if key != f"{prefix}rope.scaling.type"  # the factors (or a refusal) above
    }
    as_llama["general.architecture"] = "llama"
    plain_tensors = {
        name: info for name, info in gguf.tensors.items() if name != "rope_freqs.weight"
    }
    plain = llama_config(replace(gguf, metadata=as_llama, tensors=plain_tensors))
    config = FastLlamaConfig(
        **{field.name: getattr(plain, field.name) for field in dataclass_fields(plain)},
        attention_bias="blk.0.attn_q.bias" in gguf.tensors,
        rope_factors=factors,
    )
    kinds = {"token_embd": embeddings.kind}
    kinds["output"] = gguf.tensors.get("output.weight", embeddings).kind
    for index in range(config.num_hidden_layers):
        for name in LAYER_NAMES:
            info = gguf.tensors.get(f"blk.{index}.{name}.weight")
            if info is None:
                raise GGUFError(f"{gguf.path} has no blk.{index}.{name}.weight.")
            kinds[f"blk.{index}.{name}"] = info.kind
    for name, kind in kinds.items():
        if kind not in (*BLOCK_KINDS, *ROW_DTYPES, *WIDENED, *REBLOCKED):
            raise GGUFError(
                f"{gguf.path}: {name} is {kind}; the fast path reads "
                f"{', '.join((*BLOCK_KINDS, *ROW_DTYPES, *WIDENED))} (and {', '.join(REBLOCKED)} "
                "as Q8_0)."
            )
    # What the model holds: a reblocked matrix as the type it is read as.
    return replace(config, kinds={name: REBLOCKED.get(k, k) for name, k in kinds.items()})


def inv_freq(config: FastLlamaConfig) -> np.ndarray:
    """Step 19's rotary frequencies theta^(-2i / head_dim), each divided by
    its Llama 3 factor where the file has them."""
    pairs = np.arange(config.head_dim // 2, dtype=np.float64)
    frequencies = config.rope_theta ** (-2 * pairs / config.head_dim)
    if config.rope_factors is not None:
        frequencies = frequencies / np.asarray(config.rope_factors, dtype=np.float64)
    return frequencies.astype(np.float32)


def stored(gguf: GGUFFile, name: str) -> np.ndarray:
    """A matrix's rows as our layers hold them: blocks as bytes [rows,
    row_bytes], float32 or bfloat16 rows as they are (bfloat16 as its bits),
    float16 widened to float32; a vector as float32."""
    info = gguf.tensors[name]
    if info.kind == "Q6_K":
        return q6_k_as_q8_0(gguf, name)
    if info.kind in BLOCK_KINDS or info.kind == "BF16":
        # Step 29's reader has checked that these bytes lie inside the file.
        rows = math.prod(info.shape[:-1]) if len(info.shape) > 1 else 1
        size = byte_count(info, gguf.path)
        raw = np.frombuffer(gguf.data, np.uint8, size, info.offset).reshape(rows, -1)
        return raw.view(np.uint16) if info.kind == "BF16" else raw
    return gguf.array(name)


ROWS_AT_ONCE = 4096  # a Q6_K matrix's rows widened to float32 at a time (memory)


def q6_k_as_q8_0(gguf: GGUFFile, name: str) -> np.ndarray:
    """A Q6_K matrix as Q8_0 blocks [rows, row_bytes]: its numbers (widened
    from the file's blocks) rounded again, 32 at a time, to 8 bits. A Q8_0
    step is a block's largest number over 127, about a quarter of a Q6_K one
    (a run of 16's largest over 32), and the matrix reads 8.5 bits a number
    instead of 6.56."""
    from solutions.solution_27 import quantize_q8_0

    info = gguf.tensors[name]
    columns, rows = info.shape[-1], math.prod(info.shape[:-1])
    if columns % Q6_K.count:
        raise GGUFError(f"{gguf.path}: {name} is Q6_K with rows of {columns} numbers.")
    per_row = columns // Q6_K.count
    size = rows * per_row * Q6_K.size
    if info.offset + size > len(gguf.data):
        raise GGUFError(f"{gguf.path}: {name}'s Q6_K blocks run past the file's end.")
    raw = np.frombuffer(gguf.data, np.uint8, size, info.offset).reshape(rows, per_row, Q6_K.size)
    out = np.empty(
        (rows, columns // BLOCK_FORMATS["Q8_0"].count, BLOCK_FORMATS["Q8_0"].size), np.uint8
    )
    for start in range(0, rows, ROWS_AT_ONCE):
        part = raw[start : start + ROWS_AT_ONCE]
        numbers = Q6_K.widen(part.reshape(-1, Q6_K.size)).reshape(len(part), columns)
        scales, values = quantize_q8_0(numbers)
        out[start : start + len(part), :, :2] = scales[..., None].view(np.uint8)
        out[start : start + len(part), :, 2:] = values.view(np.uint8)
    return out.reshape(rows, -1)


def load_gguf(source: Path | str | GGUFFile) -> FastLlama:
    """A FastLlama with a GGUF file's weights, kept in their blocks (the file
    read already, or its path). A file the fast path cannot run is a GGUFError."""
    gguf = source if isinstance(source, GGUFFile) else read_gguf(source)
    config = fast_config(gguf)
    permuted = {"attn_q": config.num_attention_heads, "attn_k": config.num_key_value_heads}
    unpermuting = gguf.metadata.get("general.architecture") == "llama"

    def tensor(name: str) -> np.ndarray:
        """A matrix as stored (q's and k's rows back in step 19's order), a vector widened."""
        if len(gguf.tensors[name].shape) == 1:
            return gguf.array(name)
        rows = stored(gguf, name)
        part = name.split(".")[-2]
        return unpermute(rows, permuted[part]) if unpermuting and part in permuted else rows

    return assembled(config, tensor)


def load_checkpoint(directory: Path) -> FastLlama:
    """A FastLlama with a Llama checkpoint's float32 weights (safetensors, as
    step 23 reads them), each matrix a float32 one."""
    from common import checkpoint
    from solutions.solution_23 import load_llama_config, to_llama_state
    from solutions.solution_29 import transformers_name

    plain = load_llama_config(directory)
    state = to_llama_state(checkpoint.read_safetensors(directory / "model.safetensors"), plain)
    names = [f"blk.{i}.{name}" for i in range(plain.num_hidden_layers) for name in LAYER_NAMES]
    config = FastLlamaConfig(
        **{field.name: getattr(plain, field.name) for field in dataclass_fields(plain)},
        kinds=dict.fromkeys(["token_embd", "output", *names], "F32"),
    )
    return assembled(config, lambda name: state[transformers_name(name)])


def assembled(config: FastLlamaConfig, tensor) -> FastLlama:
    """A FastLlama of `config` whose weights are tensor(name), by llama.cpp's
    tensor names: matrices as our layers hold them, vectors as float32."""
    kinds = config.kinds

    def matrix(kind: str, name: str) -> np.ndarray:
        return grouped_blocks(kind, tensor(name))

    state: dict[str, object] = {
        "token_embd.weight": matrix(kinds["token_embd"], "token_embd.weight"),
        "output_norm": tensor("output_norm.weight"),
        "inv_freq": inv_freq(config),
    }
    tied = config.tie_word_embeddings
    state["output.weight"] = (
        state["token_embd.weight"] if tied else matrix(kinds["output"], "output.weight")
    )
    for index in range(config.num_hidden_layers):
        layer, blk = f"layers.{index}", f"blk.{index}"
        state[f"{layer}.attn_norm"] = tensor(f"{blk}.attn_norm.weight")
        state[f"{layer}.ffn_norm"] = tensor(f"{blk}.ffn_norm.weight")
        for place, names in LAYER_TENSORS.items():
            part_kinds = [kinds[f"{blk}.{name}"] for name in names]
            weights = [tensor(f"{blk}.{name}.weight") for name in names]
            biases = None
            if place == "qkv" and config.attention_bias:
                biases = [tensor(f"{blk}.{name}.bias") for name in names]
            if len(names) == 1:
                state[f"{layer}.{place}.weight"] = grouped_blocks(part_kinds[0], weights[0])
                continue
            if len(set(part_kinds)) == 1:  # one matrix of all their rows (Fused)
                weights, part_kinds = [np.concatenate(weights)], part_kinds[:1]
                biases = biases and [np.concatenate(biases)]
            for part, (kind, rows) in enumerate(zip(part_kinds, weights, strict=True)):
                state[f"{layer}.{place}.parts.{part}.weight"] = grouped_blocks(kind, rows)
                if biases:
                    state[f"{layer}.{place}.parts.{part}.bias"] = biases[part]
    with F.lazy():
        model = FastLlama(config)
    arrays = {id(value): value for value in state.values()}  # the tied head once
    placed = in_one_allocation(list(arrays.values()))
    buffers = {key: as_buffer(array) for key, array in zip(arrays, placed, strict=True)}
    model.load_state_dict({name: buffers[id(value)] for name, value in state.items()})
    return model


HUGE_PAGE = 2 << 20  # Linux's transparent huge pages on x86-64
ALIGNMENT = 64  # each array on a cache line of its own


def in_one_allocation(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The arrays copied, in order, into one allocation that begins on a huge
    page, each a view of it.

    A decoded token reads every matrix once, a few hundred KB each. Copied
    each by itself, a layer's matrix took memory of its own in 4 KB pages,
    and a token's reads crossed some 25,000 of them, each a translation to
    look up (twice over on a virtual machine). NumPy asks Linux for huge
    pages (2 MB) for an allocation of 4 MB or more, as a model's is; the
    matrices lie in it in the order a token reads them. SmolLM2-135M's
    tokens came 1.06-1.10x as fast (Q4_1, Q4_0, Q8_0, bfloat16; the Zen 4).
    """
    offsets, total = [], 0
    for array in arrays:
        offsets.append(total)
        total += -(-array.nbytes // ALIGNMENT) * ALIGNMENT
    arena = np.empty(total + HUGE_PAGE, np.uint8)
    begin = -arena.ctypes.data % HUGE_PAGE
    views = []
    for array, offset in zip(arrays, offsets, strict=True):
        view = arena[begin + offset : begin + offset + array.nbytes].view(array.dtype)
        view = view.reshape(array.shape)
        view[...] = array
        views.append(view)
    return views


def as_buffer(array: np.ndarray) -> Buffer:
    """A contiguous, writeable array (in_one_allocation's) as a MAX buffer of
    the same memory; bfloat16 bits (uint16) viewed as bfloat16."""
    buffer = Buffer.from_numpy(array)
    if array.dtype == np.uint16:
        return buffer.view(DType.bfloat16, array.shape)
    return buffer
