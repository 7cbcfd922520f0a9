"""Checks for step 28: four-bit blocks (Q4_0 and Q4_1)."""

import numpy as np

from tests import reference_quant as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor, to_numpy

OUT, IN = 64, 96
BLOCK, HALF = ref.BLOCK, ref.BLOCK // 2
BLOCKS = IN // BLOCK
MODEL = "ggml's 4-bit blocks"
INTERLEAVED = (
    "The nibbles are interleaved: ggml does not put neighbours in one byte. Byte j of a "
    "block holds value j in its low 4 bits and value j + 16 in its high 4: the block's "
    "first 16 values in the low nibbles, its last 16 in the high ones."
)
SWAPPED = (
    "Low and high nibbles are swapped: a block's first 16 values go in the low 4 bits of "
    "its 16 bytes (value j is byte j % 16), the last 16 in the high 4 bits."
)


def random_weight(ctx: Context) -> np.ndarray:
    """Rows of different sizes, blocks whose largest weight is negative and
    blocks whose largest is positive."""
    weight = ctx.normal(OUT, IN) * (0.25 + ctx.rng.uniform(size=(OUT, 1)))
    weight[3, 40] = -8.0
    weight[4, 70] = 6.0
    # Two weights of the largest magnitude, opposite signs: Q4_0 makes the
    # first level 0 (-8 steps), so the second is +8 steps, capped at level 15.
    weight[8, 0], weight[8, 1] = 9.0, -9.0
    return weight.astype(np.float32)


def levels_of(ctx: Context) -> np.ndarray:
    return ctx.rng.integers(0, 16, size=(OUT, BLOCKS, BLOCK)).astype(np.uint8)


def interleaved(levels: np.ndarray) -> np.ndarray:
    return (levels[..., 0::2] | (levels[..., 1::2] << 4)).astype(np.uint8)


def swapped(levels: np.ndarray) -> np.ndarray:
    return ((levels[..., :HALF] << 4) | levels[..., HALF:]).astype(np.uint8)


def expect_bytes(got: np.ndarray, want: np.ndarray, what: str, named: dict) -> None:
    if got.shape != want.shape:
        raise Fail(
            f"{what} has shape {list(got.shape)}, expected {list(want.shape)}: 16 bytes a "
            "block of 32, two levels in each.",
            "Keep the blocks: [out, in // 32, 16].",
        )
    if got.dtype != np.uint8:
        raise Fail(f"{what} is {got.dtype}: each byte holds two levels, uint8.")
    if np.array_equal(got, want):
        return
    for explanation, wrong in named.items():
        if np.array_equal(got, wrong):
            raise Fail(f"{what}: not the bytes of {MODEL}.", explanation)
    where = tuple(int(i) for i in np.argwhere(got != want)[0])
    raise Fail(
        f"{what} differs from {MODEL}: at index {list(where)} expected byte "
        f"{int(want[where]):#04x}, got {int(got[where]):#04x}.",
        "Each byte: the block's level j in its low 4 bits, level j + 16 in its high 4.",
    )


def nibbles_in_ggmls_order(ctx: Context) -> None:
    levels = levels_of(ctx)
    got = ctx.call("pack_nibbles", ctx.get("pack_nibbles"), levels.copy())
    got = to_numpy(got, "pack_nibbles(levels)")
    named = {INTERLEAVED: interleaved(levels), SWAPPED: swapped(levels)}
    expect_bytes(got, ref.pack_nibbles(levels), "pack_nibbles(levels)", named)


def as_arrays(got, count: int, what: str) -> list[np.ndarray]:
    if not isinstance(got, tuple) or len(got) != count:
        raise Fail(f"{what} returned {type(got).__name__}, expected a tuple of {count} arrays.")
    return [to_numpy(part, what) for part in got]


