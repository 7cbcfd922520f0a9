"""The projection kernels MAX calls (x times a weight's rows, plus the bias),
each for the rows it is given: one decoded token's, a server's few, or a
prompt's many; and what the kernels were built with (gpt2_built_for).
"""

from std.memory import alloc
from std.sys.info import num_physical_cores
from max.algorithm import parallelize
import extensibility
from extensibility import InputTensor, OutputTensor
from .cpu import BF16_DOT_BUILT, PAIRS, STREAMS, WIDTH, cpu_has_amx, cpu_has_bf16_dot
from .claims import claim, new_counters, smallest_claim
from .amx_tiles import AMX_DIRECT_UNTIL, AMX_FROM
from .dots import contiguous_weight, dot_rows_streamed, dot_widening
from .bf16_tiles import linear_rows_bf16_dot
from .linear_rows_amx import linear_rows_amx, linear_rows_amx_direct


@extensibility.register("gpt2_linear_rows")
struct LinearRows:
    """Output[m, n] = x[m, :] . weight[n, :] + bias[n], for a few rows x.

    weight is [out, in] (a MAX Linear's layout), float32 or bfloat16; x,
    bias and the output are float32. Each weight row is read from memory
    once and used for every row of x while it sits in the L1 cache.
    bfloat16 weights on a machine with AVX512_BF16 go through its bfloat16
    dot products, x rounded to bfloat16 once (linear_rows_bf16_dot);
    elsewhere, and for float32 weights, they are widened to float32 in
    registers (linear_rows_widening).
    """

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        x: InputTensor[dtype = DType.float32, rank=2, ...],
        weight: InputTensor[rank=2, ...],
        bias: InputTensor[dtype = DType.float32, rank=1, ...],
    ) raises:
        comptime if weight.dtype == DType.bfloat16 and BF16_DOT_BUILT:
            if not cpu_has_bf16_dot():
                linear_rows_widening(output, x, weight, bias)
            elif x.dim_size(0) >= AMX_FROM and cpu_has_amx():
                if x.dim_size(0) <= AMX_DIRECT_UNTIL and weight.dim_size(1) % PAIRS == 0:
                    linear_rows_amx_direct(output, x, weight, bias)
                else:
                    linear_rows_amx(output, x, weight, bias)
            else:
                linear_rows_bf16_dot(output, x, weight, bias)
        else:
            linear_rows_widening(output, x, weight, bias)


@extensibility.register("gpt2_linear_rows_dot")
struct LinearRowsDot:
    """gpt2_linear_rows with bfloat16 weights through the vector dot
    products (vdpbf16ps) for every row count, never AMX's tiles: the path of
    a CPU with AVX512_BF16 and no AMX, for the tests and the profile on one
    that has both. Widens where the CPU has neither."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        x: InputTensor[dtype = DType.float32, rank=2, ...],
        weight: InputTensor[rank=2, ...],
        bias: InputTensor[dtype = DType.float32, rank=1, ...],
    ) raises:
        comptime if weight.dtype == DType.bfloat16 and BF16_DOT_BUILT:
            if cpu_has_bf16_dot():
                linear_rows_bf16_dot(output, x, weight, bias)
                return
        linear_rows_widening(output, x, weight, bias)


@extensibility.register("gpt2_linear_rows_widening")
struct LinearRowsWidening:
    """gpt2_linear_rows with bfloat16 weights widened to float32 whatever the
    machine: the path of a machine without AVX512_BF16, for the tests and
    the profile on one that has them."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        x: InputTensor[dtype = DType.float32, rank=2, ...],
        weight: InputTensor[rank=2, ...],
        bias: InputTensor[dtype = DType.float32, rank=1, ...],
    ) raises:
        linear_rows_widening(output, x, weight, bias)


