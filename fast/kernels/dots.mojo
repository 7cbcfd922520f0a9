"""A weight row times x, the product every kernel is made of: bfloat16 pairs
through vdpbf16ps, or weights widened to float32 in registers; and a decoded
token's weight rows read in STREAMS parts side by side.
"""

from std.memory import bitcast, stack_allocation
from std.sys._assembly import inlined_assembly
from std.sys.intrinsics import llvm_intrinsic
from extensibility import InputTensor
from .cpu import HAS_BF16_DOT, PAIRS, READ_BYTES, READ_PAIRS, STREAMS, WIDTH, read_lanes


@always_inline
def dot_pairs(
    sums: SIMD[DType.float32, 16],
    a: SIMD[DType.bfloat16, PAIRS],
    b: SIMD[DType.bfloat16, PAIRS],
) -> SIMD[DType.float32, 16]:
    """sums[i] += a[2i] * b[2i] + a[2i + 1] * b[2i + 1] (vdpbf16ps)."""
    comptime if HAS_BF16_DOT:
        return llvm_intrinsic["llvm.x86.avx512bf16.dpbf16ps.512", SIMD[DType.float32, 16]](
            sums, a, b
        )
    else:  # the same instruction, which the compiler's target lacks
        return inlined_assembly[
            "vdpbf16ps $3, $2, $0",
            SIMD[DType.float32, 16],
            constraints="=v,0,v,v",
            has_side_effect=False,
        ](sums, bitcast[DType.float32, 16](a), bitcast[DType.float32, 16](b))


