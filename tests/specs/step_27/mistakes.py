"""The mistakes step 27's checks must name: plausible learner edits of
solutions/solution_27.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import m

BLOCKS = "blocks = weight.reshape(out_dim, in_dim // BLOCK, BLOCK)"
SCALES = "scales = np.abs(blocks).max(axis=-1) / LEVELS"
INVERSE = "inverse = 1 / np.where(scales == 0, np.inf, scales)"
STEPS = "steps = blocks * inverse[..., None]"
VALUES = "values = (np.sign(steps) * np.floor(np.abs(steps) + 0.5)).astype(np.int8)"
RETURN = "return scales.astype(np.float16), values"
SCALE_TENSOR = "self.scales = Tensor.zeros([out_dim, in_dim // BLOCK], dtype=DType.float16)"
DEQUANTIZED = """weight = values.cast(DType.float32) * scales.cast(DType.float32).reshape(
        [out_dim, num_blocks, 1]
    )"""

MISTAKES = [
    m(
        "blocks along the output axis",
        BLOCKS,
        "blocks = weight.T.reshape(in_dim, out_dim // BLOCK, BLOCK)",
        "output axis",
    ),
    m(
        "blocks down the columns",
        BLOCKS,
        "blocks = weight.reshape(out_dim // BLOCK, BLOCK, in_dim).transpose(0, 2, 1)",
        "output axis",
    ),
    m("scale from the mean", SCALES, "scales = np.abs(blocks).mean(axis=-1) / LEVELS", "mean"),
    m("scale over 128", SCALES, "scales = np.abs(blocks).max(axis=-1) / 128", "128"),
    m("scale from the signed max", SCALES, "scales = blocks.max(axis=-1) / LEVELS", "magnitude"),
    m(
        "one scale per row",
        SCALES,
        "scales = np.abs(weight).max(axis=-1, keepdims=True) / LEVELS",
        "one scale per",
    ),
    m(
        "truncation",
        VALUES,
        "values = steps.astype(np.int8)",
        "truncated",
    ),
    m("floor", VALUES, "values = np.floor(steps).astype(np.int8)", "down"),
    m("NumPy's round", VALUES, "values = np.round(steps).astype(np.int8)", "even neighbour"),
    m(
        "scale rounded to float16 first",
        SCALES,
        "scales = (np.abs(blocks).max(axis=-1) / LEVELS).astype(np.float16)",
        "float16",
    ),
    m(
        "divided by the float16 scale",
        STEPS,
        "steps = blocks / scales.astype(np.float16).astype(np.float32)[..., None]",
        "float16",
    ),
    m("scale kept in float32", RETURN, "return scales, values", "36 bytes"),
    m(
        "values kept in float32",
        RETURN,
        "return scales.astype(np.float16), np.round(steps)",
        "one byte",
    ),
    m(
        "an all-zero block divides by zero",
        INVERSE,
        "inverse = 1.0 / scales",
        "divides by zero",
    ),
    m(
        "dequantize divides by the scale",
        DEQUANTIZED,
        "weight = values.cast(DType.float32) / scales.cast(DType.float32).reshape(\n"
        "        [out_dim, num_blocks, 1]\n    )",
        "divided by the scale",
    ),
    m(
        "dequantize forgets the scale",
        DEQUANTIZED,
        "weight = values.cast(DType.float32)",
        "not scaled",
    ),
    m(
        "dequantize in float16",
        DEQUANTIZED,
        "weight = values.cast(DType.float16) * scales.reshape([out_dim, num_blocks, 1])",
        "float32",
    ),
    m(
        "layer scales in float32",
        SCALE_TENSOR,
        "self.scales = Tensor.zeros([out_dim, in_dim // BLOCK], dtype=DType.float32)",
        "36 bytes",
    ),
    m(
        "layer keeps a float32 weight",
        SCALE_TENSOR,
        SCALE_TENSOR + "\n        self.weight = Tensor.zeros([out_dim, in_dim])",
        "4 bytes a weight",
    ),
    m(
        "forward without the scales",
        "weight = dequantize_q8_0(self.scales, self.values)",
        "weight = self.values.cast(DType.float32).reshape([int(self.values.shape[0]), -1])",
        "without their scales",
    ),
]
