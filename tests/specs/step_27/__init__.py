"""Checks for step 27: block quantization, 8 bits (Q8_0)."""

import warnings

import numpy as np

from tests import reference_quant as ref
from tests.checker import (
    Check,
    Context,
    Fail,
    Step,
    expect_close,
    expect_shape,
    parameter_shapes,
    tensor,
    to_numpy,
)

OUT, IN = 64, 96  # not square, and both a multiple of 32: a wrong axis shows in the shapes
BLOCK = ref.BLOCK
BLOCKS = IN // BLOCK
LEVELS_STEP_1 = float(ref.Q8_LEVELS)  # a block's largest weight for a step of 1
BYTES_PER_WEIGHT = (2 + BLOCK) / BLOCK  # 34 bytes a block of 32: 8.5 bits
MODEL = "ggml's Q8_0"
ZERO_ROW = 5  # the row whose second block is all zeros in the last quantize check
TIE_ROW = 7  # the row whose first block's weights lie on exact half steps


def random_weight(ctx: Context) -> np.ndarray:
    """[OUT, IN] with rows of different sizes and one outlier, so that every
    block gets its own scale and one block's is much larger."""
    weight = ctx.normal(OUT, IN) * (0.25 + ctx.rng.uniform(size=(OUT, 1)))
    weight[3, 40] = 8.0
    # A step of exactly 1: the block's weights at -15.5 ... 15.5 steps are ties.
    weight[TIE_ROW, :BLOCK] = np.arange(-BLOCK // 2, BLOCK // 2) + 0.5
    weight[TIE_ROW, BLOCK - 1] = LEVELS_STEP_1
    return weight.astype(np.float32)


def quantize(ctx: Context, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The learner's quantize_q8_0(weight) as two NumPy arrays."""
    got = ctx.call("quantize_q8_0", ctx.get("quantize_q8_0"), weight.copy())
    if not isinstance(got, tuple) or len(got) != 2:
        raise Fail(
            f"quantize_q8_0 returned {type(got).__name__}, expected (scales, values).",
            "Return the float16 scales first, then the int8 values.",
        )
    return to_numpy(got[0], "quantize_q8_0's scales"), to_numpy(got[1], "quantize_q8_0's values")


def expect_scale_shape(scales: np.ndarray) -> None:
    if scales.shape == (OUT, BLOCKS):
        return
    if scales.shape in {(OUT // BLOCK, IN), (IN, OUT // BLOCK)}:
        raise Fail(
            f"quantize_q8_0's scales have shape {list(scales.shape)} for a [{OUT}, {IN}] "
            f"weight: the blocks run along the output axis. A block is 32 consecutive "
            f"inputs of one row, so the scales are [out, in // 32] = [{OUT}, {BLOCKS}].",
            "Cut each row (the last axis, the inputs) into runs of 32: reshape [out, in] to "
            "[out, in // 32, 32], and reduce over the last axis.",
        )
    if scales.size in (OUT, 1):
        raise Fail(
            f"quantize_q8_0's scales have shape {list(scales.shape)}: one scale per "
            f"{'row' if scales.size == OUT else 'weight matrix'}, where Q8_0 keeps one per "
            f"block of 32 inputs, [out, in // 32] = [{OUT}, {BLOCKS}].",
            "Reduce over the last axis of the blocks, [out, in // 32, 32], only.",
        )
    raise Fail(
        f"quantize_q8_0's scales have shape {list(scales.shape)}, expected one per block "
        f"of 32 inputs, [out, in // 32] = [{OUT}, {BLOCKS}].",
        "Reshape the weight [out, in] to [out, in // 32, 32] and reduce over the last axis.",
    )


def scale_per_block(ctx: Context) -> None:
    weight = random_weight(ctx)
    scales, _ = quantize(ctx, weight)
    expect_scale_shape(scales)
    if scales.dtype in (np.float32, np.float64):
        raise Fail(
            f"quantize_q8_0's scales are {scales.dtype}: a block would take 32 + "
            f"{scales.dtype.itemsize} = {32 + scales.dtype.itemsize} bytes, "
            f"{(32 + scales.dtype.itemsize) * 8 / 32:g} bits a weight. ggml stores each scale "
            f"as float16, 2 bytes: 34 bytes a block, {BYTES_PER_WEIGHT * 8:g} bits a weight.",
            "Compute the scales in float32 and convert them to float16 when you return them.",
        )
    if scales.dtype != np.float16:
        raise Fail(f"quantize_q8_0's scales are {scales.dtype}, expected float16.")

    def as_stored(step: np.ndarray) -> np.ndarray:
        return step.astype(np.float16).astype(np.float32)

    expect_close(
        scales.astype(np.float32),
        as_stored(ref.q8_0_scales(weight)),
        "quantize_q8_0's scale of each block",
        {
            "The scale comes from the block's mean magnitude: the largest weights then land "
            "beyond 127 and are clipped. The block's largest magnitude must map to 127, so "
            "the step is that magnitude over 127.": as_stored(
                ref.q8_0_scales(weight, statistic="mean")
            ),
            "The step is the largest magnitude over 128: int8 reaches -128, but Q8_0 uses "
            "-127 ... 127, the same count of steps on both sides of 0, so the largest "
            "magnitude maps to 127.": as_stored(ref.q8_0_scales(weight, levels=128)),
            "The scale comes from the block's largest value, not its largest magnitude: a "
            "block whose biggest weight is negative gets a scale too small, or negative. "
            "Take the absolute values first.": as_stored(
                ref.q8_0_scales(weight, statistic="signed max")
            ),
        },
        rtol=1e-3,
        model=MODEL,
    )


def values_round_to_nearest(ctx: Context) -> None:
    weight = random_weight(ctx)
    _, values = quantize(ctx, weight)
    if values.shape == (OUT, IN):
        raise Fail(
            f"quantize_q8_0's values have shape [{OUT}, {IN}], the weight's: keep them as "
            f"blocks, [out, in // 32, 32] = [{OUT}, {BLOCKS}, {BLOCK}], one scale per block.",
            "Return the values in the blocks' shape, the one the scales were taken over.",
        )
    expect_shape(values, (OUT, BLOCKS, BLOCK), "quantize_q8_0's values")
    if values.dtype != np.int8:
        raise Fail(
            f"quantize_q8_0's values are {values.dtype}: Q8_0 stores each value in one "
            "byte, an int8 from -127 to 127.",
            "Convert the rounded values to int8 (np.int8) before returning them.",
        )
    step = ref.q8_0_scales(weight)
    want = ref.q8_0_values(weight, step)
    if np.array_equal(values, want):
        return
    float16_scale = (
        "The values are divided by the scale after it was rounded to float16. ggml divides "
        "by the float32 step and rounds the scale to float16 only to store it, so every "
        "program that writes Q8_0 makes the same bytes."
    )
    named = [
        (
            "The values are truncated toward zero, not rounded: converting to int8 drops the "
            "fraction, so 3.9 steps become 3 and every weight is pulled toward 0, up to a "
            "whole step off. Round to the nearest step first; then convert.",
            ref.q8_0_values(weight, step, rounding="truncate"),
        ),
        (
            "The values are rounded down (floor), not to the nearest step: every weight is "
            "pulled toward minus infinity, up to a whole step off.",
            ref.q8_0_values(weight, step, rounding="floor"),
        ),
        (
            f"A tie is rounded to the even neighbour (row {TIE_ROW}: 2.5 steps became 2), as "
            "NumPy's np.round does; ggml rounds as C's roundf, a tie away from zero (2.5 "
            "steps become 3, -2.5 become -3). Trained weights land on ties: the bytes differ.",
            ref.q8_0_values(weight, step, rounding="half to even"),
        ),
        (float16_scale, ref.q8_0_values(weight, step.astype(np.float16))),
        (float16_scale, ref.q8_0_values(weight, step.astype(np.float16).astype(np.float32))),
    ]
    for explanation, wrong in named:
        if np.array_equal(values, wrong):
            raise Fail(f"quantize_q8_0's values do not match {MODEL}.", explanation)
    differ = np.argwhere(values != want)
    where = tuple(int(i) for i in differ[0])
    in_steps = weight.reshape(OUT, BLOCKS, BLOCK)[where] / step[where[:2]]
    raise Fail(
        f"{len(differ)} of {values.size} of quantize_q8_0's values differ from {MODEL}'s: "
        f"at index {list(where)} the weight is {in_steps:.3f} steps of its block's scale, "
        f"so the value is {want[where]}, got {values[where]}.",
        "Each value is the weight divided by its own block's step (the float32 one), "
        "rounded to the nearest whole number.",
    )


def zero_block_stays_zero(ctx: Context) -> None:
    weight = random_weight(ctx)
    weight[ZERO_ROW, BLOCK : 2 * BLOCK] = 0.0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scales, values = quantize(ctx, weight)
    said = " ".join(str(warning.message) for warning in caught)
    block = values.reshape(OUT, BLOCKS, BLOCK)[ZERO_ROW, 1]
    scale = float(scales.reshape(OUT, BLOCKS)[ZERO_ROW, 1])
    if "in cast" in said or np.any(block != 0) or scale != 0:
        raise Fail(
            f"An all-zero block (row {ZERO_ROW}, inputs {BLOCK}-{2 * BLOCK - 1}) divides by "
            f"zero: its step is 0, and 0 / 0 is NaN before the cast to int8 (NumPy says "
            f"{'`' + said[:80] + '`' if said else 'nothing'}; got scale {scale:g} and "
            f"values {np.unique(block).tolist()}). NaN has no int8: one machine makes it 0, "
            "another -128.",
            "Where a block's step is 0, its values are 0: multiply by an inverse step that "
            "is 0 there (a step of 0 taken as infinite), never by 1 / 0.",
        )


def dequantize_scales_each_block(ctx: Context) -> None:
    scales, values = ref.quantize_q8_0(random_weight(ctx))
    got = ctx.run_lazily(
        "dequantize_q8_0", ctx.get("dequantize_q8_0"), tensor(scales), tensor(values)
    )
    weight = to_numpy(got, "dequantize_q8_0(scales, values)")
    if weight.dtype != np.float32:
        raise Fail(
            f"dequantize_q8_0 returns {weight.dtype}: the weight the matmul reads is float32.",
            "Convert both the int8 values and the float16 scales to float32 first.",
        )
    step = scales.astype(np.float32)[..., None]
    expect_close(
        weight,
        ref.dequantize_q8_0(scales, values),
        "dequantize_q8_0(scales, values)",
        {
            "The values are divided by the scale: they count steps, so the weight is the "
            "value times the step.": (values / step).reshape(OUT, IN),
            "The values are not scaled: each is a count of its block's steps, so multiply "
            "it by its block's scale.": values.astype(np.float32).reshape(OUT, IN),
            "Every block of a row gets the row's first scale: each block of 32 has its own.": (
                values * step[:, :1]
            ).reshape(OUT, IN),
        },
        hint="Each value times its own block's scale: values [out, blocks, 32] times scales "
        "[out, blocks, 1].",
        model=MODEL,
    )


def linear_keeps_the_blocks(ctx: Context) -> None:
    layer = ctx.build("Q8Linear", IN, OUT)
    shapes = parameter_shapes(layer)
    dtypes = {name: str(t.dtype).split(".")[-1].lower() for name, t in layer.parameters}
    if "weight" in shapes:
        raise Fail(
            f"Q8Linear has a `weight` of shape {list(shapes['weight'])}: a float32 weight "
            "takes 4 bytes a weight, the cost Q8_0 removes. Keep only the blocks, `scales` "
            "and `values`, and widen them in forward.",
            "Make the blocks the layer's tensors; build the float32 weight in forward only.",
        )
    want = {"scales": (OUT, BLOCKS), "values": (OUT, BLOCKS, BLOCK)}
    if shapes != want:
        raise Fail(
            f"Q8Linear({IN}, {OUT}) has tensors {shapes}, expected {want}: one scale per "
            "block of 32 inputs, and the blocks' values.",
            "Two tensors: `scales` [out, in // 32] and `values` [out, in // 32, 32].",
        )
    if dtypes["scales"] != "float16":
        raise Fail(
            f"Q8Linear's scales are {dtypes['scales']}: with a 4-byte scale a block takes 36 "
            "bytes, 9 bits a weight. ggml's blocks hold a float16 scale: 34 bytes, 8.5 bits.",
            "Create the scales with dtype float16 (DType.float16).",
        )
    if dtypes["values"] != "int8":
        raise Fail(
            f"Q8Linear's values are {dtypes['values']}: each takes one byte, an int8.",
            "Create the values with dtype int8 (DType.int8).",
        )


def linear_dequantizes_then_multiplies(ctx: Context) -> None:
    weight = random_weight(ctx)
    scales, values = ref.quantize_q8_0(weight)
    layer = ctx.build("Q8Linear", IN, OUT)
    ctx.call("load_state_dict", layer.load_state_dict, {"scales": scales, "values": values})
    x = ctx.normal(2, 5, IN)
    out = ctx.run_lazily("Q8Linear.forward", layer, tensor(x))
    dequantized = ref.dequantize_q8_0(scales, values)
    expect_close(
        out,
        x @ dequantized.T,
        f"Q8Linear({IN}, {OUT})(x)",
        {
            "The values are used without their scales: dequantize the blocks (each value "
            "times its block's scale) before the product.": x
            @ values.astype(np.float32).reshape(OUT, IN).T,
        },
        hint="forward is the Linear's x @ W.T, with W the dequantized blocks.",
        model=MODEL,
    )


STEP = Step(
    number=27,
    required={
        "quantize_q8_0": [],
        "dequantize_q8_0": [],
        "Q8Linear": ["__init__", "forward"],
    },
    checks=[
        Check("quantize_q8_0 keeps one float16 scale per block of 32 inputs", scale_per_block),
        Check("quantize_q8_0 rounds each weight to its nearest step", values_round_to_nearest),
        Check(
            "an all-zero block quantizes to zeros, with no division by zero", zero_block_stays_zero
        ),
        Check(
            "dequantize_q8_0 multiplies each value by its block's scale",
            dequantize_scales_each_block,
        ),
        Check(
            "Q8Linear keeps int8 values and float16 scales, no float32 weight",
            linear_keeps_the_blocks,
        ),
        Check(
            "Q8Linear dequantizes in the graph, then multiplies", linear_dequantizes_then_multiplies
        ),
    ],
)
