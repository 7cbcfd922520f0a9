"""Checks for step 02: causal_mask."""

import re

import numpy as np

from tests import reference_gpt2 as ref
from tests.checker import Check, Context, Fail, Step, expect_close, to_numpy


def make_mask(ctx: Context, sequence_length: int, num_tokens: int):
    from max.driver import CPU
    from max.dtype import DType

    fn = ctx.get("causal_mask")
    try:
        return ctx.call(
            f"causal_mask({sequence_length}, {num_tokens}, ...)",
            fn,
            sequence_length,
            num_tokens,
            dtype=DType.float32,
            device=CPU(),
        )
    except Fail as failure:
        bounds = re.search(r"num_(upper|lower)=(-?\d+) is out of bounds", failure.message)
        if bounds and (bounds[1] == "lower" or int(bounds[2]) != num_tokens):
            raise Fail(
                failure.message,
                f"band_part refuses a band wider than the matrix, and num_{bounds[1]}="
                f"{bounds[2]} is not what a row needs: the band reaches num_tokens columns "
                "right of the diagonal (a row sees no future token) and has no limit below it.",
            ) from failure
        if bounds:
            raise Fail(
                failure.message,
                "band_part refuses a band wider than the matrix: is the mask "
                "num_tokens + sequence_length columns wide? The cached tokens are columns "
                "too.",
            ) from failure
        raise


def band(sequence_length: int, num_tokens: int, lowest, highest) -> np.ndarray:
    """0 where lowest(i) <= j <= highest(i), else -inf."""
    rows = np.arange(sequence_length)[:, None]
    cols = np.arange(num_tokens + sequence_length)[None, :]
    return np.where((cols >= lowest(rows)) & (cols <= highest(rows)), 0.0, -np.inf)


def wrong_outputs(sequence_length: int, num_tokens: int) -> dict[str, np.ndarray]:
    """Wrong masks people build, in the order a tie is named (first match wins)."""
    right = ref.causal_mask(sequence_length, num_tokens)
    total = num_tokens + sequence_length
    found = {}
    if num_tokens:  # first: with one cached token it is also "the diagonal is masked"
        found[
            "The cached tokens are not taken into account: row i may see columns up to "
            "i + num_tokens (num_upper=num_tokens)."
        ] = np.pad(
            ref.causal_mask(sequence_length, 0), ((0, 0), (0, num_tokens)), constant_values=-np.inf
        )
    found |= {
        "The mask is inverted: 0 must be where attention is allowed (j <= i + num_tokens), "
        "-inf above that diagonal.": np.where(np.isinf(right), 0.0, -np.inf),
        "Nothing is masked: the mask is all 0, so every token sees the future. The band "
        "reaches too far right of the diagonal; note that band_part reads a negative "
        "num_upper (or num_lower) as no limit, like None.": np.zeros_like(right),
        "Everything is -inf: no band was zeroed. F.band_part returns a new tensor and "
        "leaves its input unchanged: return (or keep) what it returns.": np.full_like(
            right, -np.inf
        ),
        "The diagonal is masked too: a token may attend to itself (row i sees column "
        "num_tokens + i).": band(
            sequence_length, num_tokens, lambda r: 0 * r, lambda r: r + num_tokens - 1
        ),
        "Earlier tokens are masked: a row must see every column to its left, so the band "
        "has no limit below the diagonal (num_lower=None).": band(
            sequence_length, num_tokens, lambda r: r, lambda r: r + num_tokens
        ),
        "The mask's fill value is 1 where it should be -inf: it is added to scores, so "
        "use float('-inf').": np.where(np.isinf(right), 1.0, 0.0),
        "The mask's fill value is +inf where it should be -inf: +inf added to a score "
        "gives the softmax NaN, not a weight of 0.": np.where(np.isinf(right), np.inf, 0.0),
    }
    for extra in (1, 2, 3):  # the band one or more columns too far right
        ahead = "one future token" if extra == 1 else f"{extra} future tokens"
        found[
            f"Each row sees {ahead}: row i may see columns up to num_tokens + i and no "
            "further; the band reaches num_tokens columns right of the diagonal."
        ] = band(
            sequence_length, num_tokens, lambda r: 0 * r, lambda r, k=extra: r + num_tokens + k
        )
    for short in range(2, num_tokens + 1):
        if short != num_tokens:
            found[
                f"Each row sees {short} columns too few: row i may see every column up to "
                "num_tokens + i, the cached tokens included."
            ] = band(
                sequence_length, num_tokens, lambda r: 0 * r, lambda r, k=short: r + num_tokens - k
            )
    return {why: wrong for why, wrong in found.items() if wrong.shape == (sequence_length, total)}


