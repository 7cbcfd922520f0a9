"""A decoded token's x times rows of ggml's blocks, multiplied as bytes; and
plain float32 or bfloat16 rows, as GPT-2's are read.

Decoding reads every weight once, so its time should be the blocks' bytes
over the memory's rate. Widening each 4-bit level to a float32 lane before
its multiply-add costs the core more time than the level costs the memory:
on an AVX2 core a Q4 product ran at a third of the read rate, as fast as
Q8_0's, which reads nearly twice the bytes. So, as llama.cpp does, x is
rounded once per product into 8-bit blocks of its own, 32 int8 levels q_x
and a float32 scale d_x = max|x| / 127 (each number off by at most d_x / 2),
and a block's 32 products are made of bytes, 32 to an instruction:

- pmaddubsw multiplies 32 unsigned bytes by 32 signed ones and adds the
  products in pairs (16 sums of 16 bits; 2 x 15 x 127 fits), pmaddwd adds
  those in pairs (LANES sums of 32 bits), and one conversion and one
  multiply-add by d_w * d_x take them into the row's float32 sums.
- A 4-bit level q is unsigned (0-15). What each weight has added, Q4_0's
  -8 d and Q4_1's m, multiplies the block's sum of x: d_x sum(q_x), made
  once per block of x, and the 8 rows read side by side take it in one
  multiply-add of 8 lanes, a lane a row.
- A Q8_0 value is signed: its magnitude is the unsigned operand and its
  sign moves onto x (psignb).

The price is x's precision: 8 bits a number where float32 has 24 (what a
bfloat16 dot product also gives). Where the CPU lacks AVX2 the same sums
are made with plain integer vectors.
"""

from std.memory import bitcast, stack_allocation
from std.sys.info import CompilationTarget
from std.sys.intrinsics import llvm_intrinsic
from .blocks import BF16, BLOCK, F32, HALF, Q4_0, Q4_1, Q8_0, block_bytes
from .dots import dot_widening_streams

comptime HAS_AVX2 = CompilationTarget._has_feature["avx2"]()
comptime LANES = 8  # the int32 sums of a block's products (a 256-bit register)
comptime BYTES = SIMD[DType.uint8, BLOCK]
comptime LEVELS = SIMD[DType.int8, BLOCK]
# x as the products read it, in three runs: each block's scale d_x; its sum
# d_x sum(q_x); its 32 levels q_x (8 float32s' bytes).
comptime X_BLOCK_FLOATS = 2 + BLOCK // 4


def x_floats(blocks: Int) -> Int:
    """The float32s that x's `blocks` blocks take, rounded for the products."""
    return blocks * X_BLOCK_FLOATS


@always_inline
def byte_products(u: BYTES, s: LEVELS) -> SIMD[DType.int32, LANES]:
    """u[i] * s[i] added into LANES sums (which lanes sum which bytes is the
    instructions' choice; the same u and s always give the same lanes)."""
    comptime if HAS_AVX2:
        var pairs = llvm_intrinsic["llvm.x86.avx2.pmadd.ub.sw", SIMD[DType.int16, 2 * LANES]](u, s)
        return llvm_intrinsic["llvm.x86.avx2.pmadd.wd", SIMD[DType.int32, LANES]](
            pairs, SIMD[DType.int16, 2 * LANES](1)
        )
    else:
        return (u.cast[DType.int32]() * s.cast[DType.int32]()).reduce_add[LANES]()


@always_inline
def signed_products(w: LEVELS, s: LEVELS) -> SIMD[DType.int32, LANES]:
    """w[i] * s[i] added into LANES sums, both signed: |w| times s with w's sign."""
    comptime if HAS_AVX2:
        var magnitudes = llvm_intrinsic["llvm.x86.avx2.psign.b", LEVELS](w, w)
        var signed = llvm_intrinsic["llvm.x86.avx2.psign.b", LEVELS](s, w)
        return byte_products(magnitudes.cast[DType.uint8](), signed)
    else:
        return (w.cast[DType.int32]() * s.cast[DType.int32]()).reduce_add[LANES]()


