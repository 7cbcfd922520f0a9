"""Step 29's GGUF reader and the checker's GGUF writer against the trusted
implementation, llama.cpp's own `gguf` package: its GGUFReader reads what
tests/reference_gguf.py writes, and solutions/solution_29.py reads what its
GGUFWriter writes (every block type the step supports), refuses the other
types by name and every corrupt or truncated file with a GGUFError. With
SmolLM2's file installed, the whole state equals the `gguf` package's
dequantized tensors, q and k put back as transformers' GGUF loader puts them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from common import smollm2
from solutions import solution_29 as gguf_reader
from tests import reference_gguf as ref

gguf = pytest.importorskip("gguf")

SUPPORTED = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1"]
METADATA = {
    "general.name": (ref.STRING, "tiny ✓"),
    "t.u8": (ref.U8, 255),
    "t.i8": (ref.I8, -128),
    "t.u16": (ref.U16, 65535),
    "t.i16": (ref.I16, -32768),
    "t.u32": (ref.U32, 2**32 - 1),
    "t.i32": (ref.I32, -(2**31)),
    "t.u64": (ref.U64, 2**64 - 1),
    "t.i64": (ref.I64, -(2**63)),
    "t.f32": (ref.F32, 0.5),
    "t.f64": (ref.F64, 1e-300),
    "t.bool": (ref.BOOL, False),
    "t.strings": (ref.ARRAY, (ref.STRING, ["<s>", "", "Ġé"])),
    "t.numbers": (ref.ARRAY, (ref.I16, [1, -2, 3])),
    "general.alignment": (ref.U32, 64),
}


def reference_file(tmp_path: Path) -> tuple[Path, ref.Layout]:
    rng = np.random.default_rng(0)
    tensors = [
        (f"t.{kind.lower()}", kind, rng.standard_normal((3, 64)).astype(np.float32))
        for kind in [*SUPPORTED, "Q5_0"]
    ]
    tensors.append(("t.q4_k", "Q4_K", np.zeros((2, 256), np.float32)))
    layout = ref.gguf_bytes(METADATA, tensors)
    path = tmp_path / "reference.gguf"
    path.write_bytes(layout.data)
    return path, layout


def test_gguf_package_reads_what_the_reference_writes(tmp_path: Path) -> None:
    path, layout = reference_file(tmp_path)
    reader = gguf.GGUFReader(path)
    for key, (kind, value) in METADATA.items():
        field = reader.fields[key]
        assert int(field.types[0]) == kind, key
        want = value[1] if kind == ref.ARRAY else value
        assert field.contents() == (pytest.approx(want) if kind == ref.F32 else want), key
    assert [t.name for t in reader.tensors] == list(layout.offsets)
    for tensor in reader.tensors:
        assert tensor.data_offset == layout.offsets[tensor.name], tensor.name
        want = layout.arrays[tensor.name]
        assert tensor.tensor_type.name == tensor.name.split(".")[1].upper()
        if want is not None:
            assert tuple(int(d) for d in tensor.shape[::-1]) == want.shape
            widened = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
            np.testing.assert_array_equal(widened.reshape(want.shape), want)


def test_solution_reads_what_the_reference_writes(tmp_path: Path) -> None:
    path, layout = reference_file(tmp_path)
    file = gguf_reader.read_gguf(path)
    assert {key: file.metadata[key] for key in METADATA} == {
        key: value[1] if kind == ref.ARRAY else value for key, (kind, value) in METADATA.items()
    }
    for name, offset in layout.offsets.items():
        assert file.tensors[name].offset == offset
        if layout.arrays[name] is not None:
            np.testing.assert_array_equal(file.array(name), layout.arrays[name])


def gguf_writer_file(path: Path, tensors: dict[str, tuple[str, np.ndarray]]) -> None:
    """A file written by the gguf package: metadata of each kind, and each
    tensor quantized by gguf.quants.quantize (raw bytes for uint8 arrays)."""
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_uint8("t.u8", 7)
    writer.add_int32("t.i32", -5)
    writer.add_uint64("t.u64", 2**40)
    writer.add_float32("t.f32", 0.25)
    writer.add_float64("t.f64", -1.5)
    writer.add_bool("t.bool", True)
    writer.add_string("t.string", "SmolLM ✓")
    writer.add_array("t.strings", ["a", "bc", ""])
    writer.add_array("t.floats", [1.0, 2.5])
    for name, (kind, array) in tensors.items():
        qtype = gguf.GGMLQuantizationType[kind]
        if array.dtype == np.uint8:
            writer.add_tensor(name, array, raw_dtype=qtype)
        elif kind in ("F32", "F16"):
            writer.add_tensor(name, array.astype(np.float32 if kind == "F32" else np.float16))
        else:
            writer.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("kind", SUPPORTED)
def test_solution_reads_what_the_gguf_package_writes(tmp_path: Path, kind: str) -> None:
    rng = np.random.default_rng(1)
    arrays = {"a.2d": rng.standard_normal((5, 96)), "b.3d": rng.standard_normal((2, 3, 64))}
    path = tmp_path / f"{kind}.gguf"
    gguf_writer_file(path, {name: (kind, a.astype(np.float32)) for name, a in arrays.items()})
    file = gguf_reader.read_gguf(path)
    assert file.metadata["general.architecture"] == "llama"
    assert file.metadata["t.string"] == "SmolLM ✓"
    assert file.metadata["t.strings"] == ["a", "bc", ""]
    assert file.metadata["t.floats"] == [1.0, 2.5]
    assert (file.metadata["t.u64"], file.metadata["t.bool"]) == (2**40, True)
    reader = gguf.GGUFReader(path)
    for tensor in reader.tensors:
        info = file.tensors[tensor.name]
        assert (info.kind, info.offset) == (kind, tensor.data_offset)
        want = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        got = file.array(tensor.name)
        assert got.dtype == np.float32 and got.shape == arrays[tensor.name].shape
        np.testing.assert_array_equal(got, want.reshape(got.shape).astype(np.float32))


@pytest.mark.parametrize(("kind", "size"), [("Q5_0", 22 * 2), ("Q4_K", 144), ("Q6_K", 210)])
def test_solution_refuses_other_types_by_name(tmp_path: Path, kind: str, size: int) -> None:
    path = tmp_path / "other.gguf"
    raw = np.arange(2 * size, dtype=np.uint8).reshape(2, size)
    gguf_writer_file(path, {"blk.0.attn_q.weight": (kind, raw)})
    file = gguf_reader.read_gguf(path)
    assert file.tensors["blk.0.attn_q.weight"].kind == kind
    number = gguf.GGMLQuantizationType[kind].value
    with pytest.raises(gguf_reader.GGUFError, match=rf"attn_q.weight is {kind} \(type {number}\)"):
        file.array("blk.0.attn_q.weight")


def small_file(tmp_path: Path) -> bytes:
    path = tmp_path / "small.gguf"
    gguf_writer_file(path, {"w": ("Q4_1", np.ones((2, 32), np.float32))})
    return path.read_bytes()


def read_all(path: Path) -> None:
    file = gguf_reader.read_gguf(path)
    for name in file.tensors:
        file.array(name)


def test_every_truncation_is_a_gguf_error_naming_where(tmp_path: Path) -> None:
    data = small_file(tmp_path)
    path = tmp_path / "cut.gguf"
    path.write_bytes(data)
    # The gguf package pads the file after its last tensor: cuts there lose nothing.
    end = gguf_reader.read_gguf(path).tensors["w"].offset + 2 * 20  # two Q4_1 blocks
    for size in range(end):
        path.write_bytes(data[:size])
        with pytest.raises(gguf_reader.GGUFError) as error:
            read_all(path)
        message = str(error.value)
        assert str(path) in message and "\n" not in message, size
        if size >= 4:
            assert f"ends at byte {size}, inside" in message, (size, message)


def test_corrupt_bytes_are_gguf_errors_or_read(tmp_path: Path) -> None:
    """Bytes changed at random: the file reads, or a GGUFError says why; never
    another exception."""
    data = small_file(tmp_path)
    rng = np.random.default_rng(2)
    path = tmp_path / "corrupt.gguf"
    for _ in range(400):
        spoiled = bytearray(data)
        for where in rng.integers(0, len(data), size=rng.integers(1, 4)):
            spoiled[where] = rng.integers(0, 256)
        path.write_bytes(bytes(spoiled))
        try:
            read_all(path)
        except gguf_reader.GGUFError as error:
            assert "\n" not in str(error)


def test_a_corrupt_llama_file_is_a_gguf_or_checkpoint_error(tmp_path: Path) -> None:
    """The same on a whole little Llama file, through the config and the state."""
    sizes = dict(layers=1, hidden=32, intermediate=32, heads=4, kv_heads=2)
    metadata = ref.llama_metadata(**sizes, theta=1e4, eps=1e-5, context=64)
    rng = np.random.default_rng(4)
    names = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight"]
    names += ["model.layers.0.self_attn.k_proj.weight", "model.norm.weight"]
    shapes = [(10, 32), (32, 32), (16, 32), (32,)]
    state = {name: rng.standard_normal(shape) for name, shape in zip(names, shapes, strict=True)}
    data = ref.gguf_bytes(metadata, ref.llama_tensors(state, 4, 2, "Q8_0")).data
    path = tmp_path / "llama.gguf"
    for _ in range(300):
        spoiled = bytearray(data)
        for where in rng.integers(0, len(data), size=rng.integers(1, 4)):
            spoiled[where] = rng.integers(0, 256)
        path.write_bytes(bytes(spoiled))
        try:
            file = gguf_reader.read_gguf(path)
            gguf_reader.llama_state(file, gguf_reader.llama_config(file))
        except (gguf_reader.GGUFError, gguf_reader.CheckpointError) as error:
            assert "\n" not in str(error)


@pytest.mark.parametrize(
    ("start", "said"),
    [
        (b"PK\x03\x04", "is not a GGUF file (it starts with b'PK\\x03\\x04')"),
        (b"GGUF\x01\x00\x00\x00", "is GGUF version 1; this reader reads versions 2 and 3."),
        (b"GGUF\x00\x00\x00\x03", "(a big-endian file?)"),
        (b"", "is not a GGUF file (it starts with b'')"),
    ],
)
def test_foreign_files_say_what_they_are(tmp_path: Path, start: bytes, said: str) -> None:
    path = tmp_path / "foreign.bin"
    path.write_bytes(start + bytes(40) if start else b"")  # b"": an empty file
    with pytest.raises(gguf_reader.GGUFError) as error:
        gguf_reader.read_gguf(path)
    assert said in str(error.value)


def test_another_architecture_is_refused_naming_it(tmp_path: Path) -> None:
    metadata = ref.llama_metadata(
        layers=1,
        hidden=32,
        intermediate=64,
        heads=4,
        kv_heads=2,
        theta=1e4,
        eps=1e-5,
        context=64,
        architecture="qwen2",
    )
    path = tmp_path / "qwen.gguf"
    path.write_bytes(ref.gguf_bytes(metadata, []).data)
    with pytest.raises(gguf_reader.GGUFError, match="holds a 'qwen2' model"):
        gguf_reader.llama_config(gguf_reader.read_gguf(path))


def test_the_converter_permutation_and_its_inverse() -> None:
    weight = np.arange(4 * 8 * 3).reshape(32, 3)
    stored = ref.converter_permute(weight, 4)
    # One head of 8 rows r0 ... r7 is stored as r0 r4 r1 r5 r2 r6 r3 r7.
    assert stored[:8, 0].tolist() == [0, 12, 3, 15, 6, 18, 9, 21]
    np.testing.assert_array_equal(ref.converter_unpermute(stored, 4), weight)
    np.testing.assert_array_equal(gguf_reader.unpermute(stored, 4), weight)


def test_unpermute_is_transformers_reverse_permutation() -> None:
    """transformers' GGUF loader puts q's and k's rows back the same way."""
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    rng = np.random.default_rng(3)
    for heads, kv_heads in ((9, 3), (4, 4)):
        processor = LlamaTensorProcessor(
            config={"num_attention_heads": heads, "num_key_value_heads": kv_heads}
        )
        for name, count in (("blk.0.attn_q.weight", heads), ("blk.0.attn_k.weight", kv_heads)):
            stored = rng.standard_normal((count * 16, 5)).astype(np.float32)
            want = processor.process(stored, name).weights
            np.testing.assert_array_equal(gguf_reader.unpermute(stored, count), want)