def expect_scales(got: np.ndarray, want: np.ndarray, what: str, named: dict) -> None:
    if got.shape != want.shape:
        raise Fail(
            f"{what} has shape {list(got.shape)}, expected [out, in // 32] = {list(want.shape)}."
        )
    if got.dtype != np.float16:
        raise Fail(
            f"{what} is {got.dtype}: each block stores it as float16, 2 bytes.",
            "Compute in float32 and convert to float16 in the return.",
        )
    expect_close(
        got.astype(np.float32), want.astype(np.float32), what, named, rtol=1e-3, model=MODEL
    )


def q4_0_levels(blocks: np.ndarray, scales: np.ndarray, offset: float) -> np.ndarray:
    inverse = np.divide(1.0, scales, out=np.zeros_like(scales), where=scales != 0)
    raw = np.trunc(blocks * inverse[..., None] + np.float32(offset + 0.5))
    # Converted as the learner's pack_nibbles converts them, out-of-range levels and all.
    return ref.pack_nibbles(np.minimum(raw, 15))


def q4_0_quantizes(ctx: Context) -> None:
    weight = random_weight(ctx)
    scales, packed = as_arrays(
        ctx.call("quantize_q4_0", ctx.get("quantize_q4_0"), weight.copy()), 2, "quantize_q4_0"
    )
    want_scales, want_packed = ref.quantize_q4_0(weight)
    blocks = ref.blocks_of(weight)
    largest = np.abs(blocks).max(axis=-1)
    expect_scales(
        scales,
        want_scales,
        "quantize_q4_0's scale of each block",
        {
            "The scale comes from the largest magnitude, without its sign: Q4_0 takes the "
            "block's weight of largest magnitude with its sign, over -8, so that weight "
            "becomes level 0 (-8 steps) and the other side reaches only +7.": (
                (largest / -8).astype(np.float16).astype(np.float32)
            ),
            "The scale is divided by 8, not by -8: the weight of largest magnitude must "
            "become level 0, -8 steps.": (
                (want_scales.astype(np.float32) * -1).astype(np.float16).astype(np.float32)
            ),
        },
    )
    step = np.take_along_axis(blocks, np.abs(blocks).argmax(axis=-1)[..., None], -1)[..., 0] / -8
    expect_bytes(
        packed,
        want_packed,
        "quantize_q4_0's packed levels",
        {
            "The offset of 8 is forgotten: a level is the weight's steps plus 8 (0 ... 15 "
            "stand for -8 ... 7), so negative steps become small levels, not wrapped bytes.": (
                q4_0_levels(blocks, step, 0.0)
            ),
            INTERLEAVED: interleaved(ref.unpack_nibbles(want_packed)),
            SWAPPED: swapped(ref.unpack_nibbles(want_packed)),
        },
    )


def q4_1_quantizes(ctx: Context) -> None:
    weight = random_weight(ctx)
    scales, minimums, packed = as_arrays(
        ctx.call("quantize_q4_1", ctx.get("quantize_q4_1"), weight.copy()), 3, "quantize_q4_1"
    )
    want_scales, want_minimums, want_packed = ref.quantize_q4_1(weight)
    blocks = ref.blocks_of(weight)
    span = blocks.max(axis=-1) - blocks.min(axis=-1)
    expect_scales(
        minimums,
        want_minimums,
        "quantize_q4_1's minimum of each block",
        {
            "The minimum is the smallest magnitude; Q4_1 keeps the smallest value.": np.abs(blocks)
            .min(axis=-1)
            .astype(np.float16)
            .astype(np.float32)
        },
    )
    expect_scales(
        scales,
        want_scales,
        "quantize_q4_1's scale of each block",
        {
            "The block's span is cut into 16 steps: 16 levels, 0 ... 15, are 15 steps "
            "apart, so the scale is (max - min) / 15.": (span / 16)
            .astype(np.float16)
            .astype(np.float32),
            "The scale ignores the minimum (max / 15): the levels span the block from its "
            "minimum to its maximum, (max - min) / 15.": (blocks.max(axis=-1) / 15)
            .astype(np.float16)
            .astype(np.float32),
        },
    )
    scale = span / 15
    inverse = np.divide(1.0, scale, out=np.zeros_like(scale), where=scale != 0)
    ignored = np.trunc(blocks * inverse[..., None] + np.float32(0.5))
    expect_bytes(
        packed,
        want_packed,
        "quantize_q4_1's packed levels",
        {
            "The minimum is ignored: a level counts steps above the block's minimum, "
            "(w - min) / scale, so the smallest weight is level 0.": ref.pack_nibbles(ignored),
            INTERLEAVED: interleaved(ref.unpack_nibbles(want_packed)),
            SWAPPED: swapped(ref.unpack_nibbles(want_packed)),
        },
    )


