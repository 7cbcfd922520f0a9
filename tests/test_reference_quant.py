"""tests/reference_quant.py and step 27's solution against the trusted
implementation: the `gguf` package's quantizer and dequantizer (llama.cpp's
own Python, bit-exact with ggml-quants.c), byte for byte; and on the real
SmolLM2-135M-Instruct GGUF file where it is installed (common/smollm2.py),
skipped by name where it is not."""

from __future__ import annotations

import numpy as np
import pytest

from common import max_runtime, smollm2
from tests import reference_quant as ref

gguf = pytest.importorskip("gguf", reason="the gguf package is the oracle: pip install gguf")
Q8_0 = gguf.GGMLQuantizationType.Q8_0
Q4_0 = gguf.GGMLQuantizationType.Q4_0
Q4_1 = gguf.GGMLQuantizationType.Q4_1


def random_weight(rows: int = 48, columns: int = 160, seed: int = 0) -> np.ndarray:
    """Rows of different sizes, one outlier, one all-zero block, and weights on
    exact half steps (ties, where rounding rules differ)."""
    rng = np.random.default_rng(seed)
    weight = rng.standard_normal((rows, columns)) * rng.uniform(0.01, 1.0, (rows, 1))
    weight[3, 7] = 9.0
    weight[5, 32:64] = 0.0
    weight[6, :32] = np.arange(-16, 16) + 0.5  # a step of 15.5 / 127: ties at +-0.5 steps
    weight[6, 31] = 127.0
    return weight.astype(np.float32)


def test_q8_0_bytes_are_ggmls() -> None:
    weight = random_weight()
    ours = ref.q8_0_bytes(*ref.quantize_q8_0(weight))
    assert np.array_equal(ours, gguf.quants.quantize(weight, Q8_0))


def test_q8_0_dequantizes_as_ggml_does() -> None:
    blocks = gguf.quants.quantize(random_weight(seed=1), Q8_0)
    ours = ref.dequantize_q8_0(*ref.q8_0_from_bytes(blocks))
    assert np.array_equal(ours, gguf.quants.dequantize(blocks, Q8_0))


def test_rounding_is_cs_roundf() -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, 3.2], dtype=np.float32)
    assert ref.round_half_away(x).tolist() == [-3, -2, -1, 1, 2, 3, 0, 3]
    assert np.array_equal(ref.round_half_away(x), gguf.quants.np_roundf(x))


def test_the_solutions_quantizer_is_ggmls() -> None:
    """The learner's reference answer writes the same bytes as llama.cpp."""
    from solutions.solution_27 import quantize_q8_0

    weight = random_weight(seed=2)
    scales, values = quantize_q8_0(weight)
    assert scales.dtype == np.float16 and values.dtype == np.int8
    assert np.array_equal(ref.q8_0_bytes(scales, values), gguf.quants.quantize(weight, Q8_0))


def test_the_solutions_dequantize_in_the_graph_is_ggmls() -> None:
    from max.experimental.tensor import Tensor

    from solutions.solution_27 import Q8Linear, dequantize_q8_0

    max_runtime.prepare()
    blocks = gguf.quants.quantize(random_weight(seed=3), Q8_0)
    scales, values = ref.q8_0_from_bytes(blocks)
    want = gguf.quants.dequantize(blocks, Q8_0)
    got = dequantize_q8_0(Tensor(scales), Tensor(values)).to_numpy()
    assert np.array_equal(got, want)
    layer = Q8Linear(want.shape[1], want.shape[0])
    layer.load_state_dict({"scales": scales, "values": values})
    x = np.random.default_rng(4).standard_normal((3, want.shape[1])).astype(np.float32)
    np.testing.assert_allclose(layer(Tensor(x)).to_numpy(), x @ want.T, rtol=1e-5, atol=1e-4)


def test_nibbles_are_in_ggmls_order() -> None:
    """Byte j of a block holds value j in its low nibble, value j + 16 in its high one."""
    levels = np.arange(32, dtype=np.uint8) % 16
    packed = ref.pack_nibbles(levels)
    assert packed[0] == 0x00 and packed[1] == (1 | 1 << 4) and packed[15] == (15 | 15 << 4)
    shuffled = np.random.default_rng(5).integers(0, 16, (3, 4, 32)).astype(np.uint8)
    packed = ref.pack_nibbles(shuffled)
    assert np.array_equal(packed & 0x0F, shuffled[..., :16])
    assert np.array_equal(packed >> 4, shuffled[..., 16:])
    assert np.array_equal(ref.unpack_nibbles(packed), shuffled)


