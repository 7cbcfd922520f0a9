"""A prompt's rows times bfloat16 weights, through AMX's tiles: the weight rows
laid out first (many rows of x), or straight from memory (a few).
"""

from std.math import ceildiv
from std.memory import alloc, bitcast, stack_allocation
from std.sys.info import num_physical_cores, size_of
from max.algorithm import parallelize
from extensibility import InputTensor, OutputTensor
from .cpu import PAIRS
from .claims import claim, new_counters
from .amx_tiles import AMX_BLOCK, AMX_GROUPS, AMX_ROWS, AMX_ROW_BYTES, configure_tiles, pack_panel, release_tiles, tiles_add_products, tiles_from_bias, tiles_store, tiles_zero, transpose_16
from .dots import at, contiguous_weight, dot_bf16
from .bf16_tiles import rounded_rows


def linear_rows_amx(
    output: OutputTensor[dtype = DType.float32, rank=2, ...],
    x: InputTensor[dtype = DType.float32, rank=2, ...],
    weight: InputTensor[rank=2, ...],
    bias: InputTensor[dtype = DType.float32, rank=1, ...],
) raises:
    """bfloat16 weights through AMX's tiles, for a prompt's many rows.

    x is rounded to bfloat16 once, with zeros to whole blocks of 32 rows and
    whole tiles of 32 k, each tile's values contiguous (rounded_rows'
    `tiled`: one tile's load then reads one contiguous KB, where x's rows as
    they are put a tile's 16 rows kilobytes apart). Each core
    claims groups of 32 weight rows, lays them out as the tiles take them
    (pack_panel, once per call), and runs every block of 32 rows of x
    against them: four tiles of sums, which start as the bias and go to the
    output in four stores."""
    var rows = x.dim_size(0)
    var n_out = weight.dim_size(0)
    var n_in = weight.dim_size(1)
    contiguous_weight(weight)
    var padded_rows = ceildiv(rows, AMX_BLOCK) * AMX_BLOCK
    var padded_k = ceildiv(n_in, PAIRS) * PAIRS
    var x_rows = rounded_rows[tiled=True](x, padded_rows, padded_k)
    var groups = ceildiv(n_out, AMX_BLOCK)
    var padded_bias = alloc[Float32](groups * AMX_BLOCK)
    var b_ptr = bias.unsafe_ptr()
    var b_stride = bias.strides()[0]
    for n in range(groups * AMX_BLOCK):
        padded_bias[n] = b_ptr[n * b_stride] if n < n_out else 0
    var out_strides = output.strides()
    var out_ptr = output.unsafe_ptr()
    var w_ptr = weight.unsafe_ptr().bitcast[BFloat16]()
    var claims = new_counters(1)
    var workers = num_physical_cores()

    @always_inline
    def block(
        m: Int, n_first: Int, panels: type_of(x_rows), edge: UnsafePointer[mut=True, Float32, _]
    ) {var}:
        """The 32 by 32 outputs of x's rows from m and weight rows from
        n_first, whose two panels start at `panels`."""
        var right_panel = panels + AMX_ROWS * padded_k
        tiles_from_bias(padded_bias + n_first)
        var x_top = x_rows + m * padded_k  # the band of rows m..m + 15, tiled
        for k in range(0, padded_k, PAIRS):
            tiles_add_products(
                x_top + k * AMX_ROWS,
                x_top + AMX_ROWS * padded_k + k * AMX_ROWS,
                AMX_ROW_BYTES,
                panels + k * AMX_ROWS,
                right_panel + k * AMX_ROWS,
            )
        var inside = m + AMX_BLOCK <= rows and n_first + AMX_BLOCK <= n_out
        if inside and out_strides[1] == 1:
            tiles_store(out_ptr + m * out_strides[0] + n_first, out_strides[0])
            return
        # At the output's edges: through `edge`, then the rows and columns
        # inside the output to it.
        tiles_store(edge, AMX_BLOCK)
        for i in range(min(AMX_BLOCK, rows - m)):
            for j in range(min(AMX_BLOCK, n_out - n_first)):
                var at = (m + i) * out_strides[0] + (n_first + j) * out_strides[1]
                out_ptr[at] = edge[i * AMX_BLOCK + j]

    var panel_elements = AMX_BLOCK * padded_k  # two panels, one group's

    def worker(index: Int) {var}:
        configure_tiles()
        var panels = alloc[BFloat16](AMX_GROUPS * panel_elements)
        var edge = stack_allocation[AMX_BLOCK * AMX_BLOCK, Float32]()
        var span = claim(claims, 0, groups, 1, workers)
        while span[0] < span[1]:
            # AMX_GROUPS groups' panels at a time against each block of x's
            # rows in turn, so that x's block is read from memory once for
            # all of them and stays in the L2 cache while they go by.
            for first_group in range(span[0], span[1], AMX_GROUPS):
                var last_group = min(first_group + AMX_GROUPS, span[1])
                for group in range(first_group, last_group):
                    var at = panels + (group - first_group) * panel_elements
                    var n_first = group * AMX_BLOCK
                    pack_panel(w_ptr, n_out, n_in, n_first, padded_k // 2, at)
                    var right = at + AMX_ROWS * padded_k
                    pack_panel(w_ptr, n_out, n_in, n_first + AMX_ROWS, padded_k // 2, right)
                for m in range(0, padded_rows, AMX_BLOCK):
                    for group in range(first_group, last_group):
                        var at = panels + (group - first_group) * panel_elements
                        block(m, group * AMX_BLOCK, at, edge)
            span = claim(claims, 0, groups, 1, workers)
        panels.free()
        release_tiles()

    parallelize(worker, workers)
    claims.free()
    padded_bias.free()
    x_rows.free()


def linear_rows_amx_direct(
    output: OutputTensor[dtype = DType.float32, rank=2, ...],
    x: InputTensor[dtype = DType.float32, rank=2, ...],
    weight: InputTensor[rank=2, ...],
    bias: InputTensor[dtype = DType.float32, rank=1, ...],
) raises:
    """bfloat16 weights straight from memory into AMX's tiles, for a short
    prompt's rows (n_in a whole number of tiles: the caller's check).

    tdpbf16ps's first operand is 16 rows of 32 bfloat16 at any stride: 16
    weight rows as they are stored. So here the weights are that operand and
    x's rows, laid out in pairs once per call (pack_panel; a few KB), the
    second: every weight byte goes from memory into a tile once, where
    linear_rows_amx first lays the weights out, a pass that only many rows
    of x repay. The sums come out as weight rows by x's rows, and go to the
    output transposed, sixteen by sixteen in vectors. Weight rows past the
    last whole group of 32 take the vector dot products."""
    var rows = x.dim_size(0)
    var n_out = weight.dim_size(0)
    var n_in = weight.dim_size(1)
    contiguous_weight(weight)
    var padded_rows = ceildiv(rows, AMX_BLOCK) * AMX_BLOCK
    var x_rows = rounded_rows(x, padded_rows, n_in)  # zeros past x's rows
    var x_panels = alloc[BFloat16](padded_rows * n_in)
    for band in range(padded_rows // AMX_ROWS):
        var panel = x_panels + band * AMX_ROWS * n_in
        pack_panel(x_rows, padded_rows, n_in, band * AMX_ROWS, n_in // 2, panel)
    var out_strides = output.strides()
    var out_ptr = output.unsafe_ptr()
    var b_ptr = bias.unsafe_ptr()
    var b_stride = bias.strides()[0]
    var w_ptr = weight.unsafe_ptr().bitcast[BFloat16]()
    var groups = n_out // AMX_BLOCK
    var claims = new_counters(1)
    var workers = num_physical_cores()

    @always_inline
    def store(m: Int, n: Int, total: Float32) {var}:
        out_ptr[m * out_strides[0] + n * out_strides[1]] = total + b_ptr[n * b_stride]

    @always_inline
    def write_out(sums: UnsafePointer[mut=True, Float32, _], m_first: Int, n_first: Int) {var}:
        """The 32 by 32 sums (weight row r, x's row c at r * 32 + c) to the
        output rows m_first.. and columns n_first.., with the bias."""
        var m_count = min(AMX_BLOCK, rows - m_first)
        if out_strides[1] != 1 or b_stride != 1:
            for r in range(AMX_BLOCK):
                for c in range(m_count):
                    store(m_first + c, n_first + r, sums[r * AMX_BLOCK + c])
            return
        var v = stack_allocation[AMX_ROWS, SIMD[DType.uint32, AMX_ROWS]]()
        comptime for r_half in range(2):
            var n = n_first + r_half * AMX_ROWS
            var b = (b_ptr + n).load[width=AMX_ROWS]()
            comptime for c_half in range(2):
                var c_first = c_half * AMX_ROWS
                if c_first < m_count:
                    comptime for i in range(AMX_ROWS):
                        var at = sums + (r_half * AMX_ROWS + i) * AMX_BLOCK + c_first
                        v[i] = at.bitcast[UInt32]().load[width=AMX_ROWS]()
                    transpose_16(v)  # lanes: weight rows; v[j]: x's row c_first + j
                    for j in range(min(AMX_ROWS, m_count - c_first)):
                        var values = bitcast[DType.float32, AMX_ROWS](v[j]) + b
                        (out_ptr + (m_first + c_first + j) * out_strides[0] + n).store(values)

    def worker(index: Int) {var}:
        configure_tiles()
        var sums = stack_allocation[AMX_BLOCK * AMX_BLOCK, Float32]()
        var span = claim(claims, 0, groups, 1, workers)
        while span[0] < span[1]:
            for group in range(span[0], span[1]):
                var n_first = group * AMX_BLOCK
                var w_top = w_ptr + n_first * n_in
                var w_bottom = w_top + AMX_ROWS * n_in
                for m in range(0, padded_rows, AMX_BLOCK):
                    var x_left = x_panels + m * n_in
                    var x_right = x_left + AMX_ROWS * n_in
                    tiles_zero()
                    for k in range(0, n_in, PAIRS):
                        tiles_add_products(
                            w_top + k,
                            w_bottom + k,
                            n_in * size_of[BFloat16](),
                            x_left + k * AMX_ROWS,
                            x_right + k * AMX_ROWS,
                        )
                    tiles_store(sums, AMX_BLOCK)
                    write_out(sums, m, n_first)
            span = claim(claims, 0, groups, 1, workers)
        release_tiles()

    parallelize(worker, workers)
    for n in range(groups * AMX_BLOCK, n_out):  # the last weight rows, under a group
        for m in range(rows):
            store(m, n, dot_bf16(w_ptr + n * n_in, x_rows + m * n_in, n_in))
    claims.free()
    x_panels.free()
    x_rows.free()