@always_inline
def dot_read_pairs(
    sums: SIMD[DType.float32, READ_PAIRS // 2],
    a: SIMD[DType.bfloat16, READ_PAIRS],
    b: SIMD[DType.bfloat16, READ_PAIRS],
) -> SIMD[DType.float32, READ_PAIRS // 2]:
    """dot_pairs on READ_BYTES of each operand: vdpbf16ps on 256-bit registers."""
    comptime assert READ_BYTES == 32, "a 32-byte vdpbf16ps"
    comptime if HAS_BF16_DOT:
        return llvm_intrinsic["llvm.x86.avx512bf16.dpbf16ps.256", SIMD[DType.float32, 8]](
            sums, a, b
        )
    else:
        return inlined_assembly[
            "vdpbf16ps $3, $2, $0",
            SIMD[DType.float32, 8],
            constraints="=v,0,v,v",
            has_side_effect=False,
        ](sums, bitcast[DType.float32, 8](a), bitcast[DType.float32, 8](b))


@always_inline
def dot_widening[
    wtype: DType, width: Int = WIDTH
](w_row: UnsafePointer[Scalar[wtype], _], x_row: UnsafePointer[Float32, _], n_in: Int) -> Float32:
    """w_row . x_row, the weights widened to float32 in registers: four sums
    over consecutive chunks, so that four loads are in flight."""
    var a0 = SIMD[DType.float32, width](0)
    var a1 = SIMD[DType.float32, width](0)
    var a2 = SIMD[DType.float32, width](0)
    var a3 = SIMD[DType.float32, width](0)
    var k = 0
    while k + 4 * width <= n_in:
        var w = w_row + k
        var x = x_row + k
        a0 += w.load[width=width]().cast[DType.float32]() * x.load[width=width]()
        a1 += (w + width).load[width=width]().cast[DType.float32]() * (x + width).load[width=width]()
        a2 += (w + 2 * width).load[width=width]().cast[DType.float32]() * (
            x + 2 * width
        ).load[width=width]()
        a3 += (w + 3 * width).load[width=width]().cast[DType.float32]() * (
            x + 3 * width
        ).load[width=width]()
        k += 4 * width
    while k + width <= n_in:
        a0 += (w_row + k).load[width=width]().cast[DType.float32]() * (x_row + k).load[width=width]()
        k += width
    var total = ((a0 + a1) + (a2 + a3)).reduce_add()
    for tail_k in range(k, n_in):
        total += w_row[tail_k].cast[DType.float32]() * x_row[tail_k]
    return total


@always_inline
def dot_bf16(
    w_row: UnsafePointer[BFloat16, _], x_row: UnsafePointer[BFloat16, _], n_in: Int
) -> Float32:
    """w_row . x_row through vdpbf16ps (only where cpu_has_bf16_dot): two sums
    over alternate 64-byte chunks, the tail widened."""
    var dot_end = n_in - n_in % PAIRS
    var even = SIMD[DType.float32, 16](0)
    var odd = SIMD[DType.float32, 16](0)
    var k = 0
    while k + 2 * PAIRS <= dot_end:
        even = dot_pairs(even, (w_row + k).load[width=PAIRS](), (x_row + k).load[width=PAIRS]())
        var k1 = k + PAIRS
        odd = dot_pairs(odd, (w_row + k1).load[width=PAIRS](), (x_row + k1).load[width=PAIRS]())
        k += 2 * PAIRS
    if k < dot_end:
        even = dot_pairs(even, (w_row + k).load[width=PAIRS](), (x_row + k).load[width=PAIRS]())
    var total = (even + odd).reduce_add()
    for tail_k in range(dot_end, n_in):
        total += w_row[tail_k].cast[DType.float32]() * x_row[tail_k].cast[DType.float32]()
    return total


@always_inline
def dot_widening_streams[
    streams: Int, wtype: DType, width: Int = WIDTH
](
    w_first: UnsafePointer[Scalar[wtype], _],
    stride: Int,
    x_row: UnsafePointer[Float32, _],
    n_in: Int,
) -> SIMD[DType.float32, streams]:
    """(w_first + s * stride) . x_row for each s < streams, at once, the weights
    widened to float32 in registers: `streams` reads in flight (dot_bf16_streams)."""
    var sums = stack_allocation[streams, SIMD[DType.float32, width]]()
    comptime for s in range(streams):
        sums[s] = 0
    var k = 0
    while k + width <= n_in:
        var x = (x_row + k).load[width=width]()
        comptime for s in range(streams):
            sums[s] += (w_first + s * stride + k).load[width=width]().cast[DType.float32]() * x
        k += width
    var totals = SIMD[DType.float32, streams](0)
    comptime for s in range(streams):
        var total = sums[s].reduce_add()
        for tail_k in range(k, n_in):
            total += (w_first + s * stride)[tail_k].cast[DType.float32]() * x_row[tail_k]
        totals[s] = total
    return totals


@always_inline
def dot_bf16_streams[
    streams: Int
](
    w_first: UnsafePointer[BFloat16, _],
    stride: Int,
    x_row: UnsafePointer[BFloat16, _],
    n_in: Int,
) -> SIMD[DType.float32, streams]:
    """(w_first + s * stride) . x_row for each s < streams, at once (only where
    cpu_has_bf16_dot): weight rows far apart in memory streamed side by side, so
    that `streams` reads are in flight instead of one, READ_BYTES a load."""
    var dot_end = n_in - n_in % READ_PAIRS
    var sums = stack_allocation[streams, SIMD[DType.float32, READ_PAIRS // 2]]()
    comptime for s in range(streams):
        sums[s] = 0
    var k = 0
    while k < dot_end:
        var x = (x_row + k).load[width=READ_PAIRS]()
        comptime for s in range(streams):
            var w = (w_first + s * stride + k).load[width=READ_PAIRS]()
            # The weights second: only vdpbf16ps's last operand can be read
            # from memory, and the load folded into it is one instruction
            # instead of two, as the float32 path's loads fold into its
            # FMAs. Fewer instructions a load, more loads in flight.
            sums[s] = dot_read_pairs(sums[s], x, w)
        k += READ_PAIRS
    var totals = SIMD[DType.float32, streams](0)
    comptime for s in range(streams):
        var total = sums[s].reduce_add()
        for tail_k in range(dot_end, n_in):
            total += (w_first + s * stride)[tail_k].cast[DType.float32]() * x_row[tail_k].cast[
                DType.float32
            ]()
        totals[s] = total
    return totals


@always_inline
def dot_rows_streamed[
    use_bf16_dot: Bool, wtype: DType, xtype: DType, width: Int = WIDTH
](
    w_ptr: UnsafePointer[Scalar[wtype], _],
    first: Int,
    last: Int,
    n_in: Int,
    x_row: UnsafePointer[Scalar[xtype], _],
    dest: UnsafePointer[mut=True, Float32, _],
    dest_stride: Int,
) -> Int:
    """dest[n * dest_stride] = w_ptr[n] . x_row for one row of x (a decoded
    token) and the weight rows from `first`, in STREAMS equal parts side by
    side, READ_BYTES of each a load. Returns the first row not done (fewer
    than STREAMS are left before `last`). x_row is bfloat16 with
    `use_bf16_dot`, else float32."""
    var part = (last - first) // STREAMS
    for i in range(part):
        var n = first + i
        var dots: SIMD[DType.float32, STREAMS]
        comptime if use_bf16_dot:
            var w16 = (w_ptr + n * n_in).bitcast[BFloat16]()
            dots = dot_bf16_streams[STREAMS](w16, part * n_in, x_row.bitcast[BFloat16](), n_in)
        else:
            var x = x_row.bitcast[Float32]()
            var w = w_ptr + n * n_in
            comptime lanes = min(width, read_lanes[wtype]())
            dots = dot_widening_streams[STREAMS, width=lanes](w, part * n_in, x, n_in)
        comptime for s in range(STREAMS):
            dest[(n + s * part) * dest_stride] = dots[s]
    return first + STREAMS * part


def contiguous_weight(weight: InputTensor[rank=2, ...]) raises:
    var w_strides = weight.strides()
    if w_strides[1] != 1 or w_strides[0] != weight.dim_size(1):
        raise Error("gpt2_linear_rows: the weight must be a contiguous [out, in] matrix")


@always_inline
def at[wtype: DType](vector: UnsafePointer[Scalar[wtype], _], index: Int) -> Float32:
    """vector[index] as float32, whatever its dtype."""
    return vector[index].cast[DType.float32]()
