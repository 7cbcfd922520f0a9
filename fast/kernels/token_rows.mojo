"""A decoded token's x times rows of ggml's blocks, multiplied as integers;
and plain float32 or bfloat16 rows, as GPT-2's are read.

Decoding reads every weight once, so its time should be the blocks' bytes
over the memory's rate. Widening each 4-bit level to a float32 lane before
its multiply-add costs the core more time than the level costs the memory:
on an AVX2 core a Q4 product ran at a third of the read rate, as fast as
Q8_0's, which reads nearly twice the bytes. So x is rounded once per
product into blocks of its own, 32 int16 levels q_x and a float32 scale
d_x = max|x| / 32767, and a block's 32 products are made of integers:
pmaddwd multiplies 16 pairs of 16-bit numbers and adds each pair (8 sums
of 32 bits), two of them take a block, and one conversion and one
multiply-add by d_w * d_x take the sums into the row's float32 sums.

- A Q4 row read alone (after a matrix's last whole group, below) widens
  a block's 16 bytes to 16-bit lanes in one instruction; a lane's low
  nibble is weight j, its high one weight j + 16 (an and, a shift).
  What each weight has added, Q4_0's -8 d and Q4_1's m, multiplies the
  block's sum of x, d_x sum(q_x), made once per block of x: the rows read
  side by side take it in one multiply-add, a lane a row.
- A Q8_0 block's 32 values widen to 16 bits in two instructions.

A 4-bit matrix is held grouped (fast/llama_files.py's `grouped_blocks`):
its rows in groups of GROUP, and a group's blocks at one position side by
side, their GROUP scales d first (then Q4_1's m's), then each row's 16
bytes of levels. A group's scales are one load, where rows read apart took
a gather of 8 float16s each (a fifth of the loop's instructions), and one
pointer walks the group's bytes in order. The rows after the last whole
group are as the file stores them.

A group's levels are not widened byte by byte (a shuffle, vpmovzxbw, for
each row's 16 bytes), nor its rows' sums added across each block (six
vphaddd): they are read as 16-bit words, PER rows a register (4 in
AVX-512's, 2 in AVX2's). Word i of a row
holds bytes 2i and 2i + 1, so its four nibbles are weights 2i, 2i + 16,
2i + 1 and 2i + 17, and shifts and ands alone take them out: four registers
of levels, each against a copy of x's levels in the same order (the
spread run, made once per product by prepare_x, PER copies side by side). pmaddwd's
sums stay per row (4 lanes a row) through the block's four products, are
converted and multiplied by each row's d * d_x, and are added across lanes
only once a group, after its last block. One core of the Zen 4 read Q4_1
from its L2 cache at 34-37 GB/s this way, and at 24 GB/s when each block
widened its bytes and added its rows across.

llama.cpp rounds x to 8 bits (pmaddubsw multiplies bytes): the same count
of instructions a block, but on SmolLM2 that moved the logits by up to 5%
of the largest (a token's first two candidates were 0.4% apart) and turned
its greedy answers away from the float32 model's. 16-bit levels keep x
within 1/65534 of its block's largest number. Where the CPU lacks AVX2 the
same sums are made with plain integer vectors.
"""

from std.memory import stack_allocation
from std.sys.info import CompilationTarget
from std.sys.intrinsics import PrefetchOptions, llvm_intrinsic, prefetch
from std.sys._assembly import inlined_assembly
from .blocks import BF16, BLOCK, F32, HALF, Q4_0, Q4_1, Q8_0, block_bytes, block_scales, half_float, levels_at
from .cpu import STREAMS
from .dots import dot_widening_streams

