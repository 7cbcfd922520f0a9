"""Checks for step 02: causal_mask."""

import numpy as np

from tests import reference as ref
from tests.checker import Check, Context, Step, expect_close
from tests.mutants import m

CASES = [(1, 0), (5, 0), (7, 0), (3, 4), (1, 6)]  # (sequence_length, num_tokens)


def make_mask(ctx: Context, sequence_length: int, num_tokens: int):
    from max.driver import CPU
    from max.dtype import DType

    fn = ctx.get("causal_mask")
    return ctx.call(
        f"causal_mask({sequence_length}, {num_tokens}, ...)",
        fn,
        sequence_length,
        num_tokens,
        dtype=DType.float32,
        device=CPU(),
    )


def mistakes(sequence_length: int, num_tokens: int) -> dict[str, np.ndarray]:
    right = ref.causal_mask(sequence_length, num_tokens)
    zeros_and_ones = np.where(np.isinf(right), 1.0, 0.0)
    return {
        "The mask is inverted: 0 must be where attention is allowed (j <= i + num_tokens), "
        "-inf above that diagonal.": np.where(np.isinf(right), 0.0, -np.inf),
        "The cached tokens are not taken into account: row i may see columns up to "
        "i + num_tokens (num_upper=num_tokens).": np.pad(
            ref.causal_mask(sequence_length, 0), ((0, 0), (0, num_tokens)), constant_values=-np.inf
        ),
        "The diagonal is masked too: a token may attend to itself.": np.where(
            np.arange(num_tokens + sequence_length)[None, :]
            >= np.arange(sequence_length)[:, None] + num_tokens,
            -np.inf,
            0.0,
        ),
        "The mask holds 1s where it should hold -inf: it is added to scores, so use "
        "float('-inf').": zeros_and_ones,
    }


def square_mask(ctx: Context) -> None:
    for sequence_length in (1, 5, 7):
        expect_close(
            make_mask(ctx, sequence_length, 0),
            ref.causal_mask(sequence_length, 0),
            f"causal_mask({sequence_length}, 0)",
            mistakes(sequence_length, 0),
        )


def mask_with_cached_tokens(ctx: Context) -> None:
    for sequence_length, num_tokens in [(3, 4), (1, 6), (2, 1)]:
        expect_close(
            make_mask(ctx, sequence_length, num_tokens),
            ref.causal_mask(sequence_length, num_tokens),
            f"causal_mask({sequence_length}, {num_tokens})",
            mistakes(sequence_length, num_tokens),
            hint="The result is [sequence_length, num_tokens + sequence_length].",
        )


def dtype_is_respected(ctx: Context) -> None:
    from max.driver import CPU
    from max.dtype import DType

    from tests.checker import Fail

    mask = ctx.call(
        "causal_mask(4, 0, dtype=float16)",
        ctx.get("causal_mask"),
        4,
        0,
        dtype=DType.float16,
        device=CPU(),
    )
    if getattr(mask, "dtype", None) != DType.float16:
        raise Fail(
            f"causal_mask(..., dtype=DType.float16) returned dtype {getattr(mask, 'dtype', None)}.",
            "Pass dtype= and device= on to the tensor you create.",
        )
    from max.driver import Accelerator, accelerator_count

    if accelerator_count():  # with only a CPU, the default device is the one asked for
        gpu = Accelerator()
        mask = ctx.call(
            "causal_mask(4, 0, device=Accelerator())",
            ctx.get("causal_mask"),
            4,
            0,
            dtype=DType.float32,
            device=gpu,
        )
        if getattr(mask, "device", None) != gpu:
            raise Fail(
                f"causal_mask(..., device=Accelerator()) returned a tensor on "
                f"{getattr(mask, 'device', None)}.",
                "Pass dtype= and device= on to the tensor you create.",
            )


STEP = Step(
    number=2,
    title="Causal masking",
    required={"causal_mask": []},
    checks=[
        Check("square mask: 0 on and below the diagonal, -inf above", square_mask),
        Check("mask offset by cached tokens (num_tokens)", mask_with_cached_tokens),
        Check("the requested dtype is used", dtype_is_respected),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m(
        "ignores cached tokens (num_upper=0)",
        "num_upper=num_tokens",
        "num_upper=0",
        "cached tokens",
    ),
    m("mask inverted (exclude=False)", ", exclude=True)", ", exclude=False)", "inverted"),
    m("ones instead of -inf", 'float("-inf")', "1.0", "-inf"),
    m("diagonal masked", "num_upper=num_tokens", "num_upper=num_tokens - 1", "diagonal"),
    m(
        "square only",
        "total_length = num_tokens + sequence_length",
        "total_length = sequence_length",
        "raised",
    ),
    m(
        "dtype ignored",
        "dtype=dtype, device=device",
        "dtype=DType.float32, device=device",
        "dtype",
    ),
]
