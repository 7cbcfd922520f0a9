"""Step 29: reading a GGUF file.

Goal: read the file llama.cpp, ollama and LM Studio run, by hand: its
header, its typed metadata, its tensor infos (dims in ggml's order), the
aligned data section and step 27's and 28's blocks in it; then
SmolLM2-135M-Instruct's file as step 23's model, its q and k rows put back
in the order step 19's rotary embedding expects. The boring parts (the
reader's cursor, the block formats, the names, the config) are given.

Run: pixi run s29    (or: python -m tests.check 29)
Stuck? Read docs/src/step_29.md (pixi run book).
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from max.experimental import functional as F

from common.ggml_blocks import BLOCK_FORMATS, GGML_TYPES, TYPE_NUMBERS, BlockFormat
from solutions.solution_15 import CheckpointError, check_against, parameter_shapes
from solutions.solution_21 import LlamaConfig
from solutions.solution_23 import LlamaForCausalLM, to_llama_state

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # version 1 counted in u32; 2 and 3 lay a file out the same way
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # ggml's tensors have 1 to 4 dims

# Metadata value types: the number-like ones with their struct codes
# (little-endian), then the three that are not one fixed-size number.
NUMBERS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
STRING, ARRAY = 8, 9


class GGUFError(Exception):
    """A file this reader cannot use: corrupt, truncated, not GGUF, or holding
    a block type or a model it does not know. The message is one line that
    names the file and what is wrong."""

    def __init__(self, message: str) -> None:
        # A corrupt file's names can hold any byte: the message stays one printable line.
        super().__init__("".join(c if c.isprintable() else ascii(c)[1:-1] for c in message))


# -- reading fields -------------------------------------------------------------


class Reader:
    """The file's bytes and a position in them. Each read takes the next
    bytes; a read past the end is a GGUFError that says what it was reading."""

    def __init__(self, data: bytes | memoryview, path: Path | str) -> None:
        self.data = memoryview(data)
        self.path = path
        self.position = 0

    def take(self, size: int, what: str) -> memoryview:
        """The next `size` bytes."""
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise GGUFError(f"{self.path} ends at byte {len(self.data)}, inside {what}.")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def number(self, code: str, what: str) -> int | float | bool:
        """The next number, of struct's type `code` ("I" a u32, "Q" a u64, ...)."""
        layout = struct.Struct("<" + code)
        return layout.unpack(self.take(layout.size, what))[0]

    def numbers(self, code: str, count: int, what: str) -> list:
        """The next `count` numbers of one type, read at once (a tokenizer's
        49152 token types are one array)."""
        dtype = np.dtype("<" + code)
        return np.frombuffer(self.take(count * dtype.itemsize, what), dtype).tolist()

    def text(self, raw: memoryview, what: str) -> str:
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError:
            raise GGUFError(f"{self.path}: {what} is not UTF-8 text.") from None


def read_string(reader: Reader, what: str) -> str:
    """A GGUF string: a u64 count of bytes, then that many bytes of UTF-8."""
    # TODO: the length (a u64), then that many bytes, read with `reader`
    #   (the page's "Strings and arrays").
    length = None
    raw = None
    # END TODO
    return reader.text(raw, what)


