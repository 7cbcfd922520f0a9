"""Step 28: four-bit blocks (Q4_0 and Q4_1).

Half of Q8_0's bytes: ggml's 4-bit formats keep 16 levels a weight and pack
two levels in a byte, a block's first 16 values in the low nibbles of its 16
bytes and its last 16 in the high ones. Q4_0 keeps one float16 scale a block
and centres its levels on 8 (a weight is (level - 8) * scale: 18 bytes for
32 weights, 4.5 bits); Q4_1 keeps a scale and the block's minimum (a weight
is level * scale + minimum: 20 bytes, 5 bits), the format SmolLM2's file
uses. Quantizing and packing are NumPy, done once; unpacking and
dequantizing are MAX, in the graph.
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
    return levels[..., :HALF] | (levels[..., HALF:] << 4)


def quantize_q4_0(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[out, in] float32 -> scales [out, in // 32] float16 and packed levels
    [out, in // 32, 16] uint8, ggml's Q4_0."""
    blocks = as_blocks(weight)
    # The block's weight of largest magnitude, with its sign.
    largest = np.take_along_axis(blocks, np.abs(blocks).argmax(axis=-1)[..., None], axis=-1)
    scales = largest[..., 0] / -OFFSET
    steps = blocks * inverse_of(scales)[..., None]
    # ggml adds 8.5 and truncates: the nearest level, 8 for a weight of 0.
    levels = np.minimum(np.trunc(steps + (OFFSET + 0.5)), 15)
    return scales.astype(np.float16), pack_nibbles(levels)


def quantize_q4_1(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[out, in] float32 -> scales and minimums [out, in // 32] float16 and
    packed levels [out, in // 32, 16] uint8, ggml's Q4_1."""
    blocks = as_blocks(weight)
    minimums = blocks.min(axis=-1)
    scales = (blocks.max(axis=-1) - minimums) / 15
    steps = (blocks - minimums[..., None]) * inverse_of(scales)[..., None]
    levels = np.trunc(steps + 0.5)
    return scales.astype(np.float16), minimums.astype(np.float16), pack_nibbles(levels)


def unpack_nibbles(packed: Tensor) -> Tensor:
    """[out, blocks, 16] uint8 -> the blocks' levels [out, blocks, 32]
    float32: the 16 low nibbles (values 0 ... 15), then the 16 high ones."""
    wide = packed.cast(DType.float32)
    return F.concat([wide % 16, wide // 16], axis=-1)


def dequantize_q4_0(scales: Tensor, packed: Tensor) -> Tensor:
    """Q4_0 blocks back to the weight [out, blocks * 32] float32."""
    out_dim, num_blocks, half = (int(d) for d in packed.shape)
    step = scales.cast(DType.float32).reshape([out_dim, num_blocks, 1])
    weight = (unpack_nibbles(packed) - OFFSET) * step
    return weight.reshape([out_dim, num_blocks * 2 * half])


def dequantize_q4_1(scales: Tensor, minimums: Tensor, packed: Tensor) -> Tensor:
    """Q4_1 blocks back to the weight [out, blocks * 32] float32."""
    out_dim, num_blocks, half = (int(d) for d in packed.shape)
    step = scales.cast(DType.float32).reshape([out_dim, num_blocks, 1])
    low = minimums.cast(DType.float32).reshape([out_dim, num_blocks, 1])
    weight = unpack_nibbles(packed) * step + low
    return weight.reshape([out_dim, num_blocks * 2 * half])