comptime HAS_AVX2 = CompilationTarget._has_feature["avx2"]()
comptime HAS_AVX512BW = CompilationTarget._has_feature["avx512bw"]()
comptime LANES = 8  # the int32 sums of a block's products (a 256-bit register)
comptime GROUP = LANES  # a 4-bit matrix's rows whose blocks lie side by side
comptime WORDS = SIMD[DType.int16, HALF]  # 16 levels: half a block
comptime X_TOP = 32767  # x's largest level
# The bytes this far on are asked into the L2 cache as each block is
# multiplied, every line of them (a 4-bit group's 144 or 160 bytes are three
# lines): with the hardware's prefetchers alone, a Q4_1 matrix far larger than
# the L3 cache (Llama-3.2-1B's) was read at 0.62x a plain read of the same
# bytes on the Zen 4, and its tokens came 1.35x (4 KB on) to 1.75x (8 KB on)
# as fast with these; SmolLM2-135M's, partly in the L3, within 4% either way.
comptime READ_AHEAD = 8192
comptime AHEAD_OPTIONS = PrefetchOptions().for_read().medium_locality()
# A group's rows read in one register as 16-bit words (ROW_WORDS a row),
# and the register's words (SPREAD).
comptime PER = 4 if HAS_AVX512BW else 2
comptime ROW_WORDS = HALF // 2
comptime SPREAD = PER * ROW_WORDS
comptime SPREAD_WORDS = SIMD[DType.int16, SPREAD]
comptime SPREAD_BLOCK = 4 * SPREAD  # the spread run's words a block: four runs of a row's nibbles
# x as the products read it, in four runs: each block's scale d_x; its sum
# d_x sum(q_x); its 32 levels q_x (16 float32s' bytes); the same levels in
# a group's order, PER copies (the spread run, spread_x's).
comptime X_LEVELS_FLOATS = 2 + HALF  # the first three runs' floats a block
comptime X_BLOCK_FLOATS = X_LEVELS_FLOATS + SPREAD_BLOCK // 2
comptime LINE_FLOATS = 16  # a 64-byte cache line's: the spread run begins on one


@always_inline
def spread_at(area: Int, blocks: Int) -> Int:
    """How many floats after `area` (an address) the spread run begins: after
    the first three runs, on a cache line, so that no load of it is split."""
    var start = area + 4 * X_LEVELS_FLOATS * blocks
    return (start + 4 * LINE_FLOATS - 1) // (4 * LINE_FLOATS) * (4 * LINE_FLOATS) // 4 - area // 4


def x_floats(blocks: Int, spread: Bool = True) -> Int:
    """The float32s that x's `blocks` blocks take, rounded for the products;
    without the spread run, a prompt's row for the integer panels."""
    if not spread:
        return blocks * X_LEVELS_FLOATS
    return blocks * X_BLOCK_FLOATS + LINE_FLOATS


@always_inline
def word_products(a: WORDS, b: WORDS) -> SIMD[DType.int32, LANES]:
    """a[i] * b[i] added into LANES sums (pmaddwd: lane j holds i = 2j, 2j + 1)."""
    comptime if HAS_AVX2:
        return llvm_intrinsic["llvm.x86.avx2.pmadd.wd", SIMD[DType.int32, LANES]](a, b)
    else:
        return (a.cast[DType.int32]() * b.cast[DType.int32]()).reduce_add[LANES]()


@always_inline
def widened_bytes(bytes: SIMD[DType.uint8, HALF]) -> WORDS:
    """16 bytes as 16-bit lanes (vpmovzxbw), in a form the compiler keeps.

    Written as a cast, the compiler moves a Q4 block's and and shift before
    the widening, onto the bytes: x86 has no byte shift, so it shifts 16-bit
    lanes and masks again, and widens the low and the high nibbles apart;
    five vector instructions a block where one widening, an and and a shift
    do (a 4-bit product took 12-15% longer, on the Zen 3)."""
    comptime if HAS_AVX2:
        return inlined_assembly["vpmovzxbw $1, $0", WORDS, constraints="=x,x", has_side_effect=False](bytes)
    else:
        return bytes.cast[DType.int16]()


def grouped_rows(rows: Int) -> Int:
    """How many of a 4-bit matrix's rows are held in groups: all but the last rows % GROUP."""
    return rows // GROUP * GROUP


def is_grouped[kind: Int]() -> Bool:
    return kind == Q4_0 or kind == Q4_1


@always_inline
def group_levels_at[kind: Int]() -> Int:
    """Where a group's block holds its rows' levels: after their scales."""
    return GROUP * levels_at[kind]()


