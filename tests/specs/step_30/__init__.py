"""Checks for step 30: your first Mojo kernel (Q8_0 blocks times x).

The learner's file is built by the Mojo compiler before any check runs (the
engine names a refusal at the learner's line); the checks then call its
operation from one graph compiled with symbolic shapes, on weights chosen so
that each check can tell one part of the kernel from the others: one block
(the dot product and its scale), one row of several blocks (the block
offsets and the per-block scales), several weight rows (the row stride), and
several rows of x (x's and the output's row strides).
"""

import numpy as np

from common import q8_kernel
from tests import reference_quant as ref
from tests.checker import Check, Context, Fail, Step, expect_close, to_numpy

BLOCK = ref.BLOCK
MODEL = "x @ W.T with W the Q8_0 blocks dequantized"
SMOLLM2_SHAPES = [(576, 576), (576, 1536), (1536, 576)]  # (in, out), one token each


def kernel(ctx: Context) -> q8_kernel.CompiledKernel:
    """The learner's operation in a graph compiled once per run (its first
    compile takes tens of seconds; the engine says so while it runs)."""
    return ctx.once(
        "kernel",
        lambda: ctx.call("compiling the kernel into a graph", q8_kernel.CompiledKernel, ctx.path),
    )


def blocks(ctx: Context, out_dim: int, num_blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """Q8_0 blocks whose scales differ block to block by up to 8x (one scale
    used for another shows) and whose values span -127 ... 127."""
    scales = (0.002 * 2.0 ** ctx.rng.uniform(0, 3, size=(out_dim, num_blocks))).astype(np.float16)
    values = ctx.rng.integers(-127, 128, size=(out_dim, num_blocks, BLOCK)).astype(np.int8)
    return scales, values


def run(ctx: Context, x: np.ndarray, scales: np.ndarray, values: np.ndarray) -> np.ndarray:
    got = ctx.call("q8_0_matvec", kernel(ctx), x, scales, values)
    return to_numpy(got, "the kernel's output")


def close(got: np.ndarray, want: np.ndarray) -> bool:
    return got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5)


def reference(x: np.ndarray, scales: np.ndarray, values: np.ndarray) -> np.ndarray:
    """What the kernel computes, in float64."""
    weight = ref.dequantize_q8_0(scales, values).astype(np.float64)
    return x.astype(np.float64) @ weight.T