def prepare_x[
    kind: Int
](x: UnsafePointer[Float32, _], blocks: Int, area: UnsafePointer[mut=True, Float32, _]):
    """x's blocks rounded to 8 bits into `area` (x_floats(blocks) of them), as
    dot_rows_blocks reads them for `kind`'s rows; plain rows read x itself."""
    comptime if kind == F32 or kind == BF16:
        return
    var levels = (area + 2 * blocks).bitcast[Int8]()
    for b in range(blocks):
        var values = (x + b * BLOCK).load[width=BLOCK]()
        var top = abs(values).reduce_max()
        var inverse = Float32(127) / top if top > 0 else Float32(0)
        var q = round(values * inverse).cast[DType.int8]()
        (levels + b * BLOCK).store(q)
        var d_x = top / 127
        area[b] = d_x
        area[blocks + b] = d_x * Float32(q.cast[DType.int32]().reduce_add())


@always_inline
def nibbles[kind: Int](block: UnsafePointer[UInt8, _]) -> BYTES:
    """A Q4 block's 32 levels in weight order: the 16 bytes' low nibbles, then their high ones."""
    var packed = (block + block_bytes[kind]() - HALF).load[width=HALF]()
    return packed.join(packed >> 4) & 15


@always_inline
def block_times_x[kind: Int](block: UnsafePointer[UInt8, _], q_x: LEVELS, scale: Float32) -> SIMD[DType.float32, LANES]:
    """scale (d_w d_x) times the block's levels times x's levels, in LANES
    sums (Q4's offset apart: dot_rows_blocks adds it)."""
    comptime if kind == Q8_0:
        var values = (block + 2).bitcast[Int8]().load[width=BLOCK]()
        return scale * signed_products(values, q_x).cast[DType.float32]()
    else:
        return scale * byte_products(nibbles[kind](block), q_x).cast[DType.float32]()


@always_inline
def row_scales[
    kind: Int, streams: Int
](first_block: UnsafePointer[UInt8, _], stride: Int) -> Tuple[SIMD[DType.float32, streams], SIMD[DType.float32, streams]]:
    """The blocks first_block + s * stride's scales d and what each of their
    weights has added to d q (Q4_0: -8 d, Q4_1: m, Q8_0: 0), a lane a row:
    gathered, then widened in one instruction (Q4_1's d and m as one 4-byte pair)."""
    comptime if kind == Q4_1:
        var pairs = SIMD[DType.uint32, streams]()
        comptime for s in range(streams):
            pairs[s] = (first_block + s * stride).bitcast[UInt32]()[0]
        var both = bitcast[DType.float16, 2 * streams](pairs).cast[DType.float32]().deinterleave()
        return (rebind[SIMD[DType.float32, streams]](both[0]), rebind[SIMD[DType.float32, streams]](both[1]))
    else:
        var halves = SIMD[DType.float16, streams]()
        comptime for s in range(streams):
            halves[s] = (first_block + s * stride).bitcast[Float16]()[0]
        var d = halves.cast[DType.float32]()
        return (d, -8 * d if kind == Q4_0 else SIMD[DType.float32, streams](0))


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
    # One register of sums a row: 8 rows' sums, x's block and the products in
    # flight fit AVX2's 16 registers; and the Q4 rows' offsets, a lane a row.
    var x_sums = x_area + blocks
    var levels = (x_area + 2 * blocks).bitcast[Int8]()
    var sums = stack_allocation[streams, SIMD[DType.float32, LANES]]()
    comptime for s in range(streams):
        sums[s] = 0
    var offsets = SIMD[DType.float32, streams](0)
    for b in range(blocks):
        var q_x = (levels + b * BLOCK).load[width=BLOCK]()
        var scales = row_scales[kind, streams](first_row + b * size, stride)
        var each = scales[0] * x_area[b]
        comptime for s in range(streams):
            sums[s] += block_times_x[kind](first_row + s * stride + b * size, q_x, each[s])
        comptime if kind != Q8_0:
            offsets += scales[1] * x_sums[b]
    var totals = offsets
    comptime for s in range(streams):
        totals[s] += sums[s].reduce_add()
    return totals
