"""A small GGUF writer in NumPy and struct, written from ggml's GGUF
specification (ggml/docs/gguf.md) for step 29's checks, which must not need
the `gguf` package; ``tests/test_reference_gguf.py`` holds that the `gguf`
package's GGUFReader reads what it writes.

A file is built in memory as `gguf_bytes(metadata, tensors)`: metadata maps a
key to `(value type, value)` (an array's value is `(item type, items)`), and
tensors are `(name, block type, float32 array in NumPy's shape)`. The
result, a `Layout`, holds the bytes, each tensor's absolute offset and the
float32 numbers its blocks stand for. Keyword arguments with defaults write
a file the way a mistaken reader would expect it, so a check can name the
mistake; the defaults are the specification's.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from tests import reference_quant as quant

MAGIC = b"GGUF"
VERSION = 3
ALIGNMENT = 32  # the data section's alignment unless general.alignment says otherwise

# Metadata value types (gguf_type), and the struct code of those of fixed size.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
FIXED = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?"}
FIXED.update({U64: "Q", I64: "q", F64: "d"})

# ggml's block types: their number in a tensor info, and (numbers, bytes) a block.
TYPE_NUMBER = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q8_0": 8, "Q4_K": 12}
TYPE_NUMBER["Q6_K"] = 14
TYPE_NUMBER["BF16"] = 30
BLOCK_SIZE = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q8_0": (32, 34)}
BLOCK_SIZE.update({"Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q4_K": (256, 144)})
BLOCK_SIZE["Q6_K"] = (256, 210)
Q6_K_SCALE = 2.5e-5  # each Q6_K block's d: its numbers within 32 * 127 * d = 0.1
READ = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1")  # the types step 29 reads


def aligned(position: int, alignment: int) -> int:
    return (position + alignment - 1) // alignment * alignment


def string_bytes(text: str, length_code: str = "Q") -> bytes:
    """A GGUF string: its UTF-8 byte count as a u64, then the bytes."""
    raw = text.encode("utf-8")
    return struct.pack("<" + length_code, len(raw)) + raw


def value_bytes(kind: int, value: object, count_code: str = "Q") -> bytes:
    """A metadata value of type `kind`; an array's value is (item type, items)."""
    if kind in FIXED:
        return struct.pack("<" + FIXED[kind], value)
    if kind == STRING:
        return string_bytes(value)
    if kind == ARRAY:
        item_kind, items = value
        head = struct.pack("<I", item_kind) + struct.pack("<" + count_code, len(items))
        return head + b"".join(value_bytes(item_kind, item, count_code) for item in items)
    raise ValueError(f"no GGUF value type {kind}")


def info_bytes(name: str, kind: str, shape: tuple[int, ...], offset: int) -> bytes:
    """A tensor info: the dims in ggml's order, the innermost (NumPy's last) first."""
    dims = b"".join(struct.pack("<Q", dim) for dim in shape[::-1])
    head = string_bytes(name) + struct.pack("<I", len(shape)) + dims
    return head + struct.pack("<IQ", TYPE_NUMBER[kind], offset)