@always_inline
def group_scales[
    kind: Int, rows: Int
](at: UnsafePointer[UInt8, _], first: Int = 0) -> Tuple[SIMD[DType.float32, rows], SIMD[DType.float32, rows]]:
    """The scales d and what each weight has added m (Q4_1's; 0 for Q4_0) of
    a group's rows first to first + rows - 1, in its block at `at`: the
    GROUP d's come first, then Q4_1's GROUP m's."""
    var d = (at + 2 * first).bitcast[Float16]().load[width=rows]().cast[DType.float32]()
    comptime if kind == Q4_1:
        return (d, (at + 2 * (GROUP + first)).bitcast[Float16]().load[width=rows]().cast[DType.float32]())
    else:
        return (d, SIMD[DType.float32, rows](0))


@always_inline
def row_block[
    kind: Int
](w: UnsafePointer[UInt8, _], n: Int, rows: Int, blocks: Int, b: Int) -> Tuple[Int, Float32, Float32]:
    """Where row n's block b keeps its levels in a [rows, blocks] matrix of
    blocks (bytes from w), its d and its m (Q4_1's; 0 for the others): a
    4-bit matrix's rows grouped as grouped_blocks holds them, others as stored."""
    comptime size = block_bytes[kind]()
    comptime if is_grouped[kind]():
        if n < grouped_rows(rows):
            var s = n % GROUP
            var at = (n - s) * blocks * size + b * GROUP * size
            var scales = group_scales[kind, 1](w + at, s)
            return (at + group_levels_at[kind]() + s * HALF, scales[0][0], scales[1][0])
    var at = (n * blocks + b) * size
    var scales = block_scales[kind](w + at)
    return (at + levels_at[kind](), scales[0], scales[1])


def prepare_x[
    kind: Int
](x: UnsafePointer[Float32, _], blocks: Int, area: UnsafePointer[mut=True, Float32, _], spread: Bool = True):
    """x's blocks rounded to 16-bit levels into `area` (x_floats(blocks,
    spread) of them), as dot_rows_blocks and dot_group_blocks read them for
    `kind`'s rows (int_panels without the spread run); plain rows read x itself."""
    comptime if kind == F32 or kind == BF16:
        return
    var levels = (area + 2 * blocks).bitcast[Int16]()
    for b in range(blocks):
        var values = (x + b * BLOCK).load[width=BLOCK]()
        var top = abs(values).reduce_max()
        var inverse = Float32(X_TOP) / top if top > 0 else Float32(0)
        var q = round(values * inverse).cast[DType.int16]()
        (levels + b * BLOCK).store(q)
        var d_x = top / X_TOP
        area[b] = d_x
        area[blocks + b] = d_x * Float32(q.cast[DType.int32]().reduce_add())
        comptime if is_grouped[kind]():
            if spread:
                spread_x(q, (area + spread_at(Int(area), blocks)).bitcast[Int16]() + b * SPREAD_BLOCK)


@always_inline
def spread_x(q: SIMD[DType.int16, BLOCK], dest: UnsafePointer[mut=True, Int16, _]):
    """A block of x's levels as the four runs of a row's nibbles take them
    (weights 2i, 2i + 16, 2i + 1, 2i + 17 for i < 8), each run PER times."""
    var runs = (
        q.slice[HALF]().deinterleave()[0],
        q.slice[HALF, offset=HALF]().deinterleave()[0],
        q.slice[HALF]().deinterleave()[1],
        q.slice[HALF, offset=HALF]().deinterleave()[1],
    )
    comptime for r in range(4):
        comptime for copy in range(PER):
            (dest + r * SPREAD + copy * ROW_WORDS).store(runs[r])


@always_inline
def block_levels[kind: Int](levels: UnsafePointer[UInt8, _]) -> Tuple[WORDS, WORDS]:
    """A block's levels of weights 0-15 and 16-31, as 16-bit numbers (Q4's
    as stored, 0 to 15), from where its levels begin."""
    comptime if kind == Q8_0:
        var values = levels.bitcast[Int8]()
        return (values.load[width=HALF]().cast[DType.int16](), (values + HALF).load[width=HALF]().cast[DType.int16]())
    else:
        var packed = widened_bytes(levels.load[width=HALF]())
        return (packed & 15, packed >> 4)


