"""A prompt's causal self-attention through AMX's tiles, for bfloat16 models
on a CPU that has them.
"""

from std.atomic import Atomic
from std.math import ceildiv, iota, sqrt
from std.memory import alloc, bitcast, stack_allocation
from std.sys.info import num_physical_cores, size_of
from std.sys._assembly import inlined_assembly
from std.utils import IndexList
from max.algorithm import parallelize
from .cpu import PAIRS, WIDTH
from .claims import new_counters
from .amx_tiles import AMX_ROWS, AMX_ROW_BYTES, configure_tiles, pack_panel, release_tiles
from .dots import at
from .bf16_tiles import rounded_row, rounded_to_bf16


# With bfloat16 weights on a CPU with AMX, the prompt's projections run in
# AMX's tiles, and the float32 attention (prompt_attention.mojo) became the
# prompt's largest cost, well behind PyTorch's in bfloat16. Here its two
# products run in the tiles too. The
# queries (times 1 / sqrt(head_dim)), keys and values are rounded to
# bfloat16 once per head, and a core takes ATTN_QUERIES queries of one head
# at a time:
# - their scores against every key up to the last of them, ATTN_KEYS keys
#   at a time, in tmm0-1 (tmm6 the queries, tmm7 16 keys' pairs of dims,
#   laid out as pack_panel lays out weight rows), stored side by side;
# - each query's softmax over its row of scores, in vectors, its weights
#   rounded to bfloat16: over the whole row at once, so no running maximum
#   rescales the outputs key block by key block;
# - the weights (tmm6) times the values (tmm7, pairs of keys by 16 dims),
#   four tiles of 16 dims at a time in tmm2-5, added up over every key
#   block in the tiles and stored once.
# Not the online softmax of prompt_attention, with the outputs rescaled at
# each key block: a tile's stores are not forwarded to the vector loads that
# follow them, and each block waited for its own.

comptime ATTN_QUERIES = AMX_ROWS  # queries of a block: the rows of a tile
comptime ATTN_KEYS = 2 * AMX_ROWS  # keys at a time: two tiles of scores, one of weights
comptime ATTN_DIMS = AMX_ROWS  # output dims of one tile of sums
comptime ATTN_GROUPS = 4  # tiles of output sums at once: tmm2-5
comptime TILE_ELEMENTS = AMX_ROWS * AMX_ROW_BYTES // 2  # bfloat16 values in a tile


@always_inline
def scores_tiles(
    queries: UnsafePointer[BFloat16, _],
    queries_stride: Int,
    keys: UnsafePointer[BFloat16, _],
    next_keys: Int,
    slices: Int,
    scores: UnsafePointer[mut=True, Float32, _],
    scores_stride: Int,
):
    """The scores of 16 queries (rows queries_stride bytes apart) against
    32 keys: two tiles of 16 keys' pairs of dims, at `keys` and next_keys
    values after it, `slices` slices of 32 dims (16 tile rows each); stored
    to `scores`, scores_stride bytes a row."""
    inlined_assembly["tilezero %tmm0; tilezero %tmm1", NoneType, constraints="~{memory}"]()
    for s in range(slices):
        var slice_keys = keys + s * TILE_ELEMENTS
        inlined_assembly[
            "tileloadd ($0,$1,1), %tmm6; tileloadd ($2,$4,1), %tmm7;"
            " tdpbf16ps %tmm7, %tmm6, %tmm0; tileloadd ($3,$4,1), %tmm7;"
            " tdpbf16ps %tmm7, %tmm6, %tmm1",
            NoneType,
            constraints="r,r,r,r,r,~{memory}",
        ](
            Int(queries + s * PAIRS),
            queries_stride,
            Int(slice_keys),
            Int(slice_keys + next_keys),
            AMX_ROW_BYTES,
        )
    inlined_assembly[
        "tilestored %tmm0, ($0,$1,1); tilestored %tmm1, 64($0,$1,1)",
        NoneType,
        constraints="r,r,~{memory}",
    ](Int(scores), scores_stride)


@always_inline
def sums_zero():
    inlined_assembly[
        "tilezero %tmm2; tilezero %tmm3; tilezero %tmm4; tilezero %tmm5",
        NoneType,
        constraints="~{memory}",
    ]()