def read_value(reader: Reader, kind: int, what: str) -> object:
    """A metadata value of type `kind`: a number, a bool, a string, or an array
    (its items' type, a u64 count, the items) as a list."""
    if kind in NUMBERS:
        return reader.number(NUMBERS[kind], what)
    if kind == STRING:
        return read_string(reader, what)
    if kind == ARRAY:
        # TODO: the items' value type (a u32), then how many there are (a u64).
        item_kind = None
        count = None
        # END TODO
        if item_kind in NUMBERS:
            return reader.numbers(NUMBERS[item_kind], count, what)
        # TODO: the items, each a value of the items' type, as a list (an item
        #   can be a string, or an array itself).
        return None
        # END TODO
    raise GGUFError(f"{reader.path}: {what} has value type {kind}, which GGUF does not define.")


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the file: its name, its shape in NumPy's order (rows
    first), its block type ("F32", "Q4_1", ...) and where its bytes start."""

    name: str
    shape: tuple[int, ...]
    kind: str
    offset: int  # from the data section's start while reading; then from the file's


def read_tensor_info(reader: Reader, what: str) -> TensorInfo:
    """A tensor info: name, n_dims (u32), the dims (u64 each, innermost
    first), the block type (u32) and the offset (u64) in the data section."""
    name = read_string(reader, f"{what}'s name")
    # TODO: how many dims the tensor has (a u32).
    n_dims = None
    # END TODO
    if n_dims > MAX_DIMS:
        raise GGUFError(f"{reader.path}: {name} has {n_dims} dims; ggml's tensors have at most 4.")
    # TODO: the dims (a u64 each, as the file lists them), the block type's
    #   number (a u32) and the offset (a u64); then the shape, a tuple in
    #   NumPy's order (the page's "ggml's order of dims").
    dims = None
    number = None
    offset = None
    shape = None
    # END TODO
    return TensorInfo(name, shape, GGML_TYPES.get(number, f"type {number}"), offset)


def aligned(position: int, alignment: int) -> int:
    """The first multiple of `alignment` at or after `position`."""
    # TODO: a position already on a multiple stays where it is (the page's
    #   "Alignment").
    return None
    # END TODO


# -- the tensors' bytes, widened to float32 (common/ggml_blocks.py) ----------------


def block_format(info: TensorInfo, path: Path | str) -> BlockFormat:
    """The tensor's block format; a type this reader does not know is refused
    by name, never read as another."""
    # TODO: the format BLOCK_FORMATS has for the tensor's kind; a kind it
    #   lacks raises the error `unknown_type` builds (the page's "Block types").
    known = None
    # END TODO
    return known


def unknown_type(info: TensorInfo, path: Path | str) -> GGUFError:
    """The error for a tensor of a block type this reader does not know, naming it."""
    number = f" (type {TYPE_NUMBERS[info.kind]})" if info.kind in TYPE_NUMBERS else ""
    return GGUFError(
        f"{path}: {info.name} is {info.kind}{number}, which this reader does not know; "
        f"it reads {', '.join(BLOCK_FORMATS)}."
    )


def byte_count(info: TensorInfo, path: Path | str) -> int:
    """How many bytes the tensor takes: whole blocks along its innermost dim."""
    form = block_format(info, path)
    inner = info.shape[-1] if info.shape else 1
    if inner % form.count:
        raise GGUFError(
            f"{path}: {info.name} is {info.kind} with rows of {inner} numbers, "
            f"not a whole number of {form.count}-number blocks."
        )
    return math.prod(info.shape) // form.count * form.size


@dataclass
class GGUFFile:
    """A read GGUF file: its metadata (strings as str, arrays as lists), its
    tensors' infos in file order, and `array(name)` to widen one to float32.
    The bytes are mapped, not read: a tensor's are touched when it is asked for."""

    path: Path
    metadata: dict[str, object]
    tensors: dict[str, TensorInfo]
    data: memoryview = field(repr=False)

    def array(self, name: str) -> np.ndarray:
        """The tensor `name` as float32, in NumPy's shape."""
        info = self.tensors[name]
        form = block_format(info, self.path)
        size = byte_count(info, self.path)
        if info.offset + size > len(self.data):
            raise GGUFError(f"{self.path} ends at byte {len(self.data)}, inside {name}'s data.")
        raw = np.frombuffer(self.data, np.uint8, size, info.offset)
        widened = form.widen(raw.reshape(-1, form.size))
        return widened.astype(np.float32, copy=False).reshape(info.shape)


