"""Checks for step 29: reading a GGUF file.

The files the checks read are written by tests/reference_gguf.py (NumPy and
struct, from ggml's specification; the `gguf` package reads them the same
way in tests/test_reference_gguf.py), so the checker needs no `gguf` package.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from tests import reference_gguf as ref
from tests.checker import Check, Context, Fail, Step

SHOWN = "check.gguf"  # the name a Reader of the checks' bytes gives in its messages
FOUR_BYTE_LENGTH = (
    "The length is read as 4 bytes (a u32): a GGUF string's length is a u64, 8 bytes, "
    "so the string's first 4 bytes were the length's high half, zeros."
)
NOT_REVERSED = (
    "The dims are in the file's order: ggml lists a tensor's innermost dim (a row's "
    "inputs) first, so a Linear's [out, in] is stored as (in, out). NumPy's shape is the "
    "dims reversed."
)
STILL_PERMUTED = (
    "The rows are still in llama.cpp's order: its converter interleaved each head's two "
    "halves for ggml's rotary pairs of neighbours, and step 19 rotates row i with row "
    "i + head_dim / 2. Loaded this way, SmolLM2 turns every query and key by wrong "
    "angles, and asked 'What is the capital of France?' it ends its answer before it "
    "starts: its first token is <|im_end|>."
)
PERMUTED_AGAIN = (
    "The converter's permutation is applied again instead of undone: it splits each "
    "head's rows into (2 halves, rows of a half) and interleaves them; undoing it reads "
    "them as (rows of a half, 2) and puts the halves back one after the other."
)
ONE_HEAD = (
    "The rows are put back as if the matrix were one head: the converter interleaved "
    "each head's halves on their own, so split the rows into heads first."
)


def reader(ctx: Context, data: bytes):
    """The learner's (given) Reader over `data`."""
    return ctx.call("Reader(...)", ctx.get("Reader"), data, SHOWN)


def position_of(ctx: Context, cursor) -> int:
    position = getattr(cursor, "position", None)
    if not isinstance(position, int):
        raise Fail("The Reader has no integer `position`: keep the given Reader class as it is.")
    return position


# -- strings and values ------------------------------------------------------------


def reads_strings(ctx: Context) -> None:
    read_string = ctx.get("read_string")
    for text in ("blk.0.attn_q.weight", "tokenizer.ggml.tokens", "ab", "Grüße, ✓ café"):
        data = ref.string_bytes(text) + b"\xff" * 8
        cursor = reader(ctx, data)
        got = ctx.call("read_string(reader, what)", read_string, cursor, "a key")
        raw = text.encode("utf-8")
        if got == str((b"\0" * 4 + raw)[: len(raw)], "utf-8", errors="replace"):
            raise Fail(f"read_string read {got!r} from the string {text!r}.", FOUR_BYTE_LENGTH)
        if got != text:
            raise Fail(
                f"read_string read {got!r}, expected {text!r} (its bytes: a u64 length of "
                f"{len(raw)}, then {raw!r}).",
                "A string is its length in bytes (a u64), then that many bytes of UTF-8.",
            )
        if position_of(ctx, cursor) != 8 + len(raw):
            raise Fail(
                f"After the string {text!r}, the reader is at byte {cursor.position}, expected "
                f"{8 + len(raw)}: the 8 bytes of its length, then its {len(raw)} bytes.",
            )


# value type, value, what a reader returns (None: the value itself), its name.
VALUES = [
    (ref.U8, 200, None, "a u8"),
    (ref.I8, -7, None, "an i8"),
    (ref.U16, 50_000, None, "a u16"),
    (ref.I16, -20_000, None, "an i16"),
    (ref.U32, 3_000_000_000, None, "a u32"),
    (ref.I32, -2_000_000_000, None, "an i32"),
    (ref.U64, 2**40 + 3, None, "a u64"),
    (ref.I64, -(2**40), None, "an i64"),
    (ref.F32, 1e-5, float(np.float32(1e-5)), "an f32"),
    (ref.F64, 0.1, None, "an f64"),
    (ref.BOOL, True, None, "a bool"),
    (ref.STRING, "llama", None, "a string"),
    (ref.ARRAY, (ref.U32, [7, 8, 9]), [7, 8, 9], "an array of u32s"),
    (ref.ARRAY, (ref.STRING, ["<|im_start|>", "Ġthe", ""]), None, "an array of strings"),
    (ref.ARRAY, (ref.ARRAY, [(ref.I8, [1, -1]), (ref.I8, [])]), [[1, -1], []], "nested arrays"),
    (ref.ARRAY, (ref.F32, []), [], "an empty array"),
]