@always_inline
def sums_add_four(
    weights: UnsafePointer[BFloat16, _], weights_stride: Int, values: UnsafePointer[BFloat16, _]
):
    """tmm2-5 += 16 queries' weights for 32 keys (rows weights_stride bytes
    apart) times four tiles of values (32 keys by 16 dims each, 1024 bytes
    apart)."""
    comptime assert TILE_ELEMENTS * size_of[BFloat16]() == 1024
    inlined_assembly[
        "tileloadd ($0,$1,1), %tmm6;"
        " tileloadd ($2,$3,1), %tmm7; tdpbf16ps %tmm7, %tmm6, %tmm2;"
        " tileloadd 1024($2,$3,1), %tmm7; tdpbf16ps %tmm7, %tmm6, %tmm3;"
        " tileloadd 2048($2,$3,1), %tmm7; tdpbf16ps %tmm7, %tmm6, %tmm4;"
        " tileloadd 3072($2,$3,1), %tmm7; tdpbf16ps %tmm7, %tmm6, %tmm5",
        NoneType,
        constraints="r,r,r,r,~{memory}",
    ](Int(weights), weights_stride, Int(values), AMX_ROW_BYTES)


@always_inline
def sums_add_one(
    weights: UnsafePointer[BFloat16, _], weights_stride: Int, values: UnsafePointer[BFloat16, _]
):
    """sums_add_four for one tile of values, into tmm2."""
    inlined_assembly[
        "tileloadd ($0,$1,1), %tmm6; tileloadd ($2,$3,1), %tmm7;"
        " tdpbf16ps %tmm7, %tmm6, %tmm2",
        NoneType,
        constraints="r,r,r,r,~{memory}",
    ](Int(weights), weights_stride, Int(values), AMX_ROW_BYTES)


@always_inline
def sums_store(sums: UnsafePointer[mut=True, Float32, _], sums_stride: Int, tiles: Int):
    """tmm2 .. tmm2 + tiles - 1 (1 or 4) to sums, 16 floats apart,
    sums_stride bytes a row."""
    if tiles == ATTN_GROUPS:
        inlined_assembly[
            "tilestored %tmm2, ($0,$1,1); tilestored %tmm3, 64($0,$1,1);"
            " tilestored %tmm4, 128($0,$1,1); tilestored %tmm5, 192($0,$1,1)",
            NoneType,
            constraints="r,r,~{memory}",
        ](Int(sums), sums_stride)
    else:
        inlined_assembly[
            "tilestored %tmm2, ($0,$1,1)", NoneType, constraints="r,r,~{memory}"
        ](Int(sums), sums_stride)


def pack_values(
    values: UnsafePointer[BFloat16, _],
    padded_seq: Int,
    padded_dim: Int,
    tiles: UnsafePointer[mut=True, BFloat16, _],
):
    """values [padded_seq, padded_dim] into `tiles` as tdpbf16ps takes its second operand
    for the weights times the values: for each ATTN_KEYS keys, a tile per
    ATTN_DIMS dims whose row r holds keys 2r and 2r + 1 of each dim in turn."""
    var groups = padded_dim // ATTN_DIMS
    for key in range(0, padded_seq, ATTN_KEYS):
        var block = tiles + key * padded_dim
        for g in range(groups):
            comptime for r in range(AMX_ROWS):
                var even = values + (key + 2 * r) * padded_dim + g * ATTN_DIMS
                var pair = even.load[width=ATTN_DIMS]().interleave(
                    (even + padded_dim).load[width=ATTN_DIMS]()
                )
                (block + g * TILE_ELEMENTS + r * PAIRS).store(pair)


