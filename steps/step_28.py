"""Step 28: four-bit blocks (Q4_0 and Q4_1).

Goal: ggml's two 4-bit formats. A block of 32 weights becomes 32 levels of
0 ... 15, packed two to a byte in ggml's order; Q4_0 keeps one float16 scale
a block (its levels centred on 8), Q4_1 a scale and the block's minimum, the
format SmolLM2's file uses. Pack in NumPy (done once), unpack and dequantize
in the graph (every forward).

Run: pixi run s28    (or: python -m tests.check 28)
Stuck? Read docs/src/step_28.md (pixi run book).
"""

import numpy as np
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor

BLOCK = 32  # weights per block, consecutive along a row's input axis
HALF = BLOCK // 2  # a block's bytes: two 4-bit levels in each
OFFSET = 8  # Q4_0's level for a weight of 0: levels 0 ... 15 stand for -8 ... 7


def as_blocks(weight: np.ndarray) -> np.ndarray:
    """[out, in] as [out, in // 32, 32], as in step 27."""
    out_dim, in_dim = weight.shape
    return weight.reshape(out_dim, in_dim // BLOCK, BLOCK)


def inverse_of(scales: np.ndarray) -> np.ndarray:
    """1 / scale, and 0 where the scale is 0 (an all-zero block), as in step 27."""
    return 1 / np.where(scales == 0, np.inf, scales)


def pack_nibbles(levels: np.ndarray) -> np.ndarray:
    """Levels 0 ... 15, [..., 32], two to a byte in ggml's order, [..., 16]
    uint8: byte j holds level j in its low 4 bits and level j + 16 in its high 4."""
    levels = levels.astype(np.uint8)
    # TODO: byte j of a block: level j in the low 4 bits, level j + HALF in
    #   the high 4 (the page's "Two levels in a byte").
    return None
    # END TODO


def quantize_q4_0(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[out, in] float32 -> scales [out, in // 32] float16 and packed levels
    [out, in // 32, 16] uint8, ggml's Q4_0."""
    blocks = as_blocks(weight)
    # The block's weight of largest magnitude, with its sign.
    largest = np.take_along_axis(blocks, np.abs(blocks).argmax(axis=-1)[..., None], axis=-1)
    # TODO: the scale that makes that weight level 0, [out, in // 32]; each
    #   weight in steps; its level: ggml adds OFFSET and a half and truncates,
    #   at most 15 (the page's "Q4_0").
    scales = None
    steps = None
    levels = None
    # END TODO
    return scales.astype(np.float16), pack_nibbles(levels)


def quantize_q4_1(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[out, in] float32 -> scales and minimums [out, in // 32] float16 and
    packed levels [out, in // 32, 16] uint8, ggml's Q4_1."""
    blocks = as_blocks(weight)
    # TODO: each block's minimum, [out, in // 32]; the step that spreads the
    #   block from its minimum to its maximum over 16 levels; each weight's
    #   steps above the minimum, and its level, rounded as ggml rounds (add a
    #   half, truncate) (the page's "Q4_1").
    minimums = None
    scales = None
    steps = None
    levels = None
    # END TODO
    return scales.astype(np.float16), minimums.astype(np.float16), pack_nibbles(levels)


def unpack_nibbles(packed: Tensor) -> Tensor:
    """[out, blocks, 16] uint8 -> the blocks' levels [out, blocks, 32]
    float32: the 16 low nibbles (values 0 ... 15), then the 16 high ones."""
    wide = packed.cast(DType.float32)
    # TODO: each byte's low nibble and its high one, as numbers 0 ... 15, the
    #   block's first 16 levels then its last 16 (the page's "Unpacking in the
    #   graph").
    return None
    # END TODO


def dequantize_q4_0(scales: Tensor, packed: Tensor) -> Tensor:
    """Q4_0 blocks back to the weight [out, blocks * 32] float32."""
    out_dim, num_blocks, half = (int(d) for d in packed.shape)
    step = scales.cast(DType.float32).reshape([out_dim, num_blocks, 1])
    # TODO: each level back to a weight, [out, blocks, 32] (the page's "Q4_0").
    weight = None
    # END TODO
    return weight.reshape([out_dim, num_blocks * 2 * half])


def dequantize_q4_1(scales: Tensor, minimums: Tensor, packed: Tensor) -> Tensor:
    """Q4_1 blocks back to the weight [out, blocks * 32] float32."""
    out_dim, num_blocks, half = (int(d) for d in packed.shape)
    step = scales.cast(DType.float32).reshape([out_dim, num_blocks, 1])
    low = minimums.cast(DType.float32).reshape([out_dim, num_blocks, 1])
    # TODO: each level back to a weight, [out, blocks, 32] (the page's "Q4_1").
    weight = None
    # END TODO
    return weight.reshape([out_dim, num_blocks * 2 * half])