def same_value(got: object, want: object) -> bool:
    """Equal, and of the same Python kind (a bool is not an int here)."""
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(same_value(g, w) for g, w in zip(got, want, strict=True))
        )
    return type(got) is type(want) and got == want


def reads_values(ctx: Context) -> None:
    read_value = ctx.get("read_value")
    for kind, value, expected, what in VALUES:
        want = (value[1] if kind == ref.ARRAY else value) if expected is None else expected
        data = ref.value_bytes(kind, value)
        cursor = reader(ctx, data + b"\xff" * 8)
        got = ctx.call(f"read_value on {what}", read_value, cursor, kind, "a key")
        if kind == ref.ARRAY and isinstance(got, list) and got == [0, *want[:-1]]:
            raise Fail(
                f"read_value read {what} {want} as {got}.",
                "The array's count is read as 4 bytes (a u32): it is a u64, 8 bytes, so the "
                "first item was read from the count's high half, zeros.",
            )
        if not same_value(got, want):
            raise Fail(
                f"read_value read {what} as {got!r} ({type(got).__name__}), expected "
                f"{want!r} ({type(want).__name__}).",
                "An array is its items' value type (a u32), their count (a u64), then the "
                "items, each read as a value of that type, returned as a list.",
            )
        if position_of(ctx, cursor) != len(data):
            raise Fail(
                f"After {what}, the reader is at byte {cursor.position}; the value takes "
                f"{len(data)} bytes.",
            )


# -- tensor infos and alignment ---------------------------------------------------

INFOS = [
    ("blk.0.ffn_up.weight", "Q4_1", (1536, 576), 4096),
    ("blk.0.attn_norm.weight", "F32", (576,), 0),
    ("token_embd.weight", "Q8_0", (49152, 576), 1785632),
    ("a.stack", "F16", (2, 3, 64), 96),
]


def reads_tensor_infos(ctx: Context) -> None:
    read_tensor_info = ctx.get("read_tensor_info")
    for name, kind, shape, offset in INFOS:
        data = ref.info_bytes(name, kind, shape, offset)
        cursor = reader(ctx, data + b"\xff" * 8)
        info = ctx.call("read_tensor_info(reader, what)", read_tensor_info, cursor, "an info")
        fields = {
            field: getattr(info, field, None) for field in ("name", "shape", "kind", "offset")
        }
        got_shape = fields["shape"]
        if isinstance(got_shape, (list, tuple)) and tuple(got_shape) == shape[::-1] != shape:
            raise Fail(
                f"{name}'s shape is {tuple(got_shape)}; in NumPy's order it is {shape}.",
                NOT_REVERSED,
            )
        if not isinstance(got_shape, tuple) or got_shape != shape:
            raise Fail(
                f"{name}'s shape is {got_shape!r}, expected the tuple {shape}.",
                "n_dims (a u32), then that many dims (a u64 each), reversed into a tuple.",
            )
        want = {"name": name, "shape": shape, "kind": kind, "offset": offset}
        for field, value in want.items():
            if fields[field] != value:
                raise Fail(
                    f"The info of {name}: {field} is {fields[field]!r}, expected {value!r}.",
                    "After the dims: the block type's number (a u32), then the offset (a u64).",
                )
        if position_of(ctx, cursor) != len(data):
            raise Fail(
                f"After {name}'s info, the reader is at byte {cursor.position}; the info "
                f"takes {len(data)} bytes.",
            )


ALIGNED = [(0, 32), (1, 32), (31, 32), (32, 32), (33, 32), (100, 64), (128, 64), (5, 1), (77, 8)]