@extensibility.register("gpt2_linear_rows_narrow")
struct LinearRowsNarrow:
    """gpt2_linear_rows_widening with 8 float32 lanes a vector, whatever the
    machine: the code a CPU with AVX2 but no AVX-512 runs (its WIDTH), for
    the tests on one with AVX-512 (which runs 8-lane vectors too)."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        x: InputTensor[dtype = DType.float32, rank=2, ...],
        weight: InputTensor[rank=2, ...],
        bias: InputTensor[dtype = DType.float32, rank=1, ...],
    ) raises:
        linear_rows_widening[width=8](output, x, weight, bias)


@extensibility.register("gpt2_built_for")
struct BuiltFor:
    """[bfloat16 dot products, WIDTH, AMX], 1 or 0 but WIDTH: whether
    gpt2_linear_rows multiplies bfloat16 weights as they are, how many
    float32 lanes a vector holds, and whether a prompt's rows go through
    AMX's tiles, as the compiler that built the kernels and the CPU running
    them decide."""

    @staticmethod
    def execute[target: StaticString](output: OutputTensor[dtype = DType.int32, rank=1, ...]):
        var bf16_dot = cpu_has_bf16_dot()
        output.unsafe_ptr()[0] = 1 if bf16_dot else 0
        output.unsafe_ptr()[1] = Int32(WIDTH)
        output.unsafe_ptr()[2] = 1 if bf16_dot and cpu_has_amx() else 0


def linear_rows_widening[width: Int = WIDTH](
    output: OutputTensor[dtype = DType.float32, rank=2, ...],
    x: InputTensor[dtype = DType.float32, rank=2, ...],
    weight: InputTensor[rank=2, ...],
    bias: InputTensor[dtype = DType.float32, rank=1, ...],
) raises:
    """The weights as float32 (bfloat16 widened in registers), x as it is."""
    var rows = x.dim_size(0)
    var n_out = weight.dim_size(0)
    var n_in = weight.dim_size(1)
    contiguous_weight(weight)
    # x and the output may be views (MAX can hand a kernel a transposed
    # or sliced tensor without copying it): read and write them through
    # their strides, and give the inner loop a contiguous copy of x.
    var x_rows = alloc[Float32](rows * n_in)
    var x_strides = x.strides()
    var x_in = x.unsafe_ptr()
    for m in range(rows):
        for k in range(n_in):
            x_rows[m * n_in + k] = x_in[m * x_strides[0] + k * x_strides[1]]
    var out_strides = output.strides()
    var w_ptr = weight.unsafe_ptr()
    var x_ptr = x_rows
    var b_ptr = bias.unsafe_ptr()
    var b_stride = bias.strides()[0]
    var out_ptr = output.unsafe_ptr()
    var vector_end = n_in - n_in % width

    def rows_between(first: Int, last: Int) {var}:
        # One row of x (a decoded token): the weight rows in streams side by
        # side (dot_rows_streamed), then the bias.
        var streamed = first
        if rows == 1:
            streamed = dot_rows_streamed[False, width=width](
                w_ptr, first, last, n_in, x_ptr, out_ptr, out_strides[1]
            )
            for n in range(first, streamed):
                out_ptr[n * out_strides[1]] += b_ptr[n * b_stride]
        # Each weight row, in memory order, against every row of x: four
        # rows of x at a time (each load of a weight feeds four sums), then
        # the rows left one by one.
        for n in range(streamed, last):
            var w_row = w_ptr + n * n_in
            var b = b_ptr[n * b_stride]
            var m = 0
            while m + 4 <= rows:
                var x0 = x_ptr + m * n_in
                var x1 = x0 + n_in
                var x2 = x1 + n_in
                var x3 = x2 + n_in
                var a0 = SIMD[DType.float32, width](0)
                var a1 = SIMD[DType.float32, width](0)
                var a2 = SIMD[DType.float32, width](0)
                var a3 = SIMD[DType.float32, width](0)
                for k in range(0, vector_end, width):
                    var w = (w_row + k).load[width=width]().cast[DType.float32]()
                    a0 += w * (x0 + k).load[width=width]()
                    a1 += w * (x1 + k).load[width=width]()
                    a2 += w * (x2 + k).load[width=width]()
                    a3 += w * (x3 + k).load[width=width]()
                var t0 = a0.reduce_add()
                var t1 = a1.reduce_add()
                var t2 = a2.reduce_add()
                var t3 = a3.reduce_add()
                for k in range(vector_end, n_in):
                    var w = w_row[k].cast[DType.float32]()
                    t0 += w * x0[k]
                    t1 += w * x1[k]
                    t2 += w * x2[k]
                    t3 += w * x3[k]
                var column = n * out_strides[1]
                out_ptr[m * out_strides[0] + column] = t0 + b
                out_ptr[(m + 1) * out_strides[0] + column] = t1 + b
                out_ptr[(m + 2) * out_strides[0] + column] = t2 + b
                out_ptr[(m + 3) * out_strides[0] + column] = t3 + b
                m += 4
            while m < rows:
                var total = dot_widening[width=width](w_row, x_ptr + m * n_in, n_in)
                out_ptr[m * out_strides[0] + n * out_strides[1]] = total + b
                m += 1

    # The rows claimed as in decode_blocks, one at a time (guided): fewer
    # hand-offs than a fixed task per 32 rows, and the cores end together.
    var claims = new_counters(1)
    var workers = num_physical_cores()

    def worker(index: Int) {var}:
        var rows = claim(claims, 0, n_out, smallest_claim(weight), workers, STREAMS)
        while rows[0] < rows[1]:
            rows_between(rows[0], rows[1])
            rows = claim(claims, 0, n_out, smallest_claim(weight), workers, STREAMS)

    parallelize(worker, workers)
    claims.free()
    x_rows.free()
