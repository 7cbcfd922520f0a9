"""Many rows of x times bfloat16 weights, in register tiles of vdpbf16ps (four
rows of x by four weight rows), and x rounded to bfloat16 for them.
"""

from std.math import ceildiv
from std.memory import alloc, bitcast, stack_allocation
from std.sys.info import num_physical_cores
from std.sys._assembly import inlined_assembly
from std.sys.intrinsics import prefetch
from max.algorithm import parallelize
from extensibility import InputTensor, OutputTensor
from .cpu import CAN_ASK_CPU, HAS_BF16_DOT, PAIRS, STREAMS, WIDTH
from .claims import claim, new_counters, smallest_claim
from .amx_tiles import AMX_ROWS
from .dots import contiguous_weight, dot_bf16, dot_pairs, dot_rows_streamed


comptime BF16_TILE = 4  # the many-row product: 4 rows of x by 4 weight rows
# Below 8 rows the weights' stream from memory sets the time, and one row at
# a time in memory order streams faster than four rows interleaved; from 8
# rows on the arithmetic does, and the tiles do it faster (the profile's
# table by row count, `python -m devtools.bench --profile`).
comptime BF16_TILES_FROM = 8
# The tiles take k in slices and x's rows in blocks, so that a tile's four
# weight rows stay in the L1 cache while x's rows go by, and x's block in the
# L2 cache while the claimed weight rows go by. With the whole of k and of x
# at once, a tile's eight rows of a long k (the MLP's second projection,
# k = 3072) outgrow a core's L1 cache and a prompt's x its L2, and every
# pass over x's rows reads the weight rows back from the L2 cache and x
# from the L3. The sizes below did best of those tried (devtools/bench/
# TUNING_LOG.md).
comptime BF16_K_BLOCK = 1024  # bfloat16 lanes of k in a slice
comptime BF16_M_BLOCK = 128  # rows of x in a block
comptime ROUND_IN_PARALLEL_FROM = 65536  # values of x all cores round to bfloat16


@always_inline
def pair_sums(
    a: SIMD[DType.float32, 16], b: SIMD[DType.float32, 16]
) -> SIMD[DType.float32, 16]:
    """Adjacent lanes of a, then of b, added: a's 16 lanes become 8, b's the
    other 8, in order. Applied four times over sixteen vectors of partial
    sums it leaves each vector's total in its own lane."""
    var halves = a.join(b).deinterleave()
    return halves[0] + halves[1]


@always_inline
def tile_totals(
    sums: UnsafePointer[SIMD[DType.float32, 16], _]
) -> SIMD[DType.float32, 16]:
    """The sixteen vectors' totals, sums[s].reduce_add() in lane s, in 15
    additions and 30 shuffles instead of sixteen reductions of their own."""
    comptime assert BF16_TILE * BF16_TILE == 16, "one lane per dot product"
    var level = stack_allocation[8, SIMD[DType.float32, 16]]()
    comptime for s in range(8):
        level[s] = pair_sums(sums[2 * s], sums[2 * s + 1])
    comptime for s in range(4):
        level[s] = pair_sums(level[2 * s], level[2 * s + 1])
    comptime for s in range(2):
        level[s] = pair_sums(level[2 * s], level[2 * s + 1])
    return pair_sums(level[0], level[1])


@always_inline
def tile_dots(
    w_rows: UnsafePointer[BFloat16, _],
    x_rows: UnsafePointer[BFloat16, _],
    n_in: Int,
    k_first: Int,
    k_last: Int,
    prefetch_next: Bool,
) -> SIMD[DType.float32, 16]:
    """Four rows of x against four weight rows over k in [k_first, k_last):
    sixteen dot products, x's row i against weight row j in lane 4i + j."""
    var sums = stack_allocation[BF16_TILE * BF16_TILE, SIMD[DType.float32, 16]]()
    comptime for s in range(BF16_TILE * BF16_TILE):
        sums[s] = 0
    var xs = stack_allocation[BF16_TILE, SIMD[DType.bfloat16, PAIRS]]()
    for k in range(k_first, k_last, PAIRS):
        comptime for i in range(BF16_TILE):
            xs[i] = (x_rows + i * n_in + k).load[width=PAIRS]()
        comptime for j in range(BF16_TILE):
            var w_row = w_rows + j * n_in
            if prefetch_next:  # the first tile reads these rows from memory
                prefetch(w_row + k + BF16_TILE * n_in)
            var w = (w_row + k).load[width=PAIRS]()
            comptime for i in range(BF16_TILE):
                sums[i * BF16_TILE + j] = dot_pairs(sums[i * BF16_TILE + j], w, xs[i])
    return tile_totals(sums)


