"""A prompt's rows of x times a weight's blocks (Q8_0, Q4_0, Q4_1) in
integers, where the CPU has AVX-512 and its VNNI instructions.

In float32 a prompt's products are bound by the multiply-adds: ggml_rows'
panels ran at 150-160 GFLOP/s on the Zen 4's two cores, the FMA units' peak.
A 512-bit vpmaddwd multiplies 32 pairs of 16-bit numbers and adds each pair,
and with VNNI the add into the sums comes in the same instruction
(vpdpwssd): twice the products of a float32 FMA an instruction. So x is
rounded as a decoded token's is (token_rows.mojo's prepare_x: a block of 32
16-bit levels and a scale d_x, each row of x), the weights' levels are
widened to 16 bits (Q4_0's less 8), and a block's 32 products are summed in
integers; each block's sums then take one conversion and one multiply-add by
d_w * d_x into float32 sums (and Q4_1's m times the block's sum of x).

The panel holds INT_PANEL weight rows by input pair: at pair p of block b,
each row's two levels side by side (one 32-bit lane a row), so that a pair
of x's levels broadcast to every lane multiplies 16 rows in one instruction
(an outer product: INT_MR rows of x by the panel's 32 rows, the sums in
registers, none added across lanes).
"""

from std.memory import bitcast, stack_allocation
from std.sys.info import CompilationTarget
from std.sys.intrinsics import llvm_intrinsic
from std.utils import IndexList
from .blocks import BLOCK, HALF, Q4_0, Q4_1
from .token_rows import block_levels, row_block

comptime INT_PANELS = CompilationTarget._has_feature["avx512vnni"]() and CompilationTarget._has_feature["avx512bw"]()
comptime LANES = 16  # a 512-bit register's int32 sums
comptime INT_PANEL = 2 * LANES  # weight rows of a panel: two registers of sums
comptime INT_MR = 6  # rows of x at once: 12 registers of integer sums, 12 of float32 ones
comptime PAIRS = HALF  # a block's pairs of inputs
comptime PAIR_WORDS = SIMD[DType.int16, 2 * LANES]


@always_inline
def pair_products(a: PAIR_WORDS, b: PAIR_WORDS) -> SIMD[DType.int32, LANES]:
    """a[2j] * b[2j] + a[2j + 1] * b[2j + 1] in lane j (vpmaddwd; added to a
    sum, the compiler makes it vpdpwssd)."""
    return llvm_intrinsic["llvm.x86.avx512.pmaddw.d.512", SIMD[DType.int32, LANES]](a, b)


