"""ggml's block types as a GGUF file stores them, widened to float32 in NumPy.

A tensor info names its block type by a number (ggml.h's `ggml_type`);
`GGML_TYPES` names them all, and `BLOCK_FORMATS` holds the ones step 29's
reader widens: float32, float16 and bfloat16 (step 23), Q8_0 (step 27),
Q4_0 and Q4_1 (step 28). Steps 27 and 28 dequantize in the graph; a file's
reader widens in NumPy, once, when it loads a tensor. `Q6_K` is not step 29's:
llama.cpp's quantizer writes a Q4 model's head in it, and fast/llama.py reads
it as Q8_0 blocks made from its numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

BLOCK = 32  # numbers a block of Q8_0, Q4_0 and Q4_1 holds (steps 27 and 28)
HALF = BLOCK // 2  # a 4-bit block's bytes of levels, two levels in each
OFFSET = 8  # Q4_0's level for a weight of 0

# ggml's block types, by the number a tensor info stores (ggml.h's ggml_type).
GGML_TYPES = {
    **{0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1"},
    **{10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K"},
    **{16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S"},
    **{22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64"},
    **{29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4"},
}
TYPE_NUMBERS = {kind: number for number, kind in GGML_TYPES.items()}


@dataclass(frozen=True)
class BlockFormat:
    """How a block type stores its numbers: `size` bytes for every `count`
    numbers, and how to widen a [blocks, size] uint8 array to [blocks, count]."""

    count: int
    size: int
    widen: Callable[[np.ndarray], np.ndarray]


def as_float16(raw: np.ndarray) -> np.ndarray:
    """Columns of 2 bytes as little-endian float16 numbers widened to float32."""
    return np.ascontiguousarray(raw).view("<f2").astype(np.float32)


def widen_q8_0(blocks: np.ndarray) -> np.ndarray:
    """Step 27's Q8_0: a float16 scale, then 32 int8 values."""
    return blocks[:, 2:].view(np.int8) * as_float16(blocks[:, :2])


def levels_of(packed: np.ndarray) -> np.ndarray:
    """Step 28's nibbles: the 16 low ones (a block's first 16 levels), then the 16 high."""
    return np.concatenate([packed & 0x0F, packed >> 4], axis=-1).astype(np.float32)


def widen_q4_0(blocks: np.ndarray) -> np.ndarray:
    """Step 28's Q4_0: a float16 scale, then 16 bytes of levels centred on 8."""
    return (levels_of(blocks[:, 2:]) - OFFSET) * as_float16(blocks[:, :2])


def widen_q4_1(blocks: np.ndarray) -> np.ndarray:
    """Step 28's Q4_1: a float16 scale and minimum, then 16 bytes of levels."""
    return levels_of(blocks[:, 4:]) * as_float16(blocks[:, :2]) + as_float16(blocks[:, 2:4])


def widen_bf16(blocks: np.ndarray) -> np.ndarray:
    """bfloat16 is a float32's top two bytes (step 23)."""
    return (np.ascontiguousarray(blocks).view("<u2").astype(np.uint32) << 16).view(np.float32)


BLOCK_FORMATS = {
    "F32": BlockFormat(1, 4, lambda blocks: np.ascontiguousarray(blocks).view("<f4")),
    "F16": BlockFormat(1, 2, as_float16),
    "BF16": BlockFormat(1, 2, widen_bf16),
    "Q8_0": BlockFormat(BLOCK, 2 + BLOCK, widen_q8_0),
    "Q4_0": BlockFormat(BLOCK, 2 + HALF, widen_q4_0),
    "Q4_1": BlockFormat(BLOCK, 4 + HALF, widen_q4_1),
}


def widen_q6_k(blocks: np.ndarray) -> np.ndarray:
    """ggml's Q6_K: 256 numbers a block, 16 runs of 16 each with an int8
    scale, times a float16 d at the block's end. A level (0 to 63, centred on
    32) is 4 low bits from `ql` (128 bytes) and 2 high bits from `qh` (64
    bytes). Each half of the block (128 numbers) takes 64 bytes of ql and 32
    of qh: number l (< 32) of its four quarters has its low bits in ql[l]'s
    low nibble, ql[l + 32]'s low nibble, ql[l]'s high one and ql[l + 32]'s
    high one, and its high bits in qh[l]'s bit pairs 0, 1, 2 and 3."""
    ql = blocks[:, :128].reshape(-1, 2, 2, 32)  # [block, half, first/second 32, l]
    qh = blocks[:, 128:192].reshape(-1, 2, 1, 32)
    scales = blocks[:, 192:208].view(np.int8).astype(np.float32)
    d = as_float16(blocks[:, 208:210])
    low = np.concatenate([ql & 0x0F, ql >> 4], axis=2)  # quarters 0, 1, 2, 3
    high = (qh >> np.array([0, 2, 4, 6], np.uint8).reshape(1, 1, 4, 1)) & 3
    levels = (low | (high << 4)).astype(np.float32) - 32  # [block, half, quarter, l]
    runs = levels.reshape(-1, 16, 16) * scales.reshape(-1, 16, 1)
    return (runs.reshape(len(blocks), 256) * d).astype(np.float32)


Q6_K = BlockFormat(256, 210, widen_q6_k)