@always_inline
def rounded_to_bf16(v: SIMD[DType.float32, WIDTH]) -> SIMD[DType.bfloat16, WIDTH]:
    """v rounded to bfloat16 (to the nearest, ties to even), on a CPU with
    AVX512_BF16 (the only callers'): its vcvtneps2bf16 where the compiler's
    target lacks it, which would otherwise round with a dozen integer
    operations a lane."""
    comptime if HAS_BF16_DOT or not CAN_ASK_CPU:
        return v.cast[DType.bfloat16]()
    else:
        comptime assert WIDTH == 16, "AVX-512's 16 float32 lanes"
        var bits = inlined_assembly[
            "vcvtneps2bf16 $1, $0",
            SIMD[DType.int16, WIDTH],
            constraints="=v,v",
            has_side_effect=False,
        ](v)
        return bitcast[DType.bfloat16, WIDTH](bits)


@always_inline
def rounded_row(
    row_in: UnsafePointer[Float32, _],
    column_stride: Int,
    values: Int,
    scale: Float32,
    row_out: UnsafePointer[mut=True, BFloat16, _],
    row_length: Int,
):
    """row_out[0:values] = row_in's first `values` values (column_stride
    apart) times `scale`, rounded to bfloat16 (vdpbf16ps's and the tiles'
    operands, on a CPU with AVX512_BF16); zeros after them up to
    row_length."""
    var k = 0
    if column_stride == 1:
        var vector_end = values - values % WIDTH
        while k < vector_end:
            (row_out + k).store(rounded_to_bf16((row_in + k).load[width=WIDTH]() * scale))
            k += WIDTH
    while k < values:
        row_out[k] = (row_in[k * column_stride] * scale).cast[DType.bfloat16]()
        k += 1
    while k < row_length:
        row_out[k] = 0
        k += 1


