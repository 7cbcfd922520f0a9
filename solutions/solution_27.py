"""Step 27: block quantization, 8 bits (Q8_0).

A float32 weight takes 4 bytes. ggml's Q8_0, the 8-bit format of llama.cpp's
GGUF files, cuts each row of a weight into blocks of 32 along the input axis
and keeps, per block, one float16 scale (the block's largest magnitude over
127) and 32 int8 values: 34 bytes for 32 weights, 8.5 bits a weight, and no
weight off by more than half its block's step. Quantizing is done once,
offline, in NumPy, as llama.cpp's converter does; dequantizing happens in the
graph, in every forward, right before the matmul.
"""

import numpy as np
from max.dtype import DType
from max.experimental.nn import Module
from max.experimental.tensor import Tensor

BLOCK = 32  # weights per block, consecutive along a row's input axis
LEVELS = 127  # the largest value a block uses: -127 ... 127


def quantize_q8_0(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A Linear's weight [out, in] (in a multiple of 32) as Q8_0 blocks:
    scales [out, in // 32] float16 and values [out, in // 32, 32] int8, so
    that weight ≈ values * scales[..., None]."""
    out_dim, in_dim = weight.shape
    blocks = weight.reshape(out_dim, in_dim // BLOCK, BLOCK)
    # The block's largest magnitude becomes 127: one step is that over 127.
    scales = np.abs(blocks).max(axis=-1) / LEVELS
    # An all-zero block has a step of 0, and all its values are 0: no division
    # by 0 (a step taken as infinite has an inverse of exactly 0).
    inverse = 1 / np.where(scales == 0, np.inf, scales)
    steps = blocks * inverse[..., None]
    # Rounded as ggml rounds (C's roundf): an exact tie goes away from zero.
    values = (np.sign(steps) * np.floor(np.abs(steps) + 0.5)).astype(np.int8)
    # Rounded to float16 only to be stored: the values came from the exact step.
    return scales.astype(np.float16), values


def dequantize_q8_0(scales: Tensor, values: Tensor) -> Tensor:
    """Q8_0 blocks back to the weight they stand for: scales [out, blocks]
    float16 and values [out, blocks, 32] int8 in, [out, blocks * 32] float32
    out, each value times its own block's scale."""
    out_dim, num_blocks, block = (int(d) for d in values.shape)
    weight = values.cast(DType.float32) * scales.cast(DType.float32).reshape(
        [out_dim, num_blocks, 1]
    )
    return weight.reshape([out_dim, num_blocks * block])


class Q8Linear(Module[[Tensor], Tensor]):
    """A Linear without bias (as in Llama) whose weight stays Q8_0 blocks:
    `scales` and `values` are its tensors, and forward widens them to float32
    in the graph, right before the product."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        if in_dim % BLOCK:
            raise ValueError(f"in_dim is {in_dim}: Q8_0 needs a multiple of {BLOCK} inputs")
        self.scales = Tensor.zeros([out_dim, in_dim // BLOCK], dtype=DType.float16)
        self.values = Tensor.zeros([out_dim, in_dim // BLOCK, BLOCK], dtype=DType.int8)

    def forward(self, x: Tensor) -> Tensor:
        weight = dequantize_q8_0(self.scales, self.values)
        return x @ weight.T