def widen_int_panel[
    kind: Int
](
    w: UnsafePointer[UInt8, _],
    first: Int,
    count: Int,
    rows: Int,
    blocks: Int,
    panel: UnsafePointer[mut=True, Int16, _],
    scales: UnsafePointer[mut=True, Float32, _],
):
    """Rows first .. first + count - 1 (count <= INT_PANEL) of a [rows, blocks]
    matrix: panel[((b * PAIRS + p) * INT_PANEL + t) * 2 + e] is row first + t's
    level of weight b * 32 + 2p + e; scales[b * INT_PANEL + t] its block b's d,
    scales[(blocks + b) * INT_PANEL + t] its m (Q4_1's). Rows past `count` are zeros."""
    for t in range(INT_PANEL):
        for b in range(blocks):
            var at = panel + (b * PAIRS * INT_PANEL + t) * 2
            if t >= count:
                for k in range(BLOCK):
                    at[(k // 2) * INT_PANEL * 2 + k % 2] = 0
                scales[b * INT_PANEL + t] = 0
                scales[(blocks + b) * INT_PANEL + t] = 0
                continue
            var block = row_block[kind](w, first + t, rows, blocks, b)
            var words = block_levels[kind](w + block[0])
            comptime less = Int16(8) if kind == Q4_0 else Int16(0)  # so that d * level is the weight
            comptime for k in range(BLOCK):
                at[(k // 2) * INT_PANEL * 2 + k % 2] = words[k // HALF][k % HALF] - less
            scales[b * INT_PANEL + t] = block[1]
            scales[(blocks + b) * INT_PANEL + t] = block[2]


@always_inline
def int_panel_tile[
    kind: Int, m_rows: Int
](
    panel: UnsafePointer[Int16, _],
    scales: UnsafePointer[Float32, _],
    blocks: Int,
    x_areas: UnsafePointer[Float32, _],
    area: Int,
    dest: UnsafePointer[mut=True, Float32, _],
    out_strides: IndexList[2],
    columns: Int,
):
    """dest[i, j] = x's row i . the panel's row j, for m_rows rows of x
    (prepare_x's areas, `area` floats apart) and the panel's `columns` first rows."""
    var sums = stack_allocation[2 * m_rows, SIMD[DType.float32, LANES]]()
    comptime for i in range(2 * m_rows):
        sums[i] = 0
    for b in range(blocks):
        var products = stack_allocation[2 * m_rows, SIMD[DType.int32, LANES]]()
        comptime for i in range(2 * m_rows):
            products[i] = 0
        var block_panel = panel + b * PAIRS * INT_PANEL * 2
        for p in range(PAIRS):
            var low = (block_panel + p * INT_PANEL * 2).load[width = 2 * LANES]()
            var high = (block_panel + p * INT_PANEL * 2 + 2 * LANES).load[width = 2 * LANES]()
            comptime for i in range(m_rows):
                var pairs = (x_areas + i * area + 2 * blocks).bitcast[Int32]()
                var pair = bitcast[DType.int16, 2 * LANES](SIMD[DType.int32, LANES](pairs[b * PAIRS + p]))
                products[2 * i] += pair_products(low, pair)
                products[2 * i + 1] += pair_products(high, pair)
        var d_low = (scales + b * INT_PANEL).load[width=LANES]()
        var d_high = (scales + b * INT_PANEL + LANES).load[width=LANES]()
        comptime for i in range(m_rows):
            var d_x = x_areas[i * area + b]
            sums[2 * i] += products[2 * i].cast[DType.float32]() * (d_low * d_x)
            sums[2 * i + 1] += products[2 * i + 1].cast[DType.float32]() * (d_high * d_x)
            comptime if kind == Q4_1:  # m times the block's sum of x
                var x_sum = x_areas[i * area + blocks + b]
                sums[2 * i] += (scales + (blocks + b) * INT_PANEL).load[width=LANES]() * x_sum
                sums[2 * i + 1] += (scales + (blocks + b) * INT_PANEL + LANES).load[width=LANES]() * x_sum
    comptime for i in range(m_rows):
        var at = dest + i * out_strides[0]
        if columns == INT_PANEL and out_strides[1] == 1:
            at.store(sums[2 * i])
            (at + LANES).store(sums[2 * i + 1])
        else:
            for j in range(columns):
                at[j * out_strides[1]] = sums[2 * i + j // LANES][j % LANES]


def int_panel_times_x[
    kind: Int
](
    panel: UnsafePointer[Int16, _],
    scales: UnsafePointer[Float32, _],
    count: Int,
    blocks: Int,
    x_areas: UnsafePointer[Float32, _],
    area: Int,
    first: Int,
    last: Int,
    dest: UnsafePointer[mut=True, Float32, _],
    out_strides: IndexList[2],
):
    """dest[m, t] = x's row m . the panel's row t, for x's rows [first, last)
    and the panel's `count` rows (dest: column 0 of the panel's rows)."""
    var m = first
    while m + INT_MR <= last:
        var at = dest + m * out_strides[0]
        int_panel_tile[kind, INT_MR](panel, scales, blocks, x_areas + m * area, area, at, out_strides, count)
        m += INT_MR
    comptime for r in range(1, INT_MR):  # the rows after the last INT_MR
        if last - m == r:
            var at = dest + m * out_strides[0]
            int_panel_tile[kind, r](panel, scales, blocks, x_areas + m * area, area, at, out_strides, count)