def file_bytes(path: Path) -> memoryview:
    """The file's bytes, mapped into memory rather than read (a 100 MB file
    costs nothing until a tensor is asked for)."""
    try:
        with open(path, "rb") as file:
            if Path(path).stat().st_size == 0:
                return memoryview(b"")
            return memoryview(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))
    except OSError as error:
        raise GGUFError(f"{path} could not be read: {error.strerror or error}.") from None


def read_gguf(path: Path | str) -> GGUFFile:
    """Read a GGUF file's header, metadata and tensor infos; the tensors'
    bytes stay in the file until `array` asks for one."""
    path = Path(path)
    reader = Reader(file_bytes(path), path)
    magic = bytes(reader.data[:4])
    if magic != MAGIC:
        raise GGUFError(f"{path} is not a GGUF file (it starts with {magic!r}).")
    reader.take(4, "the magic")
    version = reader.number("I", "the header")
    if version not in VERSIONS:
        raise GGUFError(
            f"{path} is GGUF version {version}; this reader reads versions 2 and 3"
            + (" (a big-endian file?)." if version > 0xFFFF else ".")
        )
    tensor_count = reader.number("Q", "the header")
    metadata_count = reader.number("Q", "the header")

    metadata = {}
    for index in range(metadata_count):
        key = read_string(reader, f"metadata key {index}")
        kind = reader.number("I", f"{key}'s value type")
        try:
            metadata[key] = read_value(reader, kind, key)
        except RecursionError:  # only a corrupt file nests arrays a thousand deep
            raise GGUFError(f"{path}: {key} nests arrays too deeply to be read.") from None

    infos = [read_tensor_info(reader, f"tensor info {index}") for index in range(tensor_count)]

    # TODO: the file's alignment: general.alignment if the metadata has it,
    #   else DEFAULT_ALIGNMENT.
    alignment = None
    # END TODO
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0:
        raise GGUFError(f"{path}: general.alignment is {alignment!r}, not a positive integer.")
    # TODO: where the data section starts: the first aligned byte after the
    #   tensor infos (the page's "Alignment").
    start = None
    # END TODO

    tensors = {}
    for info in infos:
        if info.name in tensors:
            raise GGUFError(f"{path} holds two tensors named {info.name}.")
        placed = TensorInfo(info.name, info.shape, info.kind, start + info.offset)
        if placed.kind in BLOCK_FORMATS and placed.offset + byte_count(placed, path) > len(
            reader.data
        ):
            raise GGUFError(f"{path} ends at byte {len(reader.data)}, inside {info.name}'s data.")
        tensors[info.name] = placed
    return GGUFFile(path, metadata, tensors, reader.data)


# -- a Llama-family file as step 23's model ---------------------------------------

# llama.cpp's tensor names, and transformers' (step 23's) for the same tensors.
MODEL_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}
LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def transformers_name(name: str) -> str | None:
    """ "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"; None
    for a tensor step 23's model has no place for."""
    base, dot, suffix = name.rpartition(".")
    if base in MODEL_NAMES:
        return f"{MODEL_NAMES[base]}{dot}{suffix}"
    parts = base.split(".")
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in LAYER_NAMES:
        return f"model.layers.{parts[1]}.{LAYER_NAMES[parts[2]]}{dot}{suffix}"
    return None


