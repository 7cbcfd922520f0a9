"""The mistakes step 02's checks must name: plausible learner edits of
solutions/solution_02.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
BAND_CALL = "F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=True)"
MISTAKES = [
    m(
        "ignores cached tokens (num_upper=0)",
        "num_upper=num_tokens",
        "num_upper=0",
        "cached tokens are not taken into account",
    ),
    m("mask inverted (exclude=False)", ", exclude=True)", ", exclude=False)", "inverted"),
    m("ones instead of -inf", 'float("-inf")', "1.0", "fill value is 1"),
    m("+inf instead of -inf", 'float("-inf")', 'float("inf")', "+inf"),
    m("large negative instead of -inf", 'float("-inf")', "-1e9", "large finite number"),
    m(
        "num_upper one short (-1 means no limit)",
        "num_upper=num_tokens",
        "num_upper=num_tokens - 1",
        "nothing is masked",
    ),
    m(
        "diagonal masked (upper triangle kept)",
        "num_lower=None, num_upper=num_tokens, exclude=True",
        "num_lower=0, num_upper=None, exclude=False",
        "attend to itself",
    ),
    m(
        "num_upper is the sequence length",
        "num_upper=num_tokens,",
        "num_upper=sequence_length,",
        "is not what a row needs",
    ),
    m("one future token visible", "num_upper=num_tokens", "num_upper=num_tokens + 1", "one future"),
    m(
        "earlier tokens masked (num_lower=0)",
        "num_lower=None, num_upper",
        "num_lower=0, num_upper",
        "earlier tokens",
    ),
    m(
        "band_part result dropped",
        f"return {BAND_CALL}",
        f"{BAND_CALL}\n    return mask",
        "returns a new",
    ),
    m(
        "square only",
        "total_length = num_tokens + sequence_length",
        "total_length = sequence_length",
        "columns wide",
    ),
    m(
        "rows and columns swapped",
        "[sequence_length, total_length]",
        "[total_length, sequence_length]",
        "rows and columns are swapped",
    ),
    m(
        "dtype ignored",
        "dtype=dtype, device=device",
        "dtype=DType.float32, device=device",
        "returned dtype",
    ),
    m("dtype not passed", "dtype=dtype, device=device", "device=device", "returned dtype"),
    m("device not passed", "dtype=dtype, device=device", "dtype=dtype", "the default device"),
    Mutant(
        "mask made on CPU()",
        (
            ("from max.driver import Device", "from max.driver import CPU, Device"),
            ("dtype=dtype, device=device", "dtype=dtype, device=CPU()"),
        ),
        "made the mask on CPU(), not on the device it was given",
    ),
]