@always_inline
def block_products[
    kind: Int
](block: UnsafePointer[UInt8, _], x_low: WORDS, x_high: WORDS) -> SIMD[DType.int32, LANES]:
    """The block's levels times x's (weights 0-15 and 16-31), in LANES sums."""
    var levels = block_levels[kind](block + levels_at[kind]())
    return word_products(levels[0], x_low) + word_products(levels[1], x_high)


@always_inline
def dot_rows_blocks[
    kind: Int, streams: Int
](
    first_row: UnsafePointer[UInt8, _],
    stride: Int,
    blocks: Int,
    x: UnsafePointer[Float32, _],
    x_area: UnsafePointer[Float32, _],
) -> SIMD[DType.float32, streams]:
    """The rows first_row + s * stride (s < streams) times x, at once:
    `streams` reads in flight, x's blocks (prepare_x's, in x_area) from the L1 cache."""
    comptime size = block_bytes[kind]()
    comptime if kind == F32 or kind == BF16:  # plain rows: GPT-2's dot, widening in registers
        comptime wtype = DType.float32 if kind == F32 else DType.bfloat16
        var rows = first_row.bitcast[Scalar[wtype]]()
        return dot_widening_streams[streams](rows, stride * BLOCK // size, x, blocks * BLOCK)
    # One register of sums a row, the row's scale read from its block into
    # every lane (Q8_0's rows, and a 4-bit matrix's rows after its last
    # whole group; its groups are dot_group_blocks').
    var x_sums = x_area + blocks
    var levels = (x_area + 2 * blocks).bitcast[Int16]()
    var sums = stack_allocation[streams, SIMD[DType.float32, LANES]]()
    comptime for s in range(streams):
        sums[s] = 0
    var offsets = SIMD[DType.float32, streams](0)
    for b in range(blocks):
        var x_low = (levels + b * BLOCK).load[width=HALF]()
        var x_high = (levels + b * BLOCK + HALF).load[width=HALF]()
        var d_x = SIMD[DType.float32, LANES](x_area[b])
        comptime for s in range(streams):
            var block = first_row + s * stride + b * size
            prefetch[AHEAD_OPTIONS](block + READ_AHEAD)
            var products = block_products[kind](block, x_low, x_high).cast[DType.float32]()
            sums[s] += products * (half_float[LANES](block) * d_x)
            # What each weight has added (Q4_1's m, Q4_0's -8 d) times x's sum.
            comptime if kind == Q4_1:
                offsets[s] += block_scales[kind](block)[1] * x_sums[b]
            elif kind == Q4_0:
                offsets[s] -= 8 * half_float(block) * x_sums[b]
    var totals = offsets
    comptime for s in range(streams):
        totals[s] += sums[s].reduce_add()
    return totals


@always_inline
def spread_products(a: SPREAD_WORDS, b: SPREAD_WORDS) -> SIMD[DType.int32, SPREAD // 2]:
    """a[i] * b[i] added in pairs (pmaddwd: lane j holds i = 2j, 2j + 1)."""
    comptime if HAS_AVX512BW and SPREAD == 32:
        return llvm_intrinsic["llvm.x86.avx512.pmaddw.d.512", SIMD[DType.int32, SPREAD // 2]](a, b)
    elif HAS_AVX2 and SPREAD == 16:
        return llvm_intrinsic["llvm.x86.avx2.pmadd.wd", SIMD[DType.int32, SPREAD // 2]](a, b)
    else:
        return (a.cast[DType.int32]() * b.cast[DType.int32]()).reduce_add[SPREAD // 2]()


@always_inline
def rows_scales[j: Int](scales: SIMD[DType.float32, GROUP]) -> SIMD[DType.float32, SPREAD // 2]:
    """Register j's rows' scales, each row's in its 4 lanes of sums."""
    var spread = SIMD[DType.float32, SPREAD // 2]()
    comptime for lane in range(SPREAD // 2):
        spread[lane] = scales[PER * j + lane // 4]
    return spread


@always_inline
def dot_group_blocks[
    kind: Int
](group: UnsafePointer[UInt8, _], blocks: Int, x_area: UnsafePointer[Float32, _]) -> SIMD[DType.float32, GROUP]:
    """A group's GROUP rows of 4-bit blocks, held grouped, times x (prepare_x's
    blocks in x_area), a lane a row."""
    comptime size = GROUP * block_bytes[kind]()
    comptime registers = GROUP // PER
    var x_sums = x_area + blocks
    var spread = (x_area + spread_at(Int(x_area), blocks)).bitcast[Int16]()
    # Each row's sums in 4 lanes of a register; added across after the last block.
    var sums = stack_allocation[registers, SIMD[DType.float32, SPREAD // 2]]()
    comptime for j in range(registers):
        sums[j] = 0
    var offsets = SIMD[DType.float32, GROUP](0)
    for b in range(blocks):
        var at = group + b * size
        comptime for line in range((size + 63) // 64):
            prefetch[AHEAD_OPTIONS](at + READ_AHEAD + 64 * line)
        var levels = (at + group_levels_at[kind]()).bitcast[UInt16]()
        var x = spread + b * SPREAD_BLOCK
        var x_runs = (
            x.load[width=SPREAD](),
            (x + SPREAD).load[width=SPREAD](),
            (x + 2 * SPREAD).load[width=SPREAD](),
            (x + 3 * SPREAD).load[width=SPREAD](),
        )
        var scales = group_scales[kind, GROUP](at)
        var d = scales[0] * x_area[b]
        comptime for j in range(registers):
            var words = (levels + j * SPREAD).load[width=SPREAD]()
            var products = spread_products((words & 15).cast[DType.int16](), x_runs[0])
            products += spread_products(((words >> 4) & 15).cast[DType.int16](), x_runs[1])
            products += spread_products(((words >> 8) & 15).cast[DType.int16](), x_runs[2])
            products += spread_products((words >> 12).cast[DType.int16](), x_runs[3])
            sums[j] += products.cast[DType.float32]() * rows_scales[j](d)
        # What each weight has added (Q4_1's m, Q4_0's -8 d) times x's sum.
        comptime if kind == Q4_1:
            offsets += scales[1] * x_sums[b]
        else:
            offsets += scales[0] * (-8 * x_sums[b])
    # The rows' 4 lanes each, in order, added: neighbours twice.
    var lanes: SIMD[DType.float32, 4 * GROUP]
    comptime if registers == 2:
        lanes = rebind[SIMD[DType.float32, 4 * GROUP]](sums[0].join(sums[1]))
    else:
        lanes = rebind[SIMD[DType.float32, 4 * GROUP]](sums[0].join(sums[1]).join(sums[2].join(sums[3])))
    var pairs = lanes.deinterleave()
    var halves = (pairs[0] + pairs[1]).deinterleave()
    return offsets + halves[0] + halves[1]


@always_inline
def rows_times[
    kind: Int
](
    w: UnsafePointer[UInt8, _],
    row_bytes: Int,
    first: Int,
    last: Int,
    blocks: Int,
    x: UnsafePointer[Float32, _],
    x_area: UnsafePointer[Float32, _],
    dest: UnsafePointer[mut=True, Float32, _],
    dest_stride: Int,
    add: Bool,
):
    """dest[n * dest_stride] (+)= W[n] . x for the rows [first, last): a
    4-bit matrix's a group at a time, other rows STREAMS parts side by side.
    `first` is a multiple of STREAMS, as claims are, and `last` too but at
    the matrix's end."""
    comptime assert STREAMS % GROUP == 0, "claims of whole groups"
    var n = first
    comptime if is_grouped[kind]():
        while n + GROUP <= last:
            var dots = dot_group_blocks[kind](w + n * row_bytes, blocks, x_area)
            comptime for s in range(GROUP):
                var at = dest + (n + s) * dest_stride
                at[0] = at[0] + dots[s] if add else dots[s]
            n += GROUP
    else:
        var part = (last - first) // STREAMS
        for i in range(part):
            var dots = dot_rows_blocks[kind, STREAMS](w + (first + i) * row_bytes, part * row_bytes, blocks, x, x_area)
            comptime for s in range(STREAMS):
                var at = dest + (first + i + s * part) * dest_stride
                at[0] = at[0] + dots[s] if add else dots[s]
        n = first + STREAMS * part
    for row in range(n, last):  # as the file stores them
        var dot = dot_rows_blocks[kind, 1](w + row * row_bytes, 0, blocks, x, x_area)[0]
        var at = dest + row * dest_stride
        at[0] = at[0] + dot if add else dot