def rounded_rows[
    tiled: Bool = False
](
    x: InputTensor[dtype = DType.float32, rank=2, ...], rows_out: Int, row_length: Int
) -> UnsafePointer[BFloat16, MutUntrackedOrigin]:
    """x rounded to bfloat16, contiguous: [rows_out, row_length], zeros past
    x's own rows and columns (the AMX tiles' padding), on a CPU with
    AVX512_BF16. The caller frees it.

    `tiled` lays the values out as AMX's tiles read them (rows_out a
    multiple of AMX_ROWS, row_length of PAIRS): each tile of AMX_ROWS rows
    by PAIRS values (1 KB) contiguous, a band of AMX_ROWS rows' tiles in k's
    order, then the next band; a tile is then one contiguous read instead
    of sixteen rows far apart."""
    var rows = x.dim_size(0)
    var n_in = x.dim_size(1)
    var x_rows = alloc[BFloat16](rows_out * row_length)
    var x_strides = x.strides()
    var x_in = x.unsafe_ptr()

    def round_rows(m_first: Int, m_last: Int) {var}:
        for m in range(m_first, m_last):
            var row_in = x_in + m * x_strides[0]
            var values = n_in if m < rows else 0
            comptime if tiled:
                var band = x_rows + (m // AMX_ROWS) * AMX_ROWS * row_length
                var row_out = band + (m % AMX_ROWS) * PAIRS
                for k in range(0, row_length, PAIRS):
                    var chunk = min(max(values - k, 0), PAIRS)
                    var tile = row_out + k * AMX_ROWS
                    rounded_row(row_in + k * x_strides[1], x_strides[1], chunk, 1, tile, PAIRS)
            else:
                rounded_row(row_in, x_strides[1], values, 1, x_rows + m * row_length, row_length)

    var workers = num_physical_cores()
    # A prompt's x is megabytes: every core rounds its share.
    if rows_out * row_length >= ROUND_IN_PARALLEL_FROM:

        def round_share(index: Int) {var}:
            var share = ceildiv(rows_out, workers)
            round_rows(index * share, min((index + 1) * share, rows_out))

        parallelize(round_share, workers)
    else:
        round_rows(0, rows_out)
    return x_rows


def linear_rows_bf16_dot(
    output: OutputTensor[dtype = DType.float32, rank=2, ...],
    x: InputTensor[dtype = DType.float32, rank=2, ...],
    weight: InputTensor[rank=2, ...],
    bias: InputTensor[dtype = DType.float32, rank=1, ...],
) raises:
    """bfloat16 weights through vdpbf16ps, x rounded to bfloat16 once.

    A few rows of x (decoding, a small batch) take the weight rows one after
    the other, in memory order. Eight rows or more (a prompt) go four by four
    against four weight rows (tile_dots): sixteen sums in registers, so that
    each load, of a weight or of x, feeds four dot products and the product
    runs at the dot-product units' speed rather than the loads', over slices
    of k and blocks of x's rows that stay in the caches."""
    var rows = x.dim_size(0)
    var n_out = weight.dim_size(0)
    var n_in = weight.dim_size(1)
    contiguous_weight(weight)
    var x_rows = rounded_rows(x, rows, n_in)
    var workers = num_physical_cores()
    var out_strides = output.strides()
    var w_ptr = weight.unsafe_ptr().bitcast[BFloat16]()
    var x_ptr = x_rows
    var b_ptr = bias.unsafe_ptr()
    var b_stride = bias.strides()[0]
    var out_ptr = output.unsafe_ptr()
    var dot_end = n_in - n_in % PAIRS

    @always_inline
    def tail(w_row: type_of(w_ptr), x_row: type_of(x_ptr)) {var} -> Float32:
        var total = Float32(0)
        for k in range(dot_end, n_in):
            total += w_row[k].cast[DType.float32]() * x_row[k].cast[DType.float32]()
        return total

    @always_inline
    def store(m: Int, n: Int, total: Float32) {var}:
        out_ptr[m * out_strides[0] + n * out_strides[1]] = total + b_ptr[n * b_stride]

    @always_inline
    def add(m: Int, n: Int, total: Float32) {var}:
        out_ptr[m * out_strides[0] + n * out_strides[1]] += total

    def rows_between(first: Int, last: Int) {var}:
        var tiled_rows = rows - rows % BF16_TILE if rows >= BF16_TILES_FROM else 0
        var n = first
        if tiled_rows > 0:
            n = first + (last - first) // BF16_TILE * BF16_TILE
            # A slice of k and a block of x's rows at a time, all claimed
            # weight rows against them: the tile's weight rows stay in the L1
            # cache while x's rows go by, x's block in the L2 cache while the
            # weight rows go by. The first slice stores (with the tail past
            # the last pair, and so even where k has no pair), the others add.
            for k_block in range(max(ceildiv(dot_end, BF16_K_BLOCK), 1)):
                var k_first = k_block * BF16_K_BLOCK
                var k_last = min(k_first + BF16_K_BLOCK, dot_end)
                for m_first in range(0, tiled_rows, BF16_M_BLOCK):
                    var m_last = min(m_first + BF16_M_BLOCK, tiled_rows)
                    for n_group in range(first, n, BF16_TILE):
                        for m in range(m_first, m_last, BF16_TILE):
                            var totals = tile_dots(
                                w_ptr + n_group * n_in,
                                x_ptr + m * n_in,
                                n_in,
                                k_first,
                                k_last,
                                prefetch_next=m == m_first,
                            )
                            comptime for i in range(BF16_TILE):
                                comptime for j in range(BF16_TILE):
                                    var total = totals[i * BF16_TILE + j]
                                    var w_row = w_ptr + (n_group + j) * n_in
                                    var x_row = x_ptr + (m + i) * n_in
                                    if k_block == 0:
                                        store(m + i, n_group + j, total + tail(w_row, x_row))
                                    else:
                                        add(m + i, n_group + j, total)
        # The rows of x the tiles left (all of them below BF16_TILES_FROM)
        # against the weight rows one at a time, in memory order; one row of
        # x (a decoded token) first takes them in streams side by side.
        var streamed = first
        if rows == 1:
            streamed = dot_rows_streamed[True](
                w_ptr, first, last, n_in, x_ptr, out_ptr, out_strides[1]
            )
            for n_row in range(first, streamed):
                out_ptr[n_row * out_strides[1]] += b_ptr[n_row * b_stride]
        for n_row in range(streamed, last):
            var w_row = w_ptr + n_row * n_in
            var m_first = tiled_rows if n_row < n else 0
            for m in range(m_first, rows):
                store(m, n_row, dot_bf16(w_row, x_ptr + m * n_in, n_in))

    # The rows claimed as in decode_blocks, in whole tiles (a claim counts
    # groups of BF16_TILE rows), so that a tile never straddles two claims.
    var claims = new_counters(1)
    var groups = ceildiv(n_out, BF16_TILE)
    var smallest = ceildiv(smallest_claim(weight), BF16_TILE)

    def worker(index: Int) {var}:
        var span = claim(claims, 0, groups, smallest, workers, STREAMS // BF16_TILE)
        while span[0] < span[1]:
            rows_between(span[0] * BF16_TILE, min(span[1] * BF16_TILE, n_out))
            span = claim(claims, 0, groups, smallest, workers, STREAMS // BF16_TILE)

    parallelize(worker, workers)
    claims.free()
    x_rows.free()