def test_q4_0_bytes_are_ggmls() -> None:
    weight = random_weight(seed=6)
    blocks = ref.q4_0_bytes(*ref.quantize_q4_0(weight))
    assert np.array_equal(blocks, gguf.quants.quantize(weight, Q4_0))
    ours = ref.dequantize_q4_0(*ref.q4_0_from_bytes(blocks))
    assert np.array_equal(ours, gguf.quants.dequantize(blocks, Q4_0))


def test_q4_1_bytes_are_ggmls() -> None:
    weight = random_weight(seed=7)
    blocks = ref.q4_1_bytes(*ref.quantize_q4_1(weight))
    assert np.array_equal(blocks, gguf.quants.quantize(weight, Q4_1))
    ours = ref.dequantize_q4_1(*ref.q4_1_from_bytes(blocks))
    assert np.array_equal(ours, gguf.quants.dequantize(blocks, Q4_1))


# -- the real file -------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2_tensors() -> dict:
    path = smollm2.gguf_path()
    if path is None:
        pytest.skip(f"SmolLM2-135M-Instruct's GGUF file is not installed ({smollm2.INSTALL})")
    return {tensor.name: tensor for tensor in gguf.GGUFReader(path).tensors}


def test_the_files_q8_0_embedding_reads_back_as_ggml_reads_it(smollm2_tensors) -> None:
    """SmolLM2's token embedding is Q8_0: split into scales and values, it
    dequantizes to what gguf does, and quantizing that gives the file's bytes."""
    embedding = smollm2_tensors["token_embd.weight"]
    assert embedding.tensor_type == Q8_0
    data = np.asarray(embedding.data)
    scales, values = ref.q8_0_from_bytes(data)
    weight = ref.dequantize_q8_0(scales, values)
    assert np.array_equal(weight, gguf.quants.dequantize(data, Q8_0))
    assert np.array_equal(ref.q8_0_bytes(*ref.quantize_q8_0(weight)), data)


def test_quantizing_a_real_layer_is_ggmls(smollm2_tensors) -> None:
    """A trained layer's weights (the file's 4-bit blocks widened) land on exact
    ties where NumPy's round and ggml's disagree: the bytes must still match."""
    from solutions.solution_27 import quantize_q8_0

    layer = smollm2_tensors["blk.0.ffn_gate.weight"]
    weight = gguf.quants.dequantize(layer.data, layer.tensor_type)
    want = gguf.quants.quantize(weight, Q8_0)
    assert np.array_equal(ref.q8_0_bytes(*ref.quantize_q8_0(weight)), want)
    assert np.array_equal(ref.q8_0_bytes(*quantize_q8_0(weight)), want)


def test_the_files_q4_1_layers_read_back_as_ggml_reads_them(smollm2_tensors) -> None:
    """Every Q4_1 matrix of SmolLM2's file: split into scales, minimums and
    nibbles, it dequantizes to what gguf does."""
    layers = [t for t in smollm2_tensors.values() if t.tensor_type == Q4_1]
    assert len(layers) == 210  # 30 layers of 7 matrices
    for layer in layers[::10]:
        data = np.asarray(layer.data)
        ours = ref.dequantize_q4_1(*ref.q4_1_from_bytes(data))
        assert np.array_equal(ours, gguf.quants.dequantize(data, Q4_1)), layer.name


def test_the_solutions_four_bit_quantizers_are_ggmls() -> None:
    from solutions.solution_28 import quantize_q4_0, quantize_q4_1

    weight = random_weight(seed=8)
    weight[7, :2] = 9.0, -9.0  # two largest magnitudes of opposite signs: a level capped at 15
    assert np.array_equal(
        ref.q4_0_bytes(*quantize_q4_0(weight)), gguf.quants.quantize(weight, Q4_0)
    )
    assert np.array_equal(
        ref.q4_1_bytes(*quantize_q4_1(weight)), gguf.quants.quantize(weight, Q4_1)
    )


def test_the_solutions_graph_dequantizes_the_files_q4_1_as_ggml_does(smollm2_tensors) -> None:
    """SmolLM2's first attention query matrix, its Q4_1 blocks unpacked and
    dequantized by step 28's solution in a MAX graph."""
    from max.experimental.tensor import Tensor

    from solutions.solution_28 import dequantize_q4_1

    max_runtime.prepare()
    layer = smollm2_tensors["blk.0.attn_q.weight"]
    data = np.asarray(layer.data)
    parts = ref.q4_1_from_bytes(data)
    got = dequantize_q4_1(*(Tensor(part) for part in parts)).to_numpy()
    assert np.array_equal(got, gguf.quants.dequantize(data, Q4_1))
