"""Step 30: your first Mojo kernel.

Goal: the body of a custom MAX operation, in Mojo: x times a Q8_0 weight,
read as blocks, never widened to a float32 matrix.

Step 27's Q8Linear widens its Q8_0 blocks to a float32 weight in every
forward, writes that weight to memory, and reads it back for the product:
4 bytes a weight read, where the blocks hold 1.0625. This kernel reads the
blocks themselves: for each row of x and each output, the dot product with
one weight row, block by block, each block's 32 int8 values widened in
registers and its sum times its own float16 scale. No float32 weight exists.

MAX calls it as the custom operation "q8_0_matvec" (common/q8_kernel.py
adds it to a graph). The tensors arrive as flat runs of memory, row after
row: the functions below say where an element sits in its run.

Run: pixi run s30    (or: python -m tests.check 30)
Stuck? Read docs/src/step_30.md (pixi run book).
"""

import extensibility
from extensibility import InputTensor, OutputTensor

comptime BLOCK = 32  # weights per block, consecutive along a row's input axis


def value_offset(n: Int, b: Int, i: Int, blocks: Int) -> Int:
    """Where value i of block b of weight row n sits in values
    [out, blocks, 32], read as one flat run of int8."""
    # TODO: the values are stored row after row, each row its blocks one
    #   after another, each block its 32 values: count the int8s before this
    #   one (the page's "Where an element lives").
    return TODO
    # END TODO


def scale_offset(n: Int, b: Int, blocks: Int) -> Int:
    """Where block b of weight row n keeps its scale in scales [out, blocks]."""
    # TODO: one scale per block, the rows one after another.
    return TODO
    # END TODO


def x_offset(m: Int, b: Int, i: Int, n_in: Int) -> Int:
    """Where the input that value i of block b multiplies sits in x's row m,
    x being [rows, in] read as one flat run of float32."""
    # TODO: the inputs of x's row m, one row after another; within the row,
    #   the input that weight's column multiplies.
    return TODO
    # END TODO


@extensibility.register("q8_0_matvec")
struct Q8_0Matvec:
    """Output[m, n] = x[m, :] . W[n, :] for a few rows x [rows, in], with W
    [out, in] held as Q8_0 blocks: scales [out, in // 32] float16 and values
    [out, in // 32, 32] int8. The output is float32 [rows, out]."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        x: InputTensor[dtype = DType.float32, rank=2, ...],
        scales: InputTensor[dtype = DType.float16, rank=2, ...],
        values: InputTensor[dtype = DType.int8, rank=3, ...],
    ) raises:
        var rows = x.dim_size(0)
        var n_out = values.dim_size(0)
        var blocks = values.dim_size(1)
        var n_in = blocks * BLOCK
        if x.dim_size(1) != n_in or values.dim_size(2) != BLOCK:
            raise Error("x must be [rows, in] and values [out, in // 32, 32]")
        # The offsets above hold for tensors laid out row after row, the
        # layout common/q8_kernel.py hands over.
        if x.strides()[0] != n_in or output.strides()[0] != n_out:
            raise Error("x and the output must be contiguous, row after row")
        var x_ptr = x.unsafe_ptr()
        var scale_ptr = scales.unsafe_ptr()
        var value_ptr = values.unsafe_ptr()
        var out_ptr = output.unsafe_ptr()
        # TODO: for every row m of x and every output n, the dot product of
        #   x's row m with weight row n, block by block: in each block, its
        #   32 values widened to float32 times x's matching inputs, summed;
        #   that sum times the block's scale (a float16, widened); the blocks'
        #   results added up and stored at output row m, column n. Read and
        #   write through the offsets above (the page's "The kernel's loops").
        TODO
        # END TODO