@pytest.mark.skipif(smollm2.gguf_path() is None, reason=f"SmolLM2's file: {smollm2.INSTALL}")
def test_smollm2_state_equals_the_gguf_packages_tensors() -> None:
    path = smollm2.gguf_path()
    file = gguf_reader.read_gguf(path)
    config = gguf_reader.llama_config(file)
    assert (config.num_hidden_layers, config.hidden_size, config.tie_word_embeddings) == (
        30,
        576,
        True,
    )
    state = gguf_reader.llama_state(file, config)
    assert state["lm_head.weight"] is state["model.embed_tokens.weight"]
    ours = {ref.gguf_name(name): name for name in state if name != "lm_head.weight"}
    tensors = gguf.GGUFReader(path).tensors
    assert set(ours) == {tensor.name for tensor in tensors}
    heads = {"attn_q": config.num_attention_heads, "attn_k": config.num_key_value_heads}
    # The gguf package widens slowly: every tensor of layers 0 and 29, and the others.
    for tensor in tensors:
        layer = tensor.name.split(".")[1] if tensor.name.startswith("blk.") else None
        if layer not in (None, "0", "29"):
            continue
        want = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        part = tensor.name.split(".")[-2]
        if part in heads:
            want = ref.converter_unpermute(want, heads[part])
        np.testing.assert_array_equal(state[ours[tensor.name]], want)
