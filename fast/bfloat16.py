"""float32 to bfloat16 in NumPy, for fast/gpt2.py's bfloat16 weights.

MAX would cast them with a graph that its eager interpreter refuses on the
CPU, compiling one instead; rounding here takes a NumPy expression.
"""

from __future__ import annotations

import numpy as np
from max.driver import Buffer
from max.dtype import DType


def to_bfloat16(state: dict[str, np.ndarray]) -> dict[str, Buffer]:
    """float32 arrays -> bfloat16 buffers, rounded to nearest even. Arrays
    shared by two names (the tied head) stay shared."""
    converted: dict[int, Buffer] = {}
    for array in state.values():
        if id(array) not in converted:
            buffer = Buffer.from_numpy(bfloat16_bits(array))
            converted[id(array)] = buffer.view(DType.bfloat16, array.shape)
    return {name: converted[id(array)] for name, array in state.items()}


def bfloat16_bits(array: np.ndarray) -> np.ndarray:
    """`array` rounded to the nearest bfloat16 (ties to even): its bits, as
    uint16. bfloat16 is float32's upper half: add half of the dropped lower
    half (ties to even), then drop it."""
    bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bfloat16_rounded(array: np.ndarray) -> np.ndarray:
    """`array` rounded to the nearest bfloat16 (ties to even), as float32."""
    return (bfloat16_bits(array).astype(np.uint32) << 16).view(np.float32)