def aligns(ctx: Context) -> None:
    aligned = ctx.get("aligned")
    for position, alignment in ALIGNED:
        got = ctx.call(f"aligned({position}, {alignment})", aligned, position, alignment)
        want = ref.aligned(position, alignment)
        if got == want:
            continue
        said = f"aligned({position}, {alignment}) is {got!r}, expected {want}."
        if got == position // alignment * alignment:
            raise Fail(said, "It rounds down: the data section cannot start inside the infos.")
        if got == (position // alignment + 1) * alignment:
            raise Fail(
                said,
                "A position already on a multiple of the alignment moves on by a whole "
                "alignment: it stays where it is.",
            )
        raise Fail(said, "The first multiple of the alignment at or after the position.")


# -- whole files --------------------------------------------------------------------


def small_tensors(ctx: Context) -> list[tuple[str, str, np.ndarray]]:
    """One tensor of each type step 29 reads, of different shapes."""
    shapes = {"F32": (3, 40), "F16": (5,), "BF16": (2, 3, 8), "Q8_0": (4, 64)}
    shapes.update({"Q4_0": (3, 96), "Q4_1": (6, 32)})
    return [(f"t.{kind.lower()}", kind, ctx.normal(*shapes[kind])) for kind in ref.READ]


def misaligned_file(ctx: Context, alignment: int | None) -> ref.Layout:
    """A file whose infos end off the alignment, and off 64 once aligned to 32,
    so that every way of ignoring the alignment gives other offsets."""
    tensors = small_tensors(ctx)
    for pad in range(1, 64):
        metadata = {"general.name": (ref.STRING, "x" * pad)}
        if alignment is not None:
            metadata["general.alignment"] = (ref.U32, alignment)
        layout = ref.gguf_bytes(metadata, tensors)
        if layout.infos_end % 32 and ref.aligned(layout.infos_end, 32) % 64:
            return layout
    raise AssertionError("no padding misaligns the file")


def read_file(ctx: Context, layout: ref.Layout, folder: Path, name: str = "model.gguf"):
    path = folder / name
    path.write_bytes(layout.data)
    return ctx.call(f"read_gguf({name})", ctx.get("read_gguf"), path)


def expect_offsets(gguf, layout: ref.Layout) -> None:
    tensors = getattr(gguf, "tensors", None)
    if not isinstance(tensors, dict) or list(tensors) != list(layout.offsets):
        raise Fail(
            f"read_gguf's .tensors is {tensors!r:.200}, expected a dict of the file's "
            f"{len(layout.offsets)} tensor infos by name, in file order.",
        )
    ignored = {
        "The alignment is ignored: the data section starts at the first multiple of the "
        "alignment at or after the end of the tensor infos, not right after them.": (
            layout.infos_end
        ),
        "general.alignment is ignored: this file sets it to 64, and the data section "
        "starts at a multiple of 64.": ref.aligned(layout.infos_end, 32),
        "The offsets are left as the infos store them, from the data section's start; "
        "a TensorInfo's offset counts from the file's start.": 0,
    }
    for name, want in layout.offsets.items():
        got = getattr(tensors[name], "offset", None)
        if got == want:
            continue
        said = f"{name} is at byte {got!r} of the file; its data starts at byte {want}."
        for explanation, start in ignored.items():
            if start != layout.data_start and got == start + layout.relative[name]:
                raise Fail(said, explanation)
        raise Fail(said, "The data section starts at the aligned end of the tensor infos.")


def expect_arrays(gguf, layout: ref.Layout) -> None:
    for name, info in gguf.tensors.items():
        kind, want = info.kind, layout.arrays[name]
        got = gguf.array(name)
        if not isinstance(got, np.ndarray) or got.dtype != np.float32 or got.shape != want.shape:
            raise Fail(
                f".array({name!r}) ({kind}) gave {type(got).__name__} "
                f"{getattr(got, 'dtype', '')} {list(getattr(got, 'shape', ()))}, expected "
                f"float32 {list(want.shape)}.",
            )
        if not np.array_equal(got, want):
            raise Fail(
                f".array({name!r}) ({kind}) is not what its blocks stand for: largest "
                f"difference {float(np.max(np.abs(got - want))):.3g}.",
                "Its bytes start at its offset, whole blocks along the innermost dim.",
            )


def finds_the_data(ctx: Context) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for alignment in (None, 64):
            layout = misaligned_file(ctx, alignment)
            gguf = read_file(ctx, layout, Path(folder), f"aligned_{alignment or 32}.gguf")
            expect_offsets(gguf, layout)
            metadata = getattr(gguf, "metadata", None)
            if not isinstance(metadata, dict) or "general.name" not in metadata:
                raise Fail(f"read_gguf's .metadata is {metadata!r:.200}, expected a dict by key.")
            ctx.call(".array(name)", expect_arrays, gguf, layout)


UNKNOWN = [("blk.0.attn_q.weight", "Q4_K", (4, 256)), ("blk.0.ffn_up.weight", "Q5_0", (2, 64))]


def refuses_unknown_types(ctx: Context) -> None:
    GGUFError = ctx.get("GGUFError")
    tensors = [(name, kind, np.zeros(shape, np.float32)) for name, kind, shape in UNKNOWN]
    layout = ref.gguf_bytes({}, [("t.f32", "F32", ctx.normal(2, 8)), *tensors])
    with tempfile.TemporaryDirectory() as folder:
        gguf = read_file(ctx, layout, Path(folder))
        for name, kind, _ in UNKNOWN:
            number = ref.TYPE_NUMBER[kind]
            said = f"{name} is {kind} (type {number}), which this reader does not know"
            try:
                got = gguf.array(name)
            except GGUFError as error:
                message = str(error)
                if kind not in message or name not in message:
                    raise Fail(
                        f".array({name!r}) raised GGUFError({message!r}), which does not say "
                        f"that {said}.",
                        "The message names the tensor and its kind (unknown_type builds it).",
                    ) from None
                continue
            except Exception as error:
                raise Fail(
                    f".array({name!r}) raised {type(error).__name__}: {error}; a {kind} "
                    "tensor is refused with a GGUFError that names it.",
                    "Raise the error unknown_type builds when BLOCK_FORMATS lacks the kind.",
                ) from None
            raise Fail(
                f".array({name!r}) returned {type(got).__name__}: {said}.",
                f"A block type it does not know is read as another: {kind}'s blocks are laid "
                "out otherwise, so the numbers are garbage. Refuse it by name.",
            )


# -- q and k, and the whole Llama state ------------------------------------------------


def unpermutes(ctx: Context) -> None:
    unpermute = ctx.get("unpermute")
    for heads, head_dim, cols in ((3, 8, 5), (2, 64, 3)):
        weight = ctx.normal(heads * head_dim, cols)
        stored = ref.converter_permute(weight, heads)
        got = ctx.call("unpermute(weight, num_heads)", unpermute, stored.copy(), heads)
        got = np.asarray(got) if got is not None else None
        if got is None or got.shape != weight.shape:
            raise Fail(
                f"unpermute of a [{heads * head_dim}, {cols}] matrix of {heads} heads gave "
                f"{None if got is None else list(got.shape)}, expected the same shape.",
            )
        if np.array_equal(got, weight):
            continue
        said = f"unpermute of {heads} heads of {head_dim} rows does not give the rows back."
        wrong = {
            STILL_PERMUTED: stored,
            PERMUTED_AGAIN: ref.converter_permute(stored, heads),
            ONE_HEAD: stored.reshape(-1, 2, cols).swapaxes(0, 1).reshape(weight.shape),
        }
        for explanation, rows in wrong.items():
            if np.array_equal(got, rows):
                raise Fail(said, explanation)
        raise Fail(said, "Within each head, rows 0, 2, 4, ... are its first half.")


SIZES = dict(layers=2, hidden=32, intermediate=64, heads=4, kv_heads=2)


def tiny_llama(ctx: Context, tied: bool) -> dict[str, np.ndarray]:
    hidden, inter, vocab = SIZES["hidden"], SIZES["intermediate"], 40
    head_dim = hidden // SIZES["heads"]
    state = {"model.embed_tokens.weight": ctx.normal(vocab, hidden)}
    for i in range(SIZES["layers"]):
        layer = f"model.layers.{i}."
        state[layer + "input_layernorm.weight"] = ctx.normal(hidden)
        state[layer + "self_attn.q_proj.weight"] = ctx.normal(hidden, hidden)
        state[layer + "self_attn.k_proj.weight"] = ctx.normal(SIZES["kv_heads"] * head_dim, hidden)
        state[layer + "self_attn.v_proj.weight"] = ctx.normal(SIZES["kv_heads"] * head_dim, hidden)
        state[layer + "self_attn.o_proj.weight"] = ctx.normal(hidden, hidden)
        state[layer + "post_attention_layernorm.weight"] = ctx.normal(hidden)
        state[layer + "mlp.gate_proj.weight"] = ctx.normal(inter, hidden)
        state[layer + "mlp.up_proj.weight"] = ctx.normal(inter, hidden)
        state[layer + "mlp.down_proj.weight"] = ctx.normal(hidden, inter)
    state["model.norm.weight"] = ctx.normal(hidden)
    if not tied:
        state["lm_head.weight"] = ctx.normal(vocab, hidden)
    return state


def loads_llama_state(ctx: Context) -> None:
    metadata = ref.llama_metadata(**SIZES, theta=100.0, eps=1e-5, context=64)
    with tempfile.TemporaryDirectory() as folder:
        for tied in (True, False):
            state = tiny_llama(ctx, tied)
            tensors = ref.llama_tensors(state, SIZES["heads"], SIZES["kv_heads"])
            gguf = read_file(ctx, ref.gguf_bytes(metadata, tensors), Path(folder))
            config = ctx.call("llama_config(gguf)", ctx.get("llama_config"), gguf)
            got = ctx.call("llama_state(gguf, config)", ctx.get("llama_state"), gguf, config)
            want = dict(state)
            if tied:
                want["lm_head.weight"] = state["model.embed_tokens.weight"]
            if not isinstance(got, dict) or set(got) != set(want):
                names = sorted(set(got) ^ set(want)) if isinstance(got, dict) else got
                raise Fail(f"llama_state's names differ from step 23's model's: {names!r:.300}.")
            for name, array in want.items():
                if np.array_equal(got[name], array):
                    continue
                said = f"llama_state's {name} is not the checkpoint's."
                if ".k_proj." in name:
                    heads = SIZES["heads"]
                    stored = ref.converter_permute(array, SIZES["kv_heads"])
                    if np.array_equal(got[name], stored):
                        raise Fail(said, STILL_PERMUTED)
                    if np.array_equal(got[name], ref.converter_unpermute(stored, heads)):
                        raise Fail(
                            said,
                            f"k's rows are un-permuted as {heads} heads (num_attention_heads); "
                            f"the converter permuted k by its own {SIZES['kv_heads']} heads, "
                            "num_key_value_heads.",
                        )
                if ".q_proj." in name and np.array_equal(
                    got[name], ref.converter_permute(array, SIZES["heads"])
                ):
                    raise Fail(said, STILL_PERMUTED)
                raise Fail(said, "Each tensor widened, q and k un-permuted by their own heads.")


STEP = Step(
    number=29,
    required={
        "read_string": [],
        "read_value": [],
        "read_tensor_info": [],
        "aligned": [],
        "block_format": [],
        "read_gguf": [],
        "unpermute": [],
    },
    checks=[
        Check("read_string reads a u64 length, then UTF-8", reads_strings),
        Check("read_value reads numbers, strings and arrays", reads_values),
        Check("read_tensor_info gives the shape in NumPy's order", reads_tensor_infos),
        Check("aligned rounds up to a multiple of the alignment", aligns),
        Check("read_gguf finds each tensor in the aligned data section", finds_the_data),
        Check("a block type the reader does not know is refused by name", refuses_unknown_types),
        Check("unpermute puts q's and k's rows back in step 19's order", unpermutes),
        Check("llama_state gives step 23's names, q and k un-permuted", loads_llama_state),
    ],
)
