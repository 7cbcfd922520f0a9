"""AMX's tile registers: their configuration, loads, products and stores as
inline assembly, and weight rows laid out as tdpbf16ps takes them.
"""

from std.memory import bitcast, stack_allocation
from std.sys.info import size_of
from std.sys._assembly import inlined_assembly


# AMX (Sapphire Rapids and later) has eight tile registers of 16 rows by 64
# bytes, and tdpbf16ps, which adds the products of a tile of 16 rows of 32
# bfloat16 (x's rows) and a tile of 16 weight rows' 32 bfloat16 (laid out as
# 16 rows of their 16 pairs, pack_panel) into a tile of 16 by 16 float32
# sums: 8192 multiply-adds in one instruction, 256 times vdpbf16ps's 32.
# The tiles are named in the instructions, so the kernel writes them as
# inline assembly: tmm0-3 hold a block's 32 by 32 sums, tmm4-5 two tiles of
# x's rows, tmm6-7 two tiles of weight rows.
comptime AMX_ROWS = 16  # rows of a tile: 16 float32 or 32 bfloat16 each
comptime AMX_BLOCK = 2 * AMX_ROWS  # x's rows, and weight rows, of a block
comptime AMX_ROW_BYTES = 64
# Rows of x from which the tiles run: from 16 rows (one tile of x, in a
# block of 32 rows padded with zeros) on they beat the vector dot products;
# at 8 rows the two are level, the tiles' time mostly the weight rows' layout.
comptime AMX_FROM = 16
comptime AMX_GROUPS = 4  # groups of 32 weight rows laid out at a time
# Rows of x up to which the weights go straight into the tiles
# (linear_rows_amx_direct) instead of being laid out first: with few rows of
# x, laying out every weight row costs more than it saves; with many, each
# laid-out weight row serves many blocks of x's rows and pays for itself.
# Under 16 rows the vector dot products stay ahead of either.
comptime AMX_DIRECT_UNTIL = 64


@always_inline
def configure_tiles():
    """Every tile 16 rows of 64 bytes (palette 1), for this thread."""
    var config = stack_allocation[64, UInt8, alignment=64]()
    for i in range(64):
        config[i] = 0
    config[0] = 1  # the palette
    for tile in range(8):
        config.bitcast[UInt16]()[8 + tile] = AMX_ROW_BYTES  # bytes 16-31
        config[48 + tile] = AMX_ROWS
    inlined_assembly["ldtilecfg ($0)", NoneType, constraints="r,~{memory}"](Int(config))


@always_inline
def release_tiles():
    inlined_assembly["tilerelease", NoneType, constraints="~{memory}"]()


@always_inline
def tiles_from_bias(bias: UnsafePointer[Float32, _]):
    """A block's sums start as the bias: every row of tmm0 and tmm2 is
    bias[0:16], of tmm1 and tmm3 bias[16:32] (loads with a stride of 0)."""
    inlined_assembly[
        "tileloadd ($0,$2,1), %tmm0; tileloadd ($1,$2,1), %tmm1;"
        " tileloadd ($0,$2,1), %tmm2; tileloadd ($1,$2,1), %tmm3",
        NoneType,
        constraints="r,r,r,~{memory}",
    ](Int(bias), Int(bias + AMX_ROWS), 0)


@always_inline
def tiles_zero():
    """A block's four tiles of sums start at zero."""
    inlined_assembly[
        "tilezero %tmm0; tilezero %tmm1; tilezero %tmm2; tilezero %tmm3",
        NoneType,
        constraints="~{memory}",
    ]()