def block_bytes(kind: str, array: np.ndarray, rng=None) -> tuple[bytes, np.ndarray | None]:
    """The bytes a file stores for `array` in `kind`, and the float32 numbers
    they stand for (None for a type step 29 does not read: random bytes)."""
    rows = np.asarray(array, np.float32).reshape(-1, array.shape[-1] if array.ndim else 1)
    if kind == "F32":
        return rows.astype("<f4").tobytes(), rows
    if kind == "F16":
        halves = rows.astype("<f2")
        return halves.tobytes(), halves.astype(np.float32)
    if kind == "BF16":  # the top half of each float32, truncated
        top = (rows.view(np.uint32) >> 16).astype("<u2")
        return top.tobytes(), (top.astype(np.uint32) << 16).view(np.float32)
    if kind == "Q8_0":
        blocks = quant.quantize_q8_0(rows)
        return quant.q8_0_bytes(*blocks).tobytes(), quant.dequantize_q8_0(*blocks)
    if kind == "Q4_0":
        blocks = quant.quantize_q4_0(rows)
        return quant.q4_0_bytes(*blocks).tobytes(), quant.dequantize_q4_0(*blocks)
    if kind == "Q4_1":
        blocks = quant.quantize_q4_1(rows)
        return quant.q4_1_bytes(*blocks).tobytes(), quant.dequantize_q4_1(*blocks)
    numbers, size = BLOCK_SIZE[kind]
    rng = rng or np.random.default_rng(0)
    raw = rng.integers(0, 256, (rows.size // numbers, size), dtype=np.uint8)
    if kind != "Q6_K":
        return raw.tobytes(), None
    # Random levels and scales, each block's d (its last 2 bytes) a float16 of
    # Q6_K_SCALE; what they stand for as the gguf package widens them (the oracle).
    import gguf

    raw[:, -2:] = np.full(len(raw), Q6_K_SCALE, "<f2").view(np.uint8).reshape(-1, 2)
    widened = gguf.quants.dequantize(raw.reshape(-1), gguf.GGMLQuantizationType.Q6_K)
    return raw.tobytes(), widened.reshape(rows.shape).astype(np.float32)


@dataclass
class Layout:
    """A GGUF file in memory, and where its pieces are."""

    data: bytes
    alignment: int
    infos_end: int  # the byte after the last tensor info, before the padding
    data_start: int  # the data section's first byte
    offsets: dict[str, int] = field(default_factory=dict)  # each tensor's, from the file's start
    relative: dict[str, int] = field(default_factory=dict)  # from the data section's start
    arrays: dict[str, np.ndarray | None] = field(default_factory=dict)  # what they stand for


def gguf_bytes(
    metadata: dict[str, tuple[int, object]],
    tensors: list[tuple[str, str, np.ndarray]],
    *,
    version: int = VERSION,
) -> Layout:
    """A whole GGUF file: header, metadata, tensor infos, padding, data. The
    alignment is general.alignment's (a U32 entry in `metadata`) or 32; each
    tensor starts at a multiple of it within the data section."""
    alignment = int(metadata.get("general.alignment", (U32, ALIGNMENT))[1])
    blobs, arrays, relative, position = [], {}, {}, 0
    rng = np.random.default_rng(1)
    for name, kind, array in tensors:
        raw, widened = block_bytes(kind, array, rng)
        position = aligned(position, alignment)
        relative[name] = position
        arrays[name] = None if widened is None else widened.reshape(array.shape)
        blobs.append((position, raw))
        position += len(raw)
    header = MAGIC + struct.pack("<IQQ", version, len(tensors), len(metadata))
    entries = b"".join(
        string_bytes(key) + struct.pack("<I", kind) + value_bytes(kind, value)
        for key, (kind, value) in metadata.items()
    )
    infos = b"".join(
        info_bytes(name, kind, array.shape, relative[name]) for name, kind, array in tensors
    )
    infos_end = len(header) + len(entries) + len(infos)
    start = aligned(infos_end, alignment)
    body = bytearray(position)
    for offset, raw in blobs:
        body[offset : offset + len(raw)] = raw
    data = header + entries + infos + bytes(start - infos_end) + bytes(body)
    offsets = {name: start + offset for name, offset in relative.items()}
    return Layout(data, alignment, infos_end, start, offsets, relative, arrays)


# -- a Llama-family file, as llama.cpp's converter writes one ----------------------

# transformers' names -> llama.cpp's, as convert_hf_to_gguf.py's tensor map has them.
GGUF_NAMES = dict(
    pair.split("=")
    for pair in """model.embed_tokens=token_embd model.norm=output_norm lm_head=output
    input_layernorm=attn_norm post_attention_layernorm=ffn_norm self_attn.q_proj=attn_q
    self_attn.k_proj=attn_k self_attn.v_proj=attn_v self_attn.o_proj=attn_output
    mlp.gate_proj=ffn_gate mlp.up_proj=ffn_up mlp.down_proj=ffn_down""".split()
)


def gguf_name(name: str) -> str:
    """ "model.layers.2.mlp.up_proj.weight" -> "blk.2.ffn_up.weight"."""
    stem, suffix = name.rsplit(".", 1)
    if stem.startswith("model.layers."):
        index, part = stem.removeprefix("model.layers.").split(".", 1)
        return f"blk.{index}.{GGUF_NAMES[part]}.{suffix}"
    return f"{GGUF_NAMES[stem]}.{suffix}"


# ANCHOR: converter_permute
def converter_permute(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf.py (LlamaModel.permute) on q's and k's
    rows: each head's two halves interleaved, row i of the first half then
    row i of the second, for ggml's rotary pairs of neighbours."""
    rows = weight.shape[0]
    split = weight.reshape(num_heads, 2, rows // num_heads // 2, *weight.shape[1:])
    return split.swapaxes(1, 2).reshape(weight.shape)


# ANCHOR_END: converter_permute


def converter_unpermute(stored: np.ndarray, num_heads: int) -> np.ndarray:
    """The inverse of converter_permute: each head's rows read as (row of a
    half, which half) and put back as (which half, row of a half)."""
    rows = stored.shape[0]
    pairs = stored.reshape(num_heads, rows // num_heads // 2, 2, *stored.shape[1:])
    return pairs.swapaxes(1, 2).reshape(stored.shape)


def llama_metadata(
    *,
    layers: int,
    hidden: int,
    intermediate: int,
    heads: int,
    kv_heads: int,
    theta: float,
    eps: float,
    context: int,
    architecture: str = "llama",
) -> dict[str, tuple[int, object]]:
    """The `llama.*` keys llama.cpp's converter writes for a Llama model."""
    arch = architecture
    return {
        "general.architecture": (STRING, arch),
        f"{arch}.block_count": (U32, layers),
        f"{arch}.context_length": (U32, context),
        f"{arch}.embedding_length": (U32, hidden),
        f"{arch}.feed_forward_length": (U32, intermediate),
        f"{arch}.attention.head_count": (U32, heads),
        f"{arch}.attention.head_count_kv": (U32, kv_heads),
        f"{arch}.rope.freq_base": (F32, theta),
        f"{arch}.attention.layer_norm_rms_epsilon": (F32, eps),
    }


def llama_tensors(
    state: dict[str, np.ndarray], heads: int, kv_heads: int, kind: str = "F32"
) -> list[tuple[str, str, np.ndarray]]:
    """A transformers Llama state as the converter stores it: llama.cpp's
    names, q's and k's rows permuted, matrices in `kind`, norms in F32."""
    tensors = []
    for name, array in state.items():
        if ".q_proj." in name:
            array = converter_permute(array, heads)
        elif ".k_proj." in name:
            array = converter_permute(array, kv_heads)
        tensors.append((gguf_name(name), kind if array.ndim == 2 else "F32", array))
    return tensors


# -- a tokenizer, as the converter writes a byte-level BPE one ----------------------

# ChatML, as SmolLM2's and Qwen2's files hold it.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def byte_alphabet() -> list[str]:
    """Byte-level BPE's 256 one-byte tokens (GPT-2's printable stand-ins)."""
    from tokenizers.pre_tokenizers import ByteLevel

    return sorted(ByteLevel.alphabet(), key=lambda text: ord(text))


def tokenizer_metadata(vocab_size: int, **changes) -> dict[str, tuple[int, object]]:
    """A byte-level vocabulary of `vocab_size` tokens, no merges: the 256
    bytes, <|im_start|> and <|im_end|> (control tokens; the end token), then
    fillers; ChatML's chat template. `changes` add or replace keys."""
    fillers = [f"<unused{index}>" for index in range(vocab_size - 258)]
    tokens = [*byte_alphabet(), "<|im_start|>", "<|im_end|>", *fillers]
    metadata = {
        "tokenizer.ggml.model": (STRING, "gpt2"),
        "tokenizer.ggml.tokens": (ARRAY, (STRING, tokens)),
        "tokenizer.ggml.merges": (ARRAY, (STRING, [])),
        "tokenizer.ggml.token_type": (ARRAY, (I32, [1] * 256 + [3, 3] + [1] * len(fillers))),
        "tokenizer.ggml.eos_token_id": (U32, 257),
        "tokenizer.chat_template": (STRING, CHAT_TEMPLATE),
    }
    return metadata | changes