def compare(ctx: Context, sequence_length: int, num_tokens: int, hint: str | None = None) -> None:
    what = f"causal_mask({sequence_length}, {num_tokens})"
    actual = to_numpy(make_mask(ctx, sequence_length, num_tokens), what)
    expected = ref.causal_mask(sequence_length, num_tokens)
    if actual.shape == expected.shape[::-1] and actual.shape != expected.shape:
        raise Fail(
            f"{what} has shape {list(actual.shape)}, expected {list(expected.shape)}: "
            "rows and columns are swapped.",
            "Rows are the new tokens (sequence_length), columns every token a row may look "
            "at (num_tokens + sequence_length).",
        )
    if num_tokens and actual.shape == (sequence_length, sequence_length):
        raise Fail(
            f"{what} has shape {list(actual.shape)}, expected {list(expected.shape)}: the "
            "mask is square, with no columns for the cached tokens.",
            "The mask is num_tokens + sequence_length columns wide: one column per cached "
            "token, then one per new token.",
        )
    forbidden = np.isinf(expected)
    if actual.shape == expected.shape and forbidden.any():
        finite = actual[forbidden]
        if np.all(np.isfinite(finite)) and np.all(finite == finite[0]) and finite[0] < -1e3:
            if np.array_equal(actual[~forbidden], expected[~forbidden]):
                raise Fail(
                    f"{what} does not match GPT-2: its fill value is {finite[0]:g}, a large "
                    "finite number, where it should be -inf.",
                    "Use float('-inf'): it gives a weight of exactly 0 whatever the scores and "
                    "the dtype. A finite number must stay far below every score, and "
                    "overflows to -inf in float16 anyway.",
                )
    expect_close(actual, expected, what, wrong_outputs(sequence_length, num_tokens), hint=hint)


def square_mask(ctx: Context) -> None:
    for sequence_length in (5, 7, 1):  # 1 last: its 1x1 mask cannot tell mistakes apart
        compare(ctx, sequence_length, 0)


def mask_with_cached_tokens(ctx: Context) -> None:
    # (2, 1) first: a mask with too few columns or swapped axes still gets built
    for sequence_length, num_tokens in [(2, 1), (3, 4), (1, 6)]:
        compare(
            ctx,
            sequence_length,
            num_tokens,
            hint="The result is [sequence_length, num_tokens + sequence_length].",
        )


def dtype_and_device_are_respected(ctx: Context) -> None:
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F

    with F.lazy():  # typed, not computed: no float16 kernel compiles for this check
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
    devices_asked = filled_devices(ctx)
    if devices_asked is not None:
        raise Fail(
            f"causal_mask(4, 0, device=...) made the mask on {devices_asked}, not on the "
            "device it was given.",
            "The mask is added to scores on the caller's device: on a machine with a GPU, "
            "a mask made elsewhere cannot be added to them. Pass the function's own device "
            "on to the tensor you create.",
        )
    from max.driver import Accelerator, accelerator_count

    if accelerator_count():  # a real second device: the mask must land on it
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
                f"{getattr(mask, 'device', None)}, not on the device it was given.",
                "Pass dtype= and device= on to the tensor you create.",
            )


def filled_devices(ctx: Context) -> str | None:
    """Where causal_mask asks MAX to fill its tensor, said in the learner's terms,
    when that is not the device it was given; None when it is (or nothing is filled).

    A machine with only a CPU has one device, which MAX hands out as one object:
    the device this check passes is a second CPU object, told apart by identity,
    and a spy on F.full (which Tensor.full calls) sees which one the code passed."""
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F

    class GivenCPU(CPU):
        """The CPU, as a distinct object: the one causal_mask was given."""

    given = GivenCPU()
    asked = []
    real_full = F.full

    def full(*args, device=None, **kwargs):
        asked.append(device)
        return real_full(*args, device=device, **kwargs)

    F.full = full
    try:
        with F.lazy():  # nothing is computed: only what was asked matters
            ctx.call(
                "causal_mask(4, 0, device=...)",
                ctx.get("causal_mask"),
                4,
                0,
                dtype=DType.float32,
                device=given,
            )
    finally:
        F.full = real_full
    if not asked or any(device is given for device in asked):
        return None
    device = asked[0]
    if device is None:
        return "the default device (no device= passed on)"
    return "CPU()" if isinstance(device, CPU) else repr(device)


STEP = Step(
    number=2,
    required={"causal_mask": []},
    checks=[
        Check("square mask: 0 on and below the diagonal, -inf above", square_mask),
        Check("mask offset by cached tokens (num_tokens)", mask_with_cached_tokens),
        Check(
            "the mask is made in the requested dtype, on the requested device",
            dtype_and_device_are_respected,
        ),
    ],
)