def block_sums(x: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each block's dot product before its scale: [rows, out, blocks]."""
    rows = x.shape[0]
    out_dim, num_blocks, _ = values.shape
    xb = x.astype(np.float64).reshape(rows, 1, num_blocks, BLOCK)
    return (xb * values.astype(np.float64)[None]).sum(axis=-1)


def loop_cut_short(ctx: Context, x: np.ndarray, scales: np.ndarray, values: np.ndarray) -> None:
    """Fail naming a loop that stops one early, if one does: with one row of x,
    one weight row and one block, such a loop never runs at all, so the
    kernel runs again with each of the three doubled (the copy identical to
    the original: a loop that skips it leaves its share out)."""
    want = reference(x, scales, values)
    doubled = {
        "outputs": (x, np.repeat(scales, 2, axis=0), np.repeat(values, 2, axis=0)),
        "rows": (np.repeat(x, 2, axis=0), scales, values),
    }
    for loop, (xs, ss, vs) in doubled.items():
        got = run(ctx, xs, ss, vs).reshape(-1)
        if close(got[:1], want.reshape(-1)) and not close(got[1:], want.reshape(-1)):
            said = "the outputs" if loop == "outputs" else "x's rows"
            raise Fail(
                f"With one of everything, nothing comes out, and with two {loop} the first is "
                f"right and the second is not: the loop over {said} stops one early.",
                f"Loop over all of {said}: range(k) runs 0 ... k - 1.",
            )
    twice = run(ctx, np.tile(x, 2), np.tile(scales, 2), np.tile(values, (1, 2, 1)))
    if close(twice, want):  # two identical blocks should give twice one's sum
        raise Fail(
            "With two blocks in a row, only the first one counts: the loop over blocks stops "
            "one early and leaves out the row's last block (with one block it never runs).",
            "A row of in inputs has in // 32 blocks, and all of them count.",
        )


def one_block(ctx: Context) -> None:
    scales, values = blocks(ctx, 1, 1)
    x = ctx.normal(1, BLOCK)
    got = run(ctx, x, scales, values)
    if not close(got, reference(x, scales, values)):
        loop_cut_short(ctx, x, scales, values)
    sums = block_sums(x, values)[..., 0]
    scale = scales.astype(np.float64)[:, 0]
    expect_close(
        got,
        reference(x, scales, values),
        "one block of 32 values times x",
        {
            "The block's sum is not multiplied by its scale: the values count steps of the "
            "block's scale, so the sum of value times x is in steps too.": sums,
            "The block's sum is divided by its scale: the values count steps, so multiply "
            "by the step.": sums / scale,
        },
        hint="Each value widened to float32, times the input it meets, summed over the "
        "block's 32; then that sum times the block's scale.",
        model=MODEL,
    )


def blocks_of_a_row(ctx: Context) -> None:
    num_blocks = 5
    scales, values = blocks(ctx, 1, num_blocks)
    x = ctx.normal(1, num_blocks * BLOCK)
    got = run(ctx, x, scales, values)
    sums = block_sums(x, values)
    s = scales.astype(np.float64)
    expect_close(
        got,
        reference(x, scales, values),
        f"one weight row of {num_blocks} blocks times x",
        {
            "Every block of the row is multiplied by the row's first scale: each block of 32 "
            "has its own, at its own offset in the scales.": (sums * s[:, :1]).sum(-1),
            "The row's last block is left out: the loop over blocks stops one early. "
            "A row of in inputs has in // 32 blocks, and all of them count.": (
                sums[..., :-1] * s[:, :-1]
            ).sum(-1),
            "The row's first block is left out: the loop over blocks starts at 1; blocks "
            "count from 0.": (sums[..., 1:] * s[:, 1:]).sum(-1),
            "The blocks' sums are added up without their scales: each block's sum is in "
            "steps of its own scale.": sums.sum(-1),
            "Every block reads the first block's inputs of x: the input a value meets is at "
            "the block's start in the row, b * 32, plus i.": (
                (block_sums(np.tile(x[:, :BLOCK], num_blocks), values)) * s
            ).sum(-1),
        },
        hint="With one weight row and one row of x, only the offsets within a row are in "
        "play: block b's values and inputs start 32 * b into the row, and its scale is the "
        "row's b-th.",
        model=MODEL,
    )


def rows_of_the_weight(ctx: Context) -> None:
    out_dim, num_blocks = 6, 3
    scales, values = blocks(ctx, out_dim, num_blocks)
    x = ctx.normal(1, num_blocks * BLOCK)
    got = run(ctx, x, scales, values)
    want = reference(x, scales, values)
    if not close(got, want) and close(got[:, :-1], want[:, :-1]):
        raise Fail(
            f"With {out_dim} weight rows, outputs 0 ... {out_dim - 2} are right and the last, "
            f"{out_dim - 1}, is not: the loop over the outputs stops one early.",
            "Every weight row gives one output: loop over all `n_out` of them.",
        )
    first_row = close(got[:, :1], want[:, :1])
    expect_close(
        got,
        want,
        f"{out_dim} weight rows of {num_blocks} blocks times x",
        {
            "Every output is weight row 0's: the row n of the offsets is not used.": np.repeat(
                want[:, :1], out_dim, axis=1
            ),
        },
        hint=(
            "Output 0 is right and the rows after it are not: a weight row's stride is wrong. "
            "Row n of the values starts after n whole rows, each `blocks` blocks of 32 int8; "
            "its scales after n rows of `blocks` scales."
            if first_row
            else "Each output n is x times weight row n: its values and scales, read at row "
            "n's offsets."
        ),
        model=MODEL,
    )


def rows_of_x(ctx: Context) -> None:
    rows, out_dim, num_blocks = 3, 5, 2
    scales, values = blocks(ctx, out_dim, num_blocks)
    x = ctx.normal(rows, num_blocks * BLOCK)
    got = run(ctx, x, scales, values)
    want = reference(x, scales, values)
    if not close(got, want) and close(got[:-1], want[:-1]):
        raise Fail(
            f"With {rows} rows of x, output rows 0 ... {rows - 2} are right and the last, "
            f"{rows - 1}, is not: the loop over x's rows stops one early.",
            "Every row of x gives one row of the output: loop over all `rows` of them.",
        )
    first_row = close(got[:1], want[:1])
    expect_close(
        got,
        want,
        f"{rows} rows of x times {out_dim} weight rows",
        {
            "The outputs land transposed: output [rows, out] keeps row m's outputs one after "
            "another, so output (m, n) sits m * out + n into it.": want.T.reshape(rows, out_dim),
            "Every output row is x's row 0's: row m of x is not read at its own offset.": (
                np.repeat(want[:1], rows, axis=0)
            ),
        },
        hint=(
            "Output row 0 is right and the rows after it are not: a row stride of x or of the "
            "output is wrong. x's row m starts m * in floats into x; output row m starts "
            "m * out floats into the output."
            if first_row
            else "Row m of the output is x's row m times every weight row."
        ),
        model=MODEL,
    )


def smollm2_shapes(ctx: Context) -> None:
    for in_dim, out_dim in SMOLLM2_SHAPES:
        scales, values = blocks(ctx, out_dim, in_dim // BLOCK)
        x = ctx.normal(1, in_dim)
        expect_close(
            run(ctx, x, scales, values),
            reference(x, scales, values),
            f"one token through a SmolLM2 layer, {in_dim} -> {out_dim}",
            hint="The smaller checks passed: look for what only a large layer meets.",
            model=MODEL,
        )


STEP = Step(
    number=30,
    required={
        "value_offset": [],
        "scale_offset": [],
        "x_offset": [],
        "Q8_0Matvec": [],
    },
    checks=[
        Check("one block: 32 values times x, times the block's scale", one_block),
        Check("a row of blocks: each block at its offset, with its own scale", blocks_of_a_row),
        Check("many weight rows: each at its row's offset", rows_of_the_weight),
        Check("many rows of x: each into its own output row", rows_of_x),
        Check("SmolLM2's layer shapes, one token", smollm2_shapes),
    ],
    # The first check compiles the learner's kernel into a graph: tens of
    # seconds, off the check's clock (compiles.announced).
)