def unpermute(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """Undo llama.cpp's converter on q's or k's rows. Within each head, step
    19 rotates row i with row i + head_dim / 2 (the halves); llama.cpp rotates
    rows 2i and 2i + 1, so its converter interleaved the halves. Put them back:
    a head's rows 0, 2, 4, ... are its first half, rows 1, 3, 5, ... its second."""
    rows, cols = weight.shape
    # TODO: each head's rows as (pair, member of the pair) as the converter
    #   left them; then as (half, row in the half), the order step 19 rotates
    #   (the page's "Putting q and k back").
    pairs = None
    return None
    # END TODO


def metadata_number(gguf: GGUFFile, key: str, default: object = None) -> object:
    value = gguf.metadata.get(key, default)
    if value is None:
        raise GGUFError(f"{gguf.path} has no {key}, which a Llama model needs.")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise GGUFError(f"{gguf.path}: {key} is {value!r:.40}, not a positive number.")
    return value


def llama_config(gguf: GGUFFile) -> LlamaConfig:
    """Step 21's LlamaConfig from the `llama.*` metadata; the head is tied to
    the embeddings when the file has no output.weight. A file of another
    architecture, or a Llama with scaled rotary frequencies, is a GGUFError."""
    architecture = gguf.metadata.get("general.architecture")
    if architecture != "llama":
        raise GGUFError(
            f"{gguf.path} holds a {architecture!r} model (general.architecture); this "
            "reader builds Llama-family models ('llama')."
        )
    scaling = gguf.metadata.get("llama.rope.scaling.type", "none")
    if scaling != "none" or "rope_freqs.weight" in gguf.tensors:
        raise GGUFError(
            f"{gguf.path} scales its rotary frequencies; this model computes step 19's "
            "plain rotary tables only."
        )

    def number(key: str, default: object = None):
        return metadata_number(gguf, f"llama.{key}", default)

    heads = int(number("attention.head_count"))
    hidden = int(number("embedding_length"))
    tokens = gguf.metadata.get("tokenizer.ggml.tokens")
    embeddings = gguf.tensors.get("token_embd.weight")
    vocab = len(tokens) if isinstance(tokens, list) else None
    if not vocab and embeddings is not None and embeddings.shape:
        vocab = embeddings.shape[0]
    return LlamaConfig(
        vocab_size=int(number("vocab_size", vocab)),
        hidden_size=hidden,
        intermediate_size=int(number("feed_forward_length")),
        num_hidden_layers=int(number("block_count")),
        num_attention_heads=heads,
        num_key_value_heads=int(number("attention.head_count_kv", heads)),
        head_dim=int(number("attention.key_length", hidden // heads)),
        rope_theta=float(number("rope.freq_base", 10000.0)),
        rms_norm_eps=float(number("attention.layer_norm_rms_epsilon")),
        tie_word_embeddings="output.weight" not in gguf.tensors,
        max_position_embeddings=int(number("context_length")),
    )


def llama_state(gguf: GGUFFile, config: LlamaConfig) -> dict[str, np.ndarray]:
    """Every tensor under transformers' name, float32, q's and k's rows back
    in step 19's order; a tensor the model has no place for is a GGUFError."""
    heads = {"attn_q": config.num_attention_heads, "attn_k": config.num_key_value_heads}
    state = {}
    for name in gguf.tensors:
        ours = transformers_name(name)
        if ours is None:
            raise GGUFError(f"{gguf.path}: {name} has no place in a Llama model.")
        array = gguf.array(name)
        permuted = name.split(".")[-2] if name.startswith("blk.") else None
        if permuted in heads and array.ndim == 2:
            if array.shape[0] % (2 * heads[permuted]):
                raise GGUFError(
                    f"{gguf.path}: {name} has {array.shape[0]} rows, not two halves for "
                    f"each of its {heads[permuted]} heads."
                )
            array = unpermute(array, heads[permuted])
        state[ours] = array
    return to_llama_state(state, config)


def load_gguf_llama(source: Path | str | GGUFFile) -> LlamaForCausalLM:
    """Step 23's model with a GGUF file's weights (its path, or the file read
    already); a file it cannot use is a GGUFError, a tensor of the wrong shape
    a CheckpointError naming it."""
    gguf = source if isinstance(source, GGUFFile) else read_gguf(source)
    config = llama_config(gguf)
    state = llama_state(gguf, config)
    with F.lazy():  # the random initial weights are replaced at once
        model = LlamaForCausalLM(config)
    check_against(state, parameter_shapes(model))
    model.load_state_dict(state)
    return model


__all__ = [
    "CheckpointError",
    "GGUFError",
    "GGUFFile",
    "TensorInfo",
    "llama_config",
    "llama_state",
    "load_gguf_llama",
    "read_gguf",
]
