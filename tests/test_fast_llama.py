"""fast/llama.py and its kernels (fast/kernels/ggml_rows.mojo, llama_decode.mojo).

The kernels are checked against NumPy's product with the widened blocks
(common/ggml_blocks.py), for every block type, one row and several, row
counts that leave the cores' claims uneven and 4-bit rows after the last
whole group (fast/llama_files.py's grouped_blocks). The model is checked against
step 23's on two tiny GGUF files: one whose layers hold every kind of matrix
the fast path reads (Q8_0, Q4_0 and Q4_1 blocks, float32, bfloat16 and
float16 rows, a layer whose q, k and v differ and so are not fused), run as
MAX's operations around our projections; and one whose layers are all Q4_1,
a decoded token's layers in one call of our kernel; and that one as the
gguf package writes it. The same logits for a prompt and each decoded
token, the same greedy tokens.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from common.checkpoint import read_safetensors
from common.ggml_blocks import BLOCK_FORMATS
from common.random_checkpoint import write_random_llama
from fast.bfloat16 import bfloat16_rounded
from fast.llama import grouped_blocks
from tests import reference_gguf as writer

BLOCK_KINDS = ("Q8_0", "Q4_0", "Q4_1")

# -- the kernels ------------------------------------------------------------------


@pytest.fixture(scope="module")
def kernels():
    """Each block type's product and row lookup, in one graph compiled once
    with symbolic shapes: (x [rows, in], blocks [out, bytes], ids) -> outputs."""
    from max.driver import CPU
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.graph import DeviceRef, Graph, TensorType, ops

    from common import max_runtime
    from fast.kernel_ops import KERNELS

    cpu = DeviceRef.CPU()
    types = [TensorType(DType.float32, ["rows", "in"], device=cpu)]
    types += [TensorType(DType.uint8, [f"out_{k}", f"bytes_{k}"], device=cpu) for k in BLOCK_KINDS]
    types += [TensorType(DType.int64, ["ids"], device=cpu)]
    library = max_runtime.precompiled(KERNELS)
    with Graph("ggml_rows", input_types=types, custom_extensions=[library]) as graph:
        x, *tables, ids = graph.inputs
        outputs = []
        for kind, table in zip(BLOCK_KINDS, tables, strict=True):
            n_out, n_in = table.tensor.shape[0], x.tensor.shape[1]
            product = TensorType(DType.float32, [x.tensor.shape[0], n_out], device=cpu)
            rows = TensorType(DType.float32, [ids.tensor.shape[0], n_in], device=cpu)
            outputs.append(ops.custom(f"ggml_rows_{kind.lower()}", cpu, [x, table], [product])[0])
            outputs.append(ops.custom(f"ggml_gather_{kind.lower()}", cpu, [ids, table], [rows])[0])
        graph.output(*outputs)
    model = InferenceSession(devices=[CPU()]).load(graph)

    def run(x, tables, ids):
        results = model.execute(x, *tables, ids)
        return [result.to_numpy() for result in results]

    return run


def random_blocks(kind: str, n_out: int, n_in: int, rng) -> np.ndarray:
    """Blocks of `kind` for a [n_out, n_in] matrix, every level used: random
    bytes, with scales (and Q4_1's minimums) that are ordinary float16 numbers."""
    form = BLOCK_FORMATS[kind]
    blocks = n_in // 32
    raw = rng.integers(0, 256, size=(n_out, blocks, form.size), dtype=np.uint8)
    scale_bytes = 4 if kind == "Q4_1" else 2
    scales = rng.uniform(-0.05, 0.05, (n_out, blocks, scale_bytes // 2)).astype("<f2")
    raw[:, :, :scale_bytes] = scales.view(np.uint8).reshape(n_out, blocks, scale_bytes)
    return raw.reshape(n_out, -1)


def widened(kind: str, table: np.ndarray) -> np.ndarray:
    form = BLOCK_FORMATS[kind]
    return form.widen(table.reshape(-1, form.size)).reshape(table.shape[0], -1)


def rounded_levels(x: np.ndarray) -> np.ndarray:
    """A decoded token's x as its products with blocks see it (token_rows.mojo):
    each block of 32 rounded to int16 levels (half to even) of the scale max|x| / 32767."""
    blocks = x.reshape(*x.shape[:-1], -1, 32)
    top = np.abs(blocks).max(axis=-1, keepdims=True)
    inverse = np.divide(np.float32(32767), top, out=np.zeros_like(top), where=top > 0)
    levels = np.rint(blocks * inverse)
    return (levels * (top / np.float32(32767))).reshape(x.shape)


# rows of x, outputs, inputs: one token and a prompt's few (whole tiles of four
# and rows left over), outputs that leave the cores' last claims and tiles short
# and fewer than the eight streams a core reads; a prompt whose x comes in
# several chunks (20 rows of 1536 a chunk), the last one short and odd, against
# panels of 32 weight rows and a short last one.
SHAPES = [
    (1, 37, 64),
    (1, 3, 32),
    (5, 100, 96),
    (6, 37, 64),
    (1, 1536, 576),
    (9, 576, 1536),
    (45, 70, 1536),
]


@pytest.mark.parametrize("rows, n_out, n_in", SHAPES)
def test_the_kernels_multiply_and_look_up_every_block_type_as_numpy_does(
    kernels, rows, n_out, n_in
):
    rng = np.random.default_rng(n_out)
    tables = [random_blocks(kind, n_out, n_in, rng) for kind in BLOCK_KINDS]
    x = rng.standard_normal((rows, n_in)).astype(np.float32)
    x[0, 32:64] = 0  # a block of zeros: its scale is 0
    ids = np.array([0, n_out - 1, n_out // 2], dtype=np.int64)
    held = [grouped_blocks(kind, table) for kind, table in zip(BLOCK_KINDS, tables, strict=True)]
    outputs = kernels(x, held, ids)
    # One token multiplies x rounded to 16-bit levels; a prompt's rows, x itself
    # in float32 panels, or rounded as one token's in int_panels.mojo (a CPU with
    # AVX-512's VNNI), 1/65534 of a block's largest: well inside the tolerance.
    x_seen = rounded_levels(x) if rows == 1 else x
    for index, (kind, table) in enumerate(zip(BLOCK_KINDS, tables, strict=True)):
        weight = widened(kind, table)
        product, rows_looked_up = outputs[2 * index], outputs[2 * index + 1]
        expected = x_seen.astype(np.float64) @ weight.T.astype(np.float64)
        scale = np.abs(x).sum(axis=1, keepdims=True) * np.abs(weight).max()
        assert np.all(np.abs(product - expected) <= 1e-5 * scale + 1e-6), kind
        np.testing.assert_array_equal(rows_looked_up, weight[ids], err_msg=kind)


@pytest.fixture(scope="module")
def plain_kernels():
    """ggml_rows_f32 and ggml_rows_bf16 in one graph: (x [rows, in], w float32
    [out, in]) -> (x times w's rows, x times w's rows rounded to bfloat16)."""
    from max.driver import CPU
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.graph import DeviceRef, Graph, TensorType, ops

    from common import max_runtime
    from fast.kernel_ops import KERNELS

    cpu = DeviceRef.CPU()
    types = [
        TensorType(DType.float32, dims, device=cpu) for dims in (["rows", "in"], ["out", "in"])
    ]
    library = max_runtime.precompiled(KERNELS)
    with Graph("plain_rows", input_types=types, custom_extensions=[library]) as graph:
        x, w = graph.inputs
        product = TensorType(DType.float32, [x.tensor.shape[0], w.tensor.shape[0]], device=cpu)
        rounded = ops.cast(w, DType.bfloat16)
        graph.output(
            ops.custom("ggml_rows_f32", cpu, [x, w], [product])[0],
            ops.custom("ggml_rows_bf16", cpu, [x, rounded], [product])[0],
        )
    model = InferenceSession(devices=[CPU()]).load(graph)
    return lambda x, w: [result.to_numpy() for result in model.execute(x, w)]


@pytest.mark.parametrize("rows, n_out, n_in", SHAPES)
def test_plain_rows_multiply_as_numpy_does(plain_kernels, rows, n_out, n_in):
    """A prompt's rows widen float32 or bfloat16 rows into the blocks' panels; one token's read them in streams."""
    rng = np.random.default_rng(n_in)
    w = rng.standard_normal((n_out, n_in)).astype(np.float32)
    x = rng.standard_normal((rows, n_in)).astype(np.float32)
    for product, weight in zip(plain_kernels(x, w), [w, bfloat16_rounded(w)], strict=True):
        expected = x.astype(np.float64) @ weight.T.astype(np.float64)
        scale = np.abs(x).sum(axis=1, keepdims=True) * np.abs(weight).max()
        assert np.all(np.abs(product - expected) <= 1e-5 * scale + 1e-6)


def test_the_kernels_refuse_rows_that_are_not_whole_blocks(kernels):
    rng = np.random.default_rng(0)
    tables = [random_blocks(kind, 4, 64, rng) for kind in BLOCK_KINDS]
    x = np.zeros((1, 48), dtype=np.float32)  # 48 inputs: a block and a half
    with pytest.raises(Exception, match="in / 32"):
        kernels(x, tables, np.array([0], dtype=np.int64))


def test_a_token_id_outside_the_table_is_refused(kernels):
    rng = np.random.default_rng(0)
    tables = [random_blocks(kind, 4, 64, rng) for kind in BLOCK_KINDS]
    x = np.zeros((1, 64), dtype=np.float32)
    with pytest.raises(Exception, match="not in the table"):
        kernels(x, tables, np.array([4], dtype=np.int64))


def test_the_weights_lie_in_one_allocation_from_a_huge_page():
    from fast.llama_files import ALIGNMENT, HUGE_PAGE, in_one_allocation

    rng = np.random.default_rng(0)
    arrays = [rng.integers(0, 256, (3, 17), dtype=np.uint8), rng.random(5, dtype=np.float32)]
    arrays.append(rng.random((4, 6), dtype=np.float32)[:, ::2])  # not contiguous
    views = in_one_allocation(arrays)
    starts = [view.ctypes.data for view in views]
    assert starts[0] % HUGE_PAGE == 0 and all(start % ALIGNMENT == 0 for start in starts)
    assert starts == sorted(starts) and len({id(view.base) for view in views}) == 1
    for view, array in zip(views, arrays, strict=True):
        assert view.dtype == array.dtype and view.flags.c_contiguous and view.flags.writeable
        np.testing.assert_array_equal(view, array)
    assert views[0].ctypes.data + views[0].nbytes <= starts[1]  # none overlaps the next


# -- the model against step 23's ----------------------------------------------------------

CONFIG = dict(
    model_type="llama",
    vocab_size=300,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    rope_theta=5000.0,
    rms_norm_eps=1e-6,
    max_position_embeddings=64,
    tie_word_embeddings=False,
)
# Each layer's matrices: layers 0-2 one block type each (q, k, v fused; gate
# and up fused), layer 3 a different kind for each matrix.
LAYER_KINDS = [
    dict.fromkeys(("q", "k", "v", "output", "gate", "up", "down"), kind) for kind in BLOCK_KINDS
] + [dict(q="F32", k="Q4_1", v="BF16", output="F16", gate="Q8_0", up="Q4_0", down="BF16")]
MODEL_KINDS = {"token_embd.weight": "Q8_0", "output.weight": "BF16"}


def kind_of(name: str) -> str:
    """The block type tensor `name` (llama.cpp's) is written in."""
    if name in MODEL_KINDS:
        return MODEL_KINDS[name]
    if name.endswith("norm.weight"):
        return "F32"
    _, layer, part, _ = name.split(".")
    short = part.removeprefix("attn_").removeprefix("ffn_")
    return LAYER_KINDS[int(layer)][short]


def write_file(path: Path, kinds=kind_of, **metadata_changes) -> Path:
    """A tiny random Llama as a GGUF file, each tensor in the block type `kinds` names."""
    state = read_safetensors(
        write_random_llama(path.parent / "checkpoint", CONFIG) / "model.safetensors"
    )
    tensors = writer.llama_tensors(state, heads=4, kv_heads=2)
    tensors = [(name, kinds(name), array) for name, _, array in tensors]
    metadata = writer.llama_metadata(
        layers=4, hidden=64, intermediate=96, heads=4, kv_heads=2, theta=5000.0, eps=1e-6,
        context=64,
    )  # fmt: skip
    metadata["llama.vocab_size"] = (writer.U32, 300)
    path.write_bytes(writer.gguf_bytes(metadata | metadata_changes, tensors).data)
    return path


def one_block_type(name: str) -> str:
    """Every layer's matrices Q4_1: a token's layers in one call of our kernel."""
    if name in MODEL_KINDS or name.endswith("norm.weight"):
        return kind_of(name)
    return "Q4_1"


def package_file(path: Path, kinds=one_block_type) -> Path:
    """write_file's model written by the gguf package's GGUFWriter, its blocks
    quantized by the package (llama.cpp's Python tools write files this way)."""
    import gguf

    state = read_safetensors(
        write_random_llama(path.parent / "checkpoint", CONFIG) / "model.safetensors"
    )
    file = gguf.GGUFWriter(path, "llama")
    for add, value in [
        (file.add_block_count, 4), (file.add_context_length, 64),
        (file.add_embedding_length, 64), (file.add_feed_forward_length, 96),
        (file.add_head_count, 4), (file.add_head_count_kv, 2), (file.add_vocab_size, 300),
        (file.add_rope_freq_base, 5000.0), (file.add_layer_norm_rms_eps, 1e-6),
    ]:  # fmt: skip
        add(value)
    for name, _, array in writer.llama_tensors(state, heads=4, kv_heads=2):
        qtype = gguf.GGMLQuantizationType[kinds(name)]
        if qtype == gguf.GGMLQuantizationType.F32:
            file.add_tensor(name, array.astype(np.float32))
        else:
            file.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
    file.write_header_to_file()
    file.write_kv_data_to_file()
    file.write_tensors_to_file()
    file.close()
    return path


def plain_rows(kind: str):
    """Every layer's matrices in float32 or bfloat16 rows: the one-call kernel on plain rows."""
    return lambda name: kind_of(name) if name in MODEL_KINDS or "norm" in name else kind


FILES = {
    "mixed": kind_of,
    "one block type": one_block_type,
    "float32 rows": plain_rows("F32"),
    "bfloat16 rows": plain_rows("BF16"),
}


@pytest.fixture(scope="module", params=[*FILES, "gguf package"])
def gguf_file(request, tmp_path_factory) -> Path:
    """A tiny Llama GGUF: with every kind of matrix the fast path reads; with
    every layer's matrices of one block type (or float32 or bfloat16 rows);
    the Q4_1 one as the gguf package writes it."""
    path = tmp_path_factory.mktemp("gguf") / f"{request.param.replace(' ', '_')}.gguf"
    if request.param == "gguf package":
        return package_file(path)
    return write_file(path, FILES[request.param])


PROMPT = [5, 17, 250, 3, 99, 42, 7]
DECODED = 8


def step23_logits(path: Path, tokens: list[int]) -> list[np.ndarray]:
    """Step 23's last-position logits for the prompt, then for each of `tokens` fed after it."""
    from max.experimental.tensor import Tensor

    from solutions.solution_23 import compile_llama, empty_cache
    from solutions.solution_29 import load_gguf_llama

    model = load_gguf_llama(path)
    forward = compile_llama(model)
    keys, values = empty_cache(model.config)
    logits, keys, values = forward(Tensor(np.array([PROMPT], dtype=np.int64)), keys, values)
    results = [np.array(logits.to_numpy()[0, -1])]
    for token in tokens:
        ids = Tensor(np.array([[token]], dtype=np.int64))
        logits, keys, values = forward(ids, keys, values)
        results.append(np.array(logits.to_numpy()[0, -1]))
    return results


def test_the_fast_model_computes_step_23s_logits(gguf_file):
    from max.dtype import DType

    from fast import llama
    from fast.kernel_ops import kernels_built_for

    model = llama.load_gguf(gguf_file)
    # Layers of mixed matrices run as MAX's operations around our projections.
    assert (model.one_block_kind() is None) == (gguf_file.stem == "mixed")
    generator = llama.FastLlamaGenerator(model, context=64)
    greedy = list(generator.generate(PROMPT, DECODED))
    assert "prefill" not in vars(generator), "a short prompt built the prompt graph"
    # The prompt a token at a time (a short prompt's way), then through the
    # prompt graph, which leaves the caches as the decoded tokens expect them.
    by_tokens = generator.prompt_logits(PROMPT, prompt_graph=False)
    fast_logits = [generator.prompt_logits(PROMPT, prompt_graph=True)]
    for position, token in enumerate(greedy[:-1]):
        fast_logits.append(generator.decoded_logits(token, len(PROMPT) + position))
    expected = step23_logits(gguf_file, greedy[:-1])
    # A float32 file keeps float32 keys and values; the others float16, as llama.cpp does.
    float32_file = gguf_file.stem == "float32_rows"
    assert generator.cache_dtype == (DType.float32 if float32_file else DType.float16)
    # Where the CPU has bfloat16 dot products, a bfloat16 matrix multiplies
    # x rounded to bfloat16 (fast/gpt2.py's kernel): 8 bits of x, not 24.
    # A block's product rounds x to 16-bit levels, and keys and values rounded
    # to float16 (11 bits) move these logits by up to 3e-3 of the largest.
    tolerance = 4e-3 if kernels_built_for()[0] or not float32_file else 1e-4
    pairs = zip(fast_logits, expected, strict=True)
    checks = [("the prompt a token at a time", by_tokens, expected[0])]
    checks += [(f"token {position}", *pair) for position, pair in enumerate(pairs)]
    for label, ours, theirs in checks:
        scale = np.abs(theirs).max()
        np.testing.assert_allclose(ours, theirs, atol=tolerance * scale, err_msg=label)
    assert greedy == [int(np.argmax(logits)) for logits in expected]
    # Once built, the prompt graph takes a short prompt too.
    built, calls = generator.prefill, []
    generator.prefill = lambda *inputs: calls.append(len(inputs)) or built(*inputs)
    np.testing.assert_allclose(generator.prompt_logits(PROMPT), fast_logits[0], rtol=1e-6)
    assert calls, "the short prompt went a token at a time past a built prompt graph"


def test_a_file_the_fast_path_cannot_run_is_refused_by_name(tmp_path):
    from fast import llama
    from solutions.solution_29 import GGUFError

    falcon = write_file(
        tmp_path / "falcon.gguf", **{"general.architecture": (writer.STRING, "falcon")}
    )
    with pytest.raises(GGUFError, match="holds a 'falcon' model"):
        llama.load_gguf(falcon)

    def with_q5_0(name: str) -> str:
        return "Q5_0" if name == "blk.1.ffn_down.weight" else kind_of(name)

    q5_0 = write_file(tmp_path / "q5_0.gguf", kinds=with_q5_0)
    with pytest.raises(GGUFError, match="blk.1.ffn_down is Q5_0; the fast path reads Q8_0"):
        llama.load_gguf(q5_0)


def test_a_q6_k_matrix_is_held_as_q8_0_blocks_of_its_numbers(tmp_path, monkeypatch):
    """llama.cpp's quantizer writes a Q4 model's head (or tied embedding) in
    Q6_K: common/ggml_blocks.py widens its blocks exactly as the gguf package
    does (the oracle), and the fast path holds the matrix as Q8_0 blocks of
    those numbers, each within a little over half a Q8_0 step (its scale is a
    float16). Two rows at a time, so that the rows are converted in parts."""
    from common.ggml_blocks import Q6_K
    from fast import llama_files
    from solutions.solution_29 import read_gguf

    monkeypatch.setattr(llama_files, "ROWS_AT_ONCE", 2)
    rows, columns = 3, 512
    layout = writer.gguf_bytes({}, [("output.weight", "Q6_K", np.zeros((rows, columns)))])
    path = tmp_path / "q6_k.gguf"
    path.write_bytes(layout.data)
    theirs = layout.arrays["output.weight"]
    start = layout.offsets["output.weight"]
    raw = np.frombuffer(layout.data, np.uint8, rows * 2 * Q6_K.size, start)
    np.testing.assert_array_equal(
        Q6_K.widen(raw.reshape(-1, Q6_K.size)).reshape(theirs.shape), theirs
    )

    blocks = llama_files.q6_k_as_q8_0(read_gguf(path), "output.weight")
    assert blocks.shape == (rows, columns // 32 * 34) and blocks.dtype == np.uint8
    ours = BLOCK_FORMATS["Q8_0"].widen(blocks.reshape(-1, 34)).reshape(rows, -1, 32)
    step = np.abs(theirs.reshape(rows, -1, 32)).max(axis=-1, keepdims=True) / 127
    assert np.all(np.abs(ours - theirs.reshape(rows, -1, 32)) <= 0.57 * step)
