"""Comparing the learner's tensors with the NumPy reference, and naming the
mistake when the numbers match a known wrong answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .engine import Fail

RTOL = 1e-4  # float32 against a float64 reference, after a few matmuls
ATOL = 2e-5


def tensor(array: np.ndarray) -> Any:
    """A MAX Tensor holding `array` (same dtype) on the default device."""
    from max.experimental.tensor import Tensor

    return Tensor(np.ascontiguousarray(array))


def to_numpy(value: Any, what: str) -> np.ndarray:
    if value is None:
        raise Fail(f"{what} returned None.", "Is a `return` missing, or still a placeholder?")
    if isinstance(value, np.ndarray):
        return value
    if not hasattr(value, "to_numpy"):
        raise Fail(f"{what} returned a {type(value).__name__}, expected a MAX Tensor.")
    try:
        return np.asarray(value.to_numpy())
    except Exception as error:
        raise Fail(f"{what}: the result could not be computed: {first_line(error)}") from error


def first_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0].strip()[:200] if lines else ''}"


def close(actual: np.ndarray, expected: np.ndarray, rtol: float = RTOL, atol: float = ATOL) -> bool:
    """Equal shapes, the same NaN and +-inf entries, finite entries within
    atol + rtol * (largest expected magnitude)."""
    if actual.shape != expected.shape:
        return False
    for special in (np.isnan, np.isposinf, np.isneginf):
        if not np.array_equal(special(actual), special(expected)):
            return False
    finite = np.isfinite(expected)
    tolerance = atol + rtol * float(np.max(np.abs(expected[finite]), initial=0.0))
    return bool(np.all(np.abs(actual[finite] - expected[finite]) <= tolerance))


def expect_shape(
    value: Any, shape: tuple[int, ...], what: str, hint: str | None = None
) -> np.ndarray:
    array = to_numpy(value, what)
    if array.shape != tuple(shape):
        raise Fail(f"{what} has shape {list(array.shape)}, expected {list(shape)}.", hint)
    return array


def expect_close(
    value: Any,
    expected: np.ndarray,
    what: str,
    mistakes: Mapping[str, np.ndarray] | None = None,
    hint: str | None = None,
    rtol: float = RTOL,
    model: str = "GPT-2",
    parts: Mapping[str, Any] | None = None,
) -> None:
    """Pass when `value` matches `expected`; otherwise fail, naming the first
    mistake in `mistakes` ({explanation: what that mistake computes}) that
    reproduces the learner's numbers, else the first of `parts` ({message: an
    index into both arrays, a piece the learner wrote}) that differs, else
    the numbers. `model` is what the numbers should match ("Llama" in Part II)."""
    actual = to_numpy(value, what)
    if close(actual, expected, rtol):
        return
    for explanation, wrong in (mistakes or {}).items():
        if close(actual, np.asarray(wrong), rtol):
            raise Fail(f"{what} does not match {model}.", explanation)
    expect_shape(actual, expected.shape, what, hint)
    for message, index in (parts or {}).items():
        if not close(actual[index], expected[index], rtol):
            raise Fail(message, hint)
    if np.isnan(actual).any():
        raise Fail(
            f"{what} contains NaN.",
            hint or "Look for a division by zero or a log/sqrt of a negative number.",
        )
    diff = np.where(np.isfinite(expected), np.abs(actual - expected), 0.0)
    diff = np.where(np.isnan(diff), np.inf, diff)
    if not np.array_equal(np.isinf(actual), np.isinf(expected)):
        where = tuple(int(i) for i in np.argwhere(np.isinf(actual) != np.isinf(expected))[0])
    else:
        where = tuple(int(i) for i in np.unravel_index(np.argmax(diff), diff.shape))
    raise Fail(
        f"{what} has the right shape but wrong values: at index {list(where)} expected "
        f"{expected[where]:.6g}, got {actual[where]:.6g} "
        f"(largest difference {float(np.max(diff)):.3g}).",
        hint,
    )
