"""Step 27: block quantization, 8 bits (Q8_0).

Goal: keep a Linear's weight in ggml's Q8_0, the 8-bit format of llama.cpp's
GGUF files. Each row is cut into blocks of 32 weights along the input axis;
a block keeps one float16 scale and 32 int8 values. Quantize in NumPy (done
once, offline), dequantize in the graph (every forward), and build a Linear
that holds only the blocks.

Run: pixi run s27    (or: python -m tests.check 27)
Stuck? Read docs/src/step_27.md (pixi run book).
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
    # TODO: the weight as blocks, [out, in // 32, 32]: each row cut into runs
    #   of BLOCK consecutive inputs. Then one float32 step per block, [out,
    #   in // 32], chosen so that the block's largest magnitude becomes LEVELS
    #   (the page's "The Q8_0 block").
    blocks = None
    scales = None
    # END TODO
    # An all-zero block has a step of 0, and all its values are 0: no division
    # by 0 (a step taken as infinite has an inverse of exactly 0).
    # TODO: 1 / step for every block, 0 where the step is 0 (the page's "An
    #   all-zero block"); then each weight in steps of its block's scale,
    #   [out, in // 32, 32].
    inverse = None
    steps = None
    # END TODO
    # Rounded as ggml rounds (C's roundf): an exact tie goes away from zero.
    # TODO: each weight's steps rounded to the nearest whole number, a tie
    #   (2.5) away from zero, as int8 (the page's "Rounding").
    values = None
    # END TODO
    # Rounded to float16 only to be stored: the values came from the exact step.
    # TODO: the scales as the file stores them (2 bytes each), and the values.
    return None
    # END TODO


def dequantize_q8_0(scales: Tensor, values: Tensor) -> Tensor:
    """Q8_0 blocks back to the weight they stand for: scales [out, blocks]
    float16 and values [out, blocks, 32] int8 in, [out, blocks * 32] float32
    out, each value times its own block's scale."""
    out_dim, num_blocks, block = (int(d) for d in values.shape)
    # TODO: both in float32, each value times its own block's scale:
    #   [out, blocks, 32] times one scale per block that broadcasts over its
    #   32 values (the page's "Dequantizing in the graph").
    weight = None
    # END TODO
    return weight.reshape([out_dim, num_blocks * block])


class Q8Linear(Module[[Tensor], Tensor]):
    """A Linear without bias (as in Llama) whose weight stays Q8_0 blocks:
    `scales` and `values` are its tensors, and forward widens them to float32
    in the graph, right before the product."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        if in_dim % BLOCK:
            raise ValueError(f"in_dim is {in_dim}: Q8_0 needs a multiple of {BLOCK} inputs")
        # TODO: the layer's two tensors, zeros until a checkpoint fills them:
        #   the scales [out, in // 32] in float16 and the values
        #   [out, in // 32, 32] in int8 (the page's "A quantized Linear").
        self.scales = None
        self.values = None
        # END TODO

    def forward(self, x: Tensor) -> Tensor:
        # TODO: the float32 weight [out, in] from the blocks, then the Linear's
        #   product: [..., in] in, [..., out] out.
        weight = None
        return None
        # END TODO