def unpacked_wrong(packed: np.ndarray) -> dict[str, np.ndarray]:
    """The levels a wrong unpacking reads: {explanation: levels [..., 32]}."""
    low, high = packed & 0x0F, packed >> 4
    return {
        INTERLEAVED: np.stack([low, high], axis=-1).reshape(*packed.shape[:-1], BLOCK),
        SWAPPED: np.concatenate([high, low], axis=-1),
    }


def q4_0_dequantizes(ctx: Context) -> None:
    scales, packed = ref.quantize_q4_0(random_weight(ctx))
    got = ctx.run_lazily(
        "dequantize_q4_0", ctx.get("dequantize_q4_0"), tensor(scales), tensor(packed)
    )
    step = scales.astype(np.float32)[..., None]
    wrong = {
        explanation: ((levels.astype(np.float32) - 8) * step).reshape(OUT, IN)
        for explanation, levels in unpacked_wrong(packed).items()
    }
    wrong[
        "The offset of 8 is not subtracted: levels 0 ... 15 stand for -8 ... 7 steps, so "
        "the weight is (level - 8) times the scale."
    ] = (ref.unpack_nibbles(packed) * step).reshape(OUT, IN)
    expect_close(
        got,
        ref.dequantize_q4_0(scales, packed),
        "dequantize_q4_0(scales, packed)",
        wrong,
        hint="Unpack the levels, subtract 8, times each block's scale.",
        model=MODEL,
    )


def q4_1_dequantizes(ctx: Context) -> None:
    scales, minimums, packed = ref.quantize_q4_1(random_weight(ctx))
    got = ctx.run_lazily(
        "dequantize_q4_1",
        ctx.get("dequantize_q4_1"),
        tensor(scales),
        tensor(minimums),
        tensor(packed),
    )
    step, low = (x.astype(np.float32)[..., None] for x in (scales, minimums))
    levels = ref.unpack_nibbles(packed).astype(np.float32)
    wrong = {
        explanation: (wrong_levels * step + low).reshape(OUT, IN)
        for explanation, wrong_levels in unpacked_wrong(packed).items()
    }
    wrong["The minimum is not added: a weight is level times scale plus the block's minimum."] = (
        levels * step
    ).reshape(OUT, IN)
    wrong["The minimum is subtracted; it is added: the level counts steps above it."] = (
        levels * step - low
    ).reshape(OUT, IN)
    expect_close(
        got,
        ref.dequantize_q4_1(scales, minimums, packed),
        "dequantize_q4_1(scales, minimums, packed)",
        wrong,
        hint="Unpack the levels, times each block's scale, plus its minimum.",
        model=MODEL,
    )


STEP = Step(
    number=28,
    required={
        "pack_nibbles": [],
        "quantize_q4_0": [],
        "quantize_q4_1": [],
        "unpack_nibbles": [],
        "dequantize_q4_0": [],
        "dequantize_q4_1": [],
    },
    checks=[
        Check(
            "pack_nibbles puts a block's first 16 levels in the low nibbles", nibbles_in_ggmls_order
        ),
        Check("quantize_q4_0 scales by the signed largest weight over -8", q4_0_quantizes),
        Check("quantize_q4_1 spans each block from its minimum", q4_1_quantizes),
        Check("dequantize_q4_0 unpacks in ggml's order and subtracts 8", q4_0_dequantizes),
        Check("dequantize_q4_1 adds each block's minimum", q4_1_dequantizes),
    ],
)