def prompt_attention_amx(
    dest: UnsafePointer[mut=True, Float32, _],
    dest_strides: IndexList[2],
    qkv: UnsafePointer[Float32, _],
    qkv_strides: IndexList[2],
    sizes: IndexList[4],
):
    """prompt_attention through AMX's tiles, on a CPU that has them and
    AVX512_BF16: the queries, keys, values and the softmax's weights in
    bfloat16, the scores and sums in float32."""
    var batch, seq, heads, head_dim = sizes[0], sizes[1], sizes[2], sizes[3]
    var embed = heads * head_dim
    var padded_seq = ceildiv(seq, ATTN_KEYS) * ATTN_KEYS
    var padded_dim = ceildiv(head_dim, PAIRS) * PAIRS
    var pairs = batch * heads  # a (batch, head) pair: one sequence of one head
    var per_pair = padded_seq * padded_dim  # one pair's queries, keys or values
    var queries = alloc[BFloat16](pairs * per_pair)
    var key_tiles = alloc[BFloat16](pairs * per_pair)
    var value_tiles = alloc[BFloat16](pairs * per_pair)
    var scale = Float32(1.0) / sqrt(Float32(head_dim))
    var workers = num_physical_cores()

    def lay_out(index: Int) {var}:
        # A block of ATTN_KEYS positions at a time, each position's row of
        # qkv read once from start to end: the queries go to their heads'
        # rows, the keys and values to `staged` ([part][head][key][dim]),
        # then into the tiles' layouts. Head by head instead (a head's 64
        # values of every position, 9 KB apart in float32 at GPT-2's width)
        # the reads leave no stream for the prefetchers to follow, and the
        # layout took a good part of the kernel's time.
        var staged = alloc[BFloat16](2 * heads * ATTN_KEYS * padded_dim)
        var seq_blocks = padded_seq // ATTN_KEYS
        for unit in range(index, batch * seq_blocks, workers):
            var sequence, first = unit // seq_blocks, (unit % seq_blocks) * ATTN_KEYS
            for key in range(ATTN_KEYS):
                var position = first + key
                var row = qkv + sequence * qkv_strides[0] + position * qkv_strides[1]
                var present = head_dim if position < seq else 0  # zeros past the prompt
                for head in range(heads):
                    var pair = sequence * heads + head
                    var query_row = queries + pair * per_pair + position * padded_dim
                    rounded_row(row + head * head_dim, 1, present, scale, query_row, padded_dim)
                    comptime for part in range(2):
                        var out = staged + ((part * heads + head) * ATTN_KEYS + key) * padded_dim
                        var source = row + (part + 1) * embed + head * head_dim
                        rounded_row(source, 1, present, 1, out, padded_dim)
            for head in range(heads):
                var at = (sequence * heads + head) * per_pair + first * padded_dim
                # The keys as pack_panel lays out weight rows: 16 keys' pairs of dims.
                var keys = staged + head * ATTN_KEYS * padded_dim
                for key in range(0, ATTN_KEYS, AMX_ROWS):
                    var tiles = key_tiles + at + key * padded_dim
                    pack_panel(keys, ATTN_KEYS, padded_dim, key, padded_dim // 2, tiles)
                var values = staged + (heads + head) * ATTN_KEYS * padded_dim
                pack_values(values, ATTN_KEYS, padded_dim, value_tiles + at)
        staged.free()

    parallelize(lay_out, workers)
    var blocks = ceildiv(seq, ATTN_QUERIES)
    var claims = new_counters(1)

    def attend(index: Int) {var}:
        configure_tiles()
        # A block's scores (then its outputs) and its weights.
        var sums = alloc[Float32](ATTN_QUERIES * max(padded_seq, padded_dim))
        var weights = alloc[BFloat16](ATTN_QUERIES * padded_seq)
        while True:
            var unit = Int(Atomic[Int64].fetch_add(claims, 1))
            if unit >= pairs * blocks:
                break
            # The blocks of the last queries first, as prompt_attention's.
            var block = blocks - 1 - unit // pairs
            var pair = unit % pairs
            var at = pair * per_pair
            attend_block_amx(
                dest + (pair // heads) * dest_strides[0] + (pair % heads) * head_dim,
                dest_strides[1],
                queries + at,
                key_tiles + at,
                value_tiles + at,
                sums,
                weights,
                IndexList[3](block * ATTN_QUERIES, seq, head_dim),
            )
        weights.free()
        sums.free()
        release_tiles()

    parallelize(attend, workers)
    claims.free()
    value_tiles.free()
    key_tiles.free()
    queries.free()


def attend_block_amx(
    dest: UnsafePointer[mut=True, Float32, _],
    dest_stride: Int,
    queries: UnsafePointer[BFloat16, _],
    key_tiles: UnsafePointer[BFloat16, _],
    value_tiles: UnsafePointer[BFloat16, _],
    sums: UnsafePointer[mut=True, Float32, _],
    weights: UnsafePointer[mut=True, BFloat16, _],
    sizes: IndexList[3],
):
    """The queries first .. first + 16 (fewer at the end) of one head against
    the keys up to each, through the tiles: sizes [first, seq, head_dim];
    queries, key_tiles and value_tiles as prompt_attention_amx lays them
    out; sums (16 rows of the padded prompt's floats) and weights (as many
    bfloat16) the block's room to work in."""
    var first, seq, head_dim = sizes[0], sizes[1], sizes[2]
    var padded_dim = ceildiv(head_dim, PAIRS) * PAIRS
    var rows = min(ATTN_QUERIES, seq - first)
    # The keys any of the block's queries sees, in whole tiles.
    var keys = ceildiv(first + rows, ATTN_KEYS) * ATTN_KEYS
    var scores = sums  # [16, keys], then the outputs [16, padded_dim]
    var query_rows = queries + first * padded_dim
    for key in range(0, keys, ATTN_KEYS):
        scores_tiles(
            query_rows,
            padded_dim * size_of[BFloat16](),
            key_tiles + key * padded_dim,
            AMX_ROWS * padded_dim,
            padded_dim // PAIRS,
            scores + key,
            keys * size_of[Float32](),
        )
    var inverse_sums = stack_allocation[ATTN_QUERIES, Float32]()
    for r in range(ATTN_QUERIES):
        # A block's missing queries (past seq) repeat its last one.
        var position = first + min(r, rows - 1)
        inverse_sums[r] = softmax_row(
            scores + r * keys, weights + r * keys, position + 1, keys
        )
    var groups = padded_dim // ATTN_DIMS
    var outputs = sums
    var g = 0
    while g < groups:
        var tiles = ATTN_GROUPS if g + ATTN_GROUPS <= groups else 1
        sums_zero()
        for key in range(0, keys, ATTN_KEYS):
            var values = value_tiles + key * padded_dim + g * TILE_ELEMENTS
            var weights_stride = keys * size_of[BFloat16]()
            if tiles == ATTN_GROUPS:
                sums_add_four(weights + key, weights_stride, values)
            else:
                sums_add_one(weights + key, weights_stride, values)
        sums_store(outputs + g * ATTN_DIMS, padded_dim * size_of[Float32](), tiles)
        g += tiles
    var whole = head_dim - head_dim % WIDTH
    for r in range(rows):
        var out = dest + (first + r) * dest_stride
        var row = outputs + r * padded_dim
        for d in range(0, whole, WIDTH):
            (out + d).store((row + d).load[width=WIDTH]() * inverse_sums[r])
        for d in range(whole, head_dim):
            out[d] = row[d] * inverse_sums[r]


@always_inline
def exp_for_bf16(x: SIMD[DType.float32, WIDTH]) -> SIMD[DType.float32, WIDTH]:
    """exp(x) for x <= 0, to a few parts in a million: the softmax's
    weights, which are rounded to bfloat16 (3 decimal digits) right after.
    exp(x) = 2^t for t = x log2 e: 2^n for the whole n nearest t, made in the
    float's exponent bits, times 2^f for the rest f (|f| <= 1/2), by
    e^(f ln 2)'s Taylor series to its fifth power. Below 2^-126 (x < -87)
    the weight is taken as 2^-126: nothing beside the maximum's weight of 1."""
    var t = max(x * Float32(1.4426950408889634), Float32(-126))  # log2 e
    var n = round(t)
    var f = (t - n) * Float32(0.6931471805599453)  # ln 2
    var p = f * Float32(1.0 / 120) + Float32(1.0 / 24)  # by Horner's rule
    p = p * f + Float32(1.0 / 6)
    p = p * f + Float32(0.5)
    p = p * f + 1
    p = p * f + 1
    var two_to_n = bitcast[DType.float32, WIDTH]((n.cast[DType.int32]() + 127) << 23)
    return p * two_to_n


@always_inline
def softmax_row(
    scores: UnsafePointer[Float32, _],
    weights: UnsafePointer[mut=True, BFloat16, _],
    visible: Int,
    keys: Int,
) -> Float32:
    """weights[0:keys] = exp(scores - their maximum) for the first `visible`
    scores, rounded to bfloat16, zeros for the rest (keys a multiple of
    WIDTH); returns one over the sum of the rounded weights."""
    var whole = visible - visible % WIDTH  # vectors of visible scores only
    var largest = SIMD[DType.float32, WIDTH](Float32.MIN)
    for k in range(0, whole, WIDTH):
        largest = max(largest, (scores + k).load[width=WIDTH]())
    var row_max = largest.reduce_max()
    for k in range(whole, visible):
        row_max = max(row_max, scores[k])
    var total = SIMD[DType.float32, WIDTH](0)

    @always_inline
    def weigh(k: Int, weight: SIMD[DType.float32, WIDTH]) {var} -> SIMD[DType.float32, WIDTH]:
        """Stores the weights, rounded, at k; returns them as stored."""
        var rounded = rounded_to_bf16(weight)
        (weights + k).store(rounded)
        return rounded.cast[DType.float32]()

    for k in range(0, whole, WIDTH):
        total += weigh(k, exp_for_bf16((scores + k).load[width=WIDTH]() - row_max))
    if whole < visible:  # the vector with the last visible score
        var lanes = iota[DType.int64, WIDTH](Int64(whole))
        var weight = exp_for_bf16((scores + whole).load[width=WIDTH]() - row_max)
        total += weigh(whole, lanes.lt(Int64(visible)).select(weight, 0))
        whole += WIDTH
    for k in range(whole, keys, WIDTH):
        (weights + k).store(SIMD[DType.bfloat16, WIDTH](0))
    return 1 / total.reduce_add()