@always_inline
def tiles_add_products(
    x_top: UnsafePointer[BFloat16, _],
    x_bottom: UnsafePointer[BFloat16, _],
    x_stride: Int,
    w_left: UnsafePointer[BFloat16, _],
    w_right: UnsafePointer[BFloat16, _],
):
    """One step of 32 k: x's two tiles of rows (x_stride bytes apart) and
    the two panels' tiles, four products into the four tiles of sums."""
    inlined_assembly[
        "tileloadd ($0,$2,1), %tmm4; tileloadd ($3,$5,1), %tmm6;"
        " tdpbf16ps %tmm6, %tmm4, %tmm0; tileloadd ($4,$5,1), %tmm7;"
        " tdpbf16ps %tmm7, %tmm4, %tmm1; tileloadd ($1,$2,1), %tmm5;"
        " tdpbf16ps %tmm6, %tmm5, %tmm2; tdpbf16ps %tmm7, %tmm5, %tmm3",
        NoneType,
        constraints="r,r,r,r,r,r,~{memory}",
    ](Int(x_top), Int(x_bottom), x_stride, Int(w_left), Int(w_right), AMX_ROW_BYTES)


@always_inline
def tiles_store(sums: UnsafePointer[mut=True, Float32, _], row_stride: Int):
    """The block's 32 by 32 sums to sums[i * row_stride + j] (in floats)."""
    var lower = sums + AMX_ROWS * row_stride
    inlined_assembly[
        "tilestored %tmm0, ($0,$4,1); tilestored %tmm1, ($1,$4,1);"
        " tilestored %tmm2, ($2,$4,1); tilestored %tmm3, ($3,$4,1)",
        NoneType,
        constraints="r,r,r,r,r,~{memory}",
    ](
        Int(sums),
        Int(sums + AMX_ROWS),
        Int(lower),
        Int(lower + AMX_ROWS),
        row_stride * size_of[Float32](),
    )


@always_inline
def transpose_16(v: UnsafePointer[mut=True, SIMD[DType.uint32, AMX_ROWS], _]):
    """v's 16 vectors of 16 lanes transposed in place. Each round interleaves
    vector i with vector i + 8, which moves lane c of vector r to the place
    whose index (4 bits of r, then 4 of c) is the old one rotated by one
    bit; four rounds rotate it by four: c's bits first, the transpose."""
    var t = stack_allocation[AMX_ROWS, SIMD[DType.uint32, AMX_ROWS]]()
    comptime for _round in range(4):
        comptime for i in range(AMX_ROWS // 2):
            var both = v[i].interleave(v[i + AMX_ROWS // 2])
            t[2 * i] = both.slice[AMX_ROWS, offset=0]()
            t[2 * i + 1] = both.slice[AMX_ROWS, offset=AMX_ROWS]()
        comptime for i in range(AMX_ROWS):
            v[i] = t[i]


def pack_panel(
    w: UnsafePointer[BFloat16, _],
    n_out: Int,
    n_in: Int,
    n_first: Int,
    pairs: Int,
    panel: UnsafePointer[mut=True, BFloat16, _],
):
    """Weight rows [n_first, n_first + 16) as tdpbf16ps takes its second
    operand: row r of the panel holds the pair k = 2r, 2r + 1 of each of the
    16 weight rows in turn, for r < pairs; zeros past the weight's edges."""
    var r = 0
    if n_in % 2 == 0 and n_first + AMX_ROWS <= n_out:
        # 16 pairs of 16 rows at a time, each pair a 32-bit lane.
        var row_pairs = n_in // 2
        var w_pairs = w.bitcast[UInt32]()
        var panel_pairs = panel.bitcast[UInt32]()
        var v = stack_allocation[AMX_ROWS, SIMD[DType.uint32, AMX_ROWS]]()
        while r + AMX_ROWS <= row_pairs:
            comptime for j in range(AMX_ROWS):
                v[j] = (w_pairs + (n_first + j) * row_pairs + r).load[width=AMX_ROWS]()
            transpose_16(v)
            comptime for i in range(AMX_ROWS):
                (panel_pairs + (r + i) * AMX_ROWS).store(v[i])
            r += AMX_ROWS
    for pair in range(r, pairs):
        for j in range(AMX_ROWS):
            comptime for half in range(2):
                var k = 2 * pair + half
                var value = BFloat16(0)
                if n_first + j < n_out and k < n_in:
                    value = w[(n_first + j) * n_in + k]
                panel[(pair * AMX_ROWS + j) * 2 + half] = value
