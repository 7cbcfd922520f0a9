"""The statistics of the samples: summaries with their spread, the rotating
order of the rounds, and ratios paired round by round. Pure functions
(tests/test_bench.py checks them)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def summary(samples: Sequence[float]) -> dict:
    """Median, min, max and quartiles of a sample (and the sample itself)."""
    values = sorted(float(v) for v in samples)
    if not values:
        raise ValueError("no samples to summarize")
    if len(values) > 1:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    else:
        q1 = q3 = values[0]
    return dict(
        median=statistics.median(values),
        min=values[0],
        max=values[-1],
        q1=q1,
        q3=q3,
        n=len(values),
        samples=[float(v) for v in samples],
    )


def round_orders(keys: Sequence[str], rounds: int) -> list[list[str]]:
    """The order of the contenders in each round: rotated by one each round,
    so none always runs first or right after another particular one."""
    keys = list(keys)
    return [keys[r % len(keys) :] + keys[: r % len(keys)] for r in range(rounds)]


def paired_ratios(ours: Sequence[float], theirs: Sequence[float]) -> list[float]:
    """Round-by-round ratios of two tokens/s samples measured in the same rounds."""
    if len(ours) != len(theirs):
        raise ValueError(f"samples from different rounds: {len(ours)} vs {len(theirs)}")
    return [a / b for a, b in zip(ours, theirs, strict=True)]


def format_spread(stats: dict, unit: str = "", digits: int = 2) -> str:
    """'1.34x (1.28-1.40)': the median, then min-max."""
    f = f"{{:.{digits}f}}"
    return f"{f.format(stats['median'])}{unit} ({f.format(stats['min'])}-{f.format(stats['max'])})"


def format_percent(fractions: dict) -> str:
    """'92% (85-97)': a fraction's median, then min-max, in percent."""
    return format_spread({k: 100 * fractions[k] for k in ("median", "min", "max")}, "%", 0)
