"""CPU kernels for fast/gpt2.py: a decoded token's blocks, a prompt's projections.

Decoding one token is memory-bound: each weight is read once and used for one
multiply-add, so the time is the weights' bytes over the memory bandwidth.
These kernels read every weight row exactly once and spread the rows over
the cores; for one token each core reads eight parts of its rows side by
side, eight streams from memory instead of one. bfloat16 weights cost half
the bytes: on a CPU with AVX512_BF16 they are multiplied as they are, by its
bfloat16 dot products, which also run a prompt's many rows in register
tiles; elsewhere they are widened to float32 in registers.
"""

from std.atomic import Atomic
from std.ffi import c_int, external_call
from std.math import ceildiv, exp, iota, sqrt, tanh
from std.memory import alloc, bitcast, stack_allocation
from std.sys.info import CompilationTarget, num_physical_cores, simd_width_of, size_of
from std.sys._assembly import inlined_assembly
from std.sys.intrinsics import llvm_intrinsic, prefetch
from std.utils import IndexList
from max.algorithm import parallelize
import extensibility
from extensibility import InputTensor, InputVariadicTensors, OutputTensor
from extensibility.managed_tensor_slice import _MutableInputTensor as MutableInputTensor

# float32 lanes in one vector register of the machine the kernels are built
# for (MAX builds them on it): 16 with AVX-512, 8 with AVX2, 4 with NEON.
comptime WIDTH = simd_width_of[DType.float32]()
# vdpbf16ps (AVX512_BF16): each float32 lane adds the products of a pair of
# bfloat16 lanes, so one instruction does 32 multiply-adds on 64 bytes of
# weights, where widening them to float32 first takes two loads, two
# conversions and two FMAs.
comptime HAS_BF16_DOT = CompilationTarget._has_feature["avx512bf16"]()
# MAX builds for the CPU its model number names, with that model's features,
# and a virtual machine's CPU can be named for an older model than it is,
# one without AVX512_BF16 or AMX: its kernels then lack them. So on any x86 CPU with
# AVX-512 (which every CPU with AVX512_BF16 or AMX has) the kernels also
# carry both as inline assembly, and cpuid says at run time whether the CPU
# runs them (cpu_has_bf16_dot, cpu_has_amx).
comptime HAS_AVX512F = CompilationTarget._has_feature["avx512f"]()
comptime CAN_ASK_CPU = HAS_AVX512F and CompilationTarget._has_feature["avx512vl"]()
comptime BF16_DOT_BUILT = HAS_BF16_DOT or CAN_ASK_CPU
comptime PAIRS = 32  # bfloat16 lanes one vdpbf16ps reads from each operand
# Bytes of weights one load takes in a decoded token's streams (at most a
# vector register's). A core that executes a 512-bit vector as two 256-bit
# halves (AMD's Zen 4) keeps more reads from memory in flight with 32-byte
# loads than with 64-byte ones, and a loop bound by memory has the load
# ports to spare for twice the loads on any x86 core (devtools/bench/
# TUNING_LOG.md). (vdpbf16ps on 256-bit registers needs AVX512VL, which
# every CPU with AVX512_BF16 has.)
comptime READ_BYTES = 32
comptime READ_PAIRS = READ_BYTES // 2  # the bfloat16 pairs of one such load
# A decoded token's weight rows are read in STREAMS equal parts at once: one
# core then has as many reads from memory in flight. Parts far apart are
# streams of their own to the hardware prefetcher, where neighbouring rows
# are one; eight read fastest of 1, 2, 4, 8 and 16 (devtools/bench/TUNING_LOG.md).
comptime STREAMS = 8
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


def cpuid_7_eax_1() -> UInt32:
    """eax of cpuid leaf 7, subleaf 1 (bit 5: AVX512_BF16)."""
    return inlined_assembly[
        "movl $$7, %eax; movl $$1, %ecx; cpuid", UInt32, constraints="={eax},~{ebx},~{ecx},~{edx}"
    ]()


def cpuid_7_edx_0() -> UInt32:
    """edx of cpuid leaf 7, subleaf 0 (bit 22: AMX-BF16, bit 24: AMX-TILE)."""
    return inlined_assembly[
        "movl $$7, %eax; xorl %ecx, %ecx; cpuid", UInt32, constraints="={edx},~{eax},~{ebx},~{ecx}"
    ]()


def cpu_has_bf16_dot() -> Bool:
    """Whether the kernels multiply bfloat16 weights as they are: built for
    a target with AVX512_BF16, or built with AVX-512 for one whose CPU,
    asked now, has it."""
    comptime if HAS_BF16_DOT:
        return True
    elif CAN_ASK_CPU:
        return (cpuid_7_eax_1() >> 5) & 1 == 1
    else:
        return False


comptime ARCH_REQ_XCOMP_PERM = 0x1023  # arch_prctl: ask for a state component
comptime XFEATURE_XTILEDATA = 18  # the AMX tiles' state
comptime SYS_ARCH_PRCTL = 158


def cpu_has_amx() -> Bool:
    """Whether this process may run AMX's bfloat16 tiles: the CPU has them
    (cpuid) and Linux gave this process their state, which it asks for here
    (once per process would do; again costs one system call). Without that,
    the first tile instruction kills the process."""
    comptime if CAN_ASK_CPU:
        var edx = cpuid_7_edx_0()
        if (edx >> 22) & 1 == 0 or (edx >> 24) & 1 == 0:
            return False
        var granted = external_call["syscall", Int](
            SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
        )
        return granted == 0
    else:
        return False


def read_lanes[dtype: DType]() -> Int:
    """Lanes of `dtype` one load of a decoded token's weight streams takes:
    READ_BYTES of them, at most a vector register's worth (WIDTH)."""
    return min(WIDTH, READ_BYTES // size_of[dtype]())


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


def contiguous_weight(weight: InputTensor[rank=2, ...]) raises:
    var w_strides = weight.strides()
    if w_strides[1] != 1 or w_strides[0] != weight.dim_size(1):
        raise Error("gpt2_linear_rows: the weight must be a contiguous [out, in] matrix")


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


# --- AMX: a prompt's rows through Intel's tile registers ---------------------
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


@always_inline
def cast_values[
    dtype: DType
](source: UnsafePointer[Float32, _], dest: UnsafePointer[mut=True, Scalar[dtype], _], count: Int):
    """dest[0:count] = source[0:count] in dest's dtype."""
    var whole = count - count % WIDTH
    for i in range(0, whole, WIDTH):
        (dest + i).store((source + i).load[width=WIDTH]().cast[dtype]())
    for i in range(whole, count):
        dest[i] = source[i].cast[dtype]()


@extensibility.register("gpt2_cache_write")
struct CacheWrite:
    """Writes a prompt's keys and values, straight from c_attn's output qkv
    [batch, seq, 3 * embed] (queries, keys, values, each heads by head_dim),
    into one layer's slots of the caches [layers, batch, heads, context,
    head_dim], at positions start .. start + seq, rounded to the caches'
    dtype. Each core takes its share of the positions, each position's
    row read once in order, rather than the keys and values split into
    heads by MAX's operations first and then written one value at a time
    by one core."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        key_cache: MutableInputTensor[rank=5, ...],
        value_cache: MutableInputTensor[rank=5, ...],
        qkv: InputTensor[dtype = DType.float32, rank=3, ...],
        start: InputTensor[dtype = DType.int64, rank=1, ...],
        layer_index: InputTensor[dtype = DType.int64, rank=1, ...],
    ) raises:
        var layer = Int(layer_index.unsafe_ptr()[0])
        var batch, seq = qkv.dim_size(0), qkv.dim_size(1)
        var heads, context, head_dim = (
            key_cache.dim_size(2),
            key_cache.dim_size(3),
            key_cache.dim_size(4),
        )
        var embed = heads * head_dim
        if qkv.dim_size(2) != 3 * embed or qkv.strides()[2] != 1:
            raise Error("gpt2_cache_write: qkv must be [batch, seq, 3 * heads * head_dim]")
        var first = Int(start.unsafe_ptr()[0])
        if first < 0 or first + seq > context:
            raise Error("gpt2_cache_write: positions beyond the cache")
        var key_ptr, value_ptr = key_cache.unsafe_ptr(), value_cache.unsafe_ptr()
        var qkv_ptr = qkv.unsafe_ptr()
        var qkv_strides = qkv.strides()
        var workers = num_physical_cores()

        def write_share(index: Int) {var}:
            for row in range(index, batch * seq, workers):
                var b, s = row // seq, row % seq
                var keys = qkv_ptr + b * qkv_strides[0] + s * qkv_strides[1] + embed
                for h in range(heads):
                    var slot = (((layer * batch + b) * heads + h) * context + first + s) * head_dim
                    cast_values(keys + h * head_dim, key_ptr + slot, head_dim)
                    cast_values(keys + embed + h * head_dim, value_ptr + slot, head_dim)

        parallelize(write_share, workers)


# --- a prompt's causal self-attention, in one call ---------------------------
#
# As MAX's operations, a prompt's attention is a whole [seq, seq] matrix of
# scores for every head: the scores above the diagonal are computed, stored,
# masked to -inf and exponentiated to zeros, and the softmax and the product
# with the values go over the whole matrix again. Here each core takes a block
# of PROMPT_ROWS queries of one head at a time and goes through the keys up to
# the block's last query, PROMPT_KEYS keys at a time, with the softmax
# computed online (a running max and sum per query): half the scores, none
# of them stored. The keys are transposed once per head ([head_dim, seq]), so
# that one vector holds WIDTH keys' values of one dimension and the scores of
# a block of queries against them are multiply-adds of a query's value
# (broadcast) by that vector, with no sums across a vector's lanes. Twelve
# queries a block did no better; four against four vectors of keys, worse
# (devtools/bench/TUNING_LOG.md).

comptime PROMPT_ROWS = 8  # the queries of a block, each a vector of scores
comptime PROMPT_KEYS = 2 * WIDTH  # the keys each query of a block scores at once


@extensibility.register("gpt2_prompt_attention")
struct PromptAttention:
    """Causal self-attention of a prompt on an empty cache, heads merged.

    qkv is c_attn's output [batch, seq, 3 * embed]: the queries, keys and
    values, each `heads` heads of head_dim = embed / heads. output[b, i,
    h * head_dim + d] = sum over j <= i of softmax_j(q_i . k_j /
    sqrt(head_dim)) * v_j[d], for head h's q, k and v."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=3, ...],
        qkv: InputTensor[dtype = DType.float32, rank=3, ...],
        heads: InputTensor[dtype = DType.int64, rank=1, ...],
    ) raises:
        checked_prompt_attention(output, qkv, heads, tiles=False)


@extensibility.register("gpt2_prompt_attention_bf16")
struct PromptAttentionBF16:
    """gpt2_prompt_attention for a bfloat16 model: through AMX's tiles where
    the CPU has them (prompt_attention_amx), q, k, v and the softmax's
    weights rounded to bfloat16; elsewhere gpt2_prompt_attention itself."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=3, ...],
        qkv: InputTensor[dtype = DType.float32, rank=3, ...],
        heads: InputTensor[dtype = DType.int64, rank=1, ...],
    ) raises:
        checked_prompt_attention(output, qkv, heads, tiles=True)


def checked_prompt_attention(
    output: OutputTensor[dtype = DType.float32, rank=3, ...],
    qkv: InputTensor[dtype = DType.float32, rank=3, ...],
    heads: InputTensor[dtype = DType.int64, rank=1, ...],
    tiles: Bool,
) raises:
    """Checks the shapes, then runs prompt_attention, or with `tiles`
    prompt_attention_amx on a CPU that has AMX."""
    var n_heads = Int(heads.unsafe_ptr()[0])
    var embed = output.dim_size(2)
    if n_heads < 1 or embed % n_heads != 0 or qkv.dim_size(2) != 3 * embed:
        raise Error(
            "gpt2_prompt_attention: qkv must be [batch, seq, 3 * embed] and embed"
            " a multiple of heads"
        )
    var qkv_strides = qkv.strides()
    var out_strides = output.strides()
    if qkv_strides[2] != 1 or out_strides[2] != 1:
        raise Error("gpt2_prompt_attention: each position's values must be contiguous")
    var dest_strides = IndexList[2](out_strides[0], out_strides[1])
    var source_strides = IndexList[2](qkv_strides[0], qkv_strides[1])
    var sizes = IndexList[4](qkv.dim_size(0), qkv.dim_size(1), n_heads, embed // n_heads)
    comptime if BF16_DOT_BUILT:
        if tiles and cpu_has_bf16_dot() and cpu_has_amx():
            prompt_attention_amx(
                output.unsafe_ptr(), dest_strides, qkv.unsafe_ptr(), source_strides, sizes
            )
            return
    prompt_attention(output.unsafe_ptr(), dest_strides, qkv.unsafe_ptr(), source_strides, sizes)


def prompt_attention(
    dest: UnsafePointer[mut=True, Float32, _],
    dest_strides: IndexList[2],
    qkv: UnsafePointer[Float32, _],
    qkv_strides: IndexList[2],
    sizes: IndexList[4],
):
    """PromptAttention on raw pointers: strides of a batch and a position,
    sizes [batch, seq, heads, head_dim]."""
    var batch, seq, heads, head_dim = sizes[0], sizes[1], sizes[2], sizes[3]
    var embed = heads * head_dim
    var keys_len = ceildiv(seq, PROMPT_KEYS) * PROMPT_KEYS  # zeros past seq
    var pairs = batch * heads  # a (batch, head) pair: one sequence of one head
    var keys_t = alloc[Float32](pairs * head_dim * keys_len)
    var workers = num_physical_cores()

    def transpose(index: Int) {var}:
        for pair in range(index, pairs, workers):
            var keys = qkv + (pair // heads) * qkv_strides[0] + embed + (pair % heads) * head_dim
            var out = keys_t + pair * head_dim * keys_len
            for j in range(keys_len):
                for d in range(head_dim):
                    out[d * keys_len + j] = keys[j * qkv_strides[1] + d] if j < seq else 0

    parallelize(transpose, workers)
    var blocks = ceildiv(seq, PROMPT_ROWS)
    var claims = new_counters(1)

    def attend(index: Int) {var}:
        while True:
            var unit = Int(Atomic[Int64].fetch_add(claims, 1))
            if unit >= pairs * blocks:
                return
            # The blocks of the last queries, which read the most keys, first:
            # the last claims are the shortest, and the cores end together.
            var block = blocks - 1 - unit // pairs
            var pair = unit % pairs
            var b, h = pair // heads, pair % heads
            attend_block(
                dest + b * dest_strides[0] + h * head_dim,
                dest_strides[1],
                qkv + b * qkv_strides[0] + h * head_dim,
                qkv_strides[1],
                keys_t + pair * head_dim * keys_len,
                IndexList[4](block * PROMPT_ROWS, seq, embed, head_dim),
            )

    parallelize(attend, workers)
    claims.free()
    keys_t.free()


def attend_block(
    dest: UnsafePointer[mut=True, Float32, _],
    dest_stride: Int,
    qkv: UnsafePointer[Float32, _],
    qkv_stride: Int,
    keys_t: UnsafePointer[Float32, _],
    sizes: IndexList[4],
):
    """The queries first .. first + PROMPT_ROWS (fewer at the end) of one head
    against the keys up to each: sizes [first, seq, embed, head_dim]; dest
    and qkv point at the head's values of position 0, keys_t at its keys
    transposed ([head_dim, seq rounded up to PROMPT_KEYS])."""
    var first, seq, embed, head_dim = sizes[0], sizes[1], sizes[2], sizes[3]
    var rows = min(PROMPT_ROWS, seq - first)
    var keys_len = ceildiv(seq, PROMPT_KEYS) * PROMPT_KEYS
    var scale = Float32(1.0) / sqrt(Float32(head_dim))
    # A block's missing queries (past seq) repeat its last one; their
    # outputs stay in the block's own rows and are never written out.
    var queries = stack_allocation[PROMPT_ROWS, Int]()  # where each query starts in qkv
    var running_max = stack_allocation[PROMPT_ROWS, Float32]()
    var running_sum = stack_allocation[PROMPT_ROWS, Float32]()
    comptime for r in range(PROMPT_ROWS):
        queries[r] = (first + min(r, rows - 1)) * qkv_stride
        running_max[r] = Float32.MIN
        running_sum[r] = 0
    var outputs = alloc[Float32](PROMPT_ROWS * head_dim)  # the block's rows, unnormalized
    for i in range(PROMPT_ROWS * head_dim):
        outputs[i] = 0
    var scores = stack_allocation[PROMPT_ROWS, SIMD[DType.float32, PROMPT_KEYS]]()
    var weights = stack_allocation[PROMPT_ROWS * PROMPT_KEYS, Float32]()
    var corrections = stack_allocation[PROMPT_ROWS, Float32]()
    for key in range(0, first + rows, PROMPT_KEYS):
        comptime for r in range(PROMPT_ROWS):
            scores[r] = 0
        for d in range(head_dim):
            var k = (keys_t + d * keys_len + key).load[width=PROMPT_KEYS]()
            comptime for r in range(PROMPT_ROWS):
                scores[r] += qkv[queries[r] + d] * k
        comptime for r in range(PROMPT_ROWS):
            var position = first + min(r, rows - 1)
            var weight = SIMD[DType.float32, PROMPT_KEYS](0)
            var correction = Float32(1)
            if key <= position:  # else every one of these keys comes after this query
                var score = scores[r] * scale
                if key + PROMPT_KEYS - 1 > position:  # the keys after this query: masked
                    var lanes = iota[DType.int64, PROMPT_KEYS](Int64(key))
                    var masked = SIMD[DType.float32, PROMPT_KEYS](Float32.MIN)
                    score = lanes.gt(Int64(position)).select(masked, score)
                var new_max = max(running_max[r], score.reduce_max())
                weight = exp(score - new_max)
                correction = exp(running_max[r] - new_max)
                running_sum[r] = running_sum[r] * correction + weight.reduce_add()
                running_max[r] = new_max
            (weights + r * PROMPT_KEYS).store(weight)
            corrections[r] = correction
        var values = qkv + 2 * embed + key * qkv_stride
        var keys_here = min(PROMPT_KEYS, seq - key)  # none past the prompt's end
        add_weighted_values(
            outputs, weights, corrections, values, qkv_stride, keys_here, head_dim
        )
    for r in range(rows):
        var out = dest + (first + r) * dest_stride
        var inverse = 1 / running_sum[r]
        for d in range(head_dim):
            out[d] = outputs[r * head_dim + d] * inverse
    outputs.free()


comptime VALUE_ROWS = 4  # queries whose outputs add one key's value at once
comptime VALUE_VECTORS = 4  # vectors of head_dim at once: 4 x 4 sums in registers


@always_inline
def add_weighted_values(
    outputs: UnsafePointer[mut=True, Float32, _],
    weights: UnsafePointer[Float32, _],
    corrections: UnsafePointer[Float32, _],
    values: UnsafePointer[Float32, _],
    values_stride: Int,
    keys: Int,
    head_dim: Int,
):
    """outputs[r] = outputs[r] * corrections[r] + the sum over j < keys of
    weights[r, j] * values[j], for the block's PROMPT_ROWS rows ([r, head_dim]
    outputs, [r, PROMPT_KEYS] weights). Four rows by four vectors of
    head_dim at a time: each value vector loaded feeds four rows' sums."""
    comptime CHUNK = VALUE_VECTORS * WIDTH
    var chunk_end = head_dim - head_dim % CHUNK
    comptime for r0 in range(0, PROMPT_ROWS, VALUE_ROWS):
        for d0 in range(0, chunk_end, CHUNK):
            var sums = stack_allocation[VALUE_ROWS * VALUE_VECTORS, SIMD[DType.float32, WIDTH]]()
            comptime for g in range(VALUE_ROWS):
                comptime for c in range(VALUE_VECTORS):
                    var out = outputs + (r0 + g) * head_dim + d0 + c * WIDTH
                    sums[g * VALUE_VECTORS + c] = out.load[width=WIDTH]() * corrections[r0 + g]
            for j in range(keys):
                comptime for c in range(VALUE_VECTORS):
                    var v = (values + j * values_stride + d0 + c * WIDTH).load[width=WIDTH]()
                    comptime for g in range(VALUE_ROWS):
                        var w = weights[(r0 + g) * PROMPT_KEYS + j]
                        sums[g * VALUE_VECTORS + c] += w * v
            comptime for g in range(VALUE_ROWS):
                comptime for c in range(VALUE_VECTORS):
                    var out = outputs + (r0 + g) * head_dim + d0 + c * WIDTH
                    out.store(sums[g * VALUE_VECTORS + c])
    # What is left of head_dim (none for GPT-2's 64 with 8 or 16 lanes), a
    # value at a time.
    for r in range(PROMPT_ROWS):
        for d in range(chunk_end, head_dim):
            var total = outputs[r * head_dim + d] * corrections[r]
            for j in range(keys):
                total += weights[r * PROMPT_KEYS + j] * values[j * values_stride + d]
            outputs[r * head_dim + d] = total


# --- a prompt's attention through AMX's tiles (bfloat16 models) --------------
#
# With bfloat16 weights on a CPU with AMX, the prompt's projections run in
# AMX's tiles, and the float32 attention above became the prompt's largest
# cost, well behind PyTorch's in bfloat16. Here its two products run in the tiles too. The
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


# --- one decoded token through all the transformer blocks, in one call -----
#
# Decoding, a block is seven steps in a row (layer norm, c_attn, attention,
# c_proj, layer norm, c_fc with GELU, c_proj), each needing all of the one
# before. As graph operations (about nineteen a block, the layer norms,
# GELU and adds around the projections included) each step pays MAX's dispatch
# and ends with the cores handing back to its executor and being woken for
# the next. Here one call runs every block of the token: each core takes a
# share of every step, and waits for the others at the end of it by watching
# a counter (microseconds) instead of going back to sleep. One call for the
# token also saves the hand-offs between blocks, each a return to MAX's
# executor and a wake-up of the other cores.
#
# Work is claimed, not assigned: a core takes the next unclaimed rows of a
# step with an atomic compare-and-swap until none is left, then waits until
# every claimed row is done. Whatever number of workers MAX runs at once,
# even one, every row is claimed by a core that is running, so the wait
# always ends. A claim takes what is left over twice the workers (a quarter
# with two), at least CLAIM_BYTES of weights: few claims, each atomic moving
# a cache line between cores, and small ones at the end, so that the cores
# finish a step close together (guided scheduling). A claim of weight rows
# is a whole number of STREAMS rows: the rows left over from a claim's
# STREAMS parts would each be read alone, in one stream.

comptime CLAIM_BYTES = 32768  # the weight bytes of the smallest claim
comptime STEPS = 7
comptime LINE_BYTES = 64  # one cache line
# Looks at a counter before a waiting core yields (microseconds of spinning).
comptime SPINS_BEFORE_YIELD = 10000


# Each counter on a cache line of its own: a core adding to one must not
# take the line away from a core reading another.
comptime COUNTER_STRIDE = LINE_BYTES // size_of[Int64]()


@always_inline
def claim(
    counters: UnsafePointer[mut=True, Int64, _],
    step: Int,
    total: Int,
    smallest: Int,
    workers: Int,
    granule: Int = 1,
) -> IndexList[2]:
    """The next unclaimed rows [first, last) of `step`'s `total`, claimed now:
    what is left over 2 * workers, at least `smallest` rows, rounded up to
    a multiple of `granule` (but at the end); first == last == total once
    all are claimed."""
    var next = counters + (2 * step) * COUNTER_STRIDE
    var first = Atomic[Int64].load(next)
    while Int(first) < total:
        var size = max(smallest, (total - Int(first)) // (2 * workers))
        size = ceildiv(size, granule) * granule
        var last = min(total, Int(first) + size)
        if Atomic[Int64].compare_exchange(next, first, Int64(last)):
            return IndexList[2](Int(first), last)
        # Another core claimed first: `first` now holds where it stopped.
    return IndexList[2](total, total)


@always_inline
def finished(counters: UnsafePointer[mut=True, Int64, _], step: Int, rows_done: Int):
    """Adds the rows of `step` this core did: once per core and step, not per
    claim (every atomic add moves the counter's line between cores)."""
    if rows_done > 0:
        _ = Atomic[Int64].fetch_add(counters + (2 * step + 1) * COUNTER_STRIDE, Int64(rows_done))


def new_counters(count: Int) -> UnsafePointer[Int64, MutUntrackedOrigin]:
    """`count` zeroed counters, each on its own cache line."""
    var counters = alloc[Int64](count * COUNTER_STRIDE)
    for i in range(count * COUNTER_STRIDE):
        counters[i] = 0
    return counters


@always_inline
def wait_for_step(counters: UnsafePointer[mut=True, Int64, _], step: Int, total: Int):
    """Spins until all `total` rows of `step` are done (by this core or
    another). After SPINS_BEFORE_YIELD looks it also gives its core away at
    each look: when more threads than cores run (other programs), the rows
    it waits for may belong to a thread that needs this core to finish."""
    var spins = 0
    while Int(Atomic[Int64].load(counters + (2 * step + 1) * COUNTER_STRIDE)) < total:
        spins += 1
        if spins > SPINS_BEFORE_YIELD:
            _ = external_call["sched_yield", c_int]()


def layer_norm_row[
    wtype: DType
](
    x: UnsafePointer[Float32, _],
    weight: UnsafePointer[Scalar[wtype], _],
    bias: UnsafePointer[Scalar[wtype], _],
    epsilon: Float32,
    out32: UnsafePointer[mut=True, Float32, _],
    out16: UnsafePointer[mut=True, BFloat16, _],
    width: Int,
):
    """One row's layer norm, in float32 and rounded to bfloat16 (the dot
    products' input). In vectors: one core norms the row while the others
    wait for it, so its three passes are on every block's path."""
    var vector_end = width - width % WIDTH
    var sums = SIMD[DType.float32, WIDTH](0)
    for i in range(0, vector_end, WIDTH):
        sums += (x + i).load[width=WIDTH]()
    var total = sums.reduce_add()
    for i in range(vector_end, width):
        total += x[i]
    var mean = total / Float32(width)
    var squares = SIMD[DType.float32, WIDTH](0)
    for i in range(0, vector_end, WIDTH):
        var centered = (x + i).load[width=WIDTH]() - mean
        squares += centered * centered
    var square_total = squares.reduce_add()
    for i in range(vector_end, width):
        square_total += (x[i] - mean) * (x[i] - mean)
    var inverse = Float32(1) / sqrt(square_total / Float32(width) + epsilon)
    for i in range(0, vector_end, WIDTH):
        var w = (weight + i).load[width=WIDTH]().cast[DType.float32]()
        var b = (bias + i).load[width=WIDTH]().cast[DType.float32]()
        var y = ((x + i).load[width=WIDTH]() - mean) * inverse * w + b
        (out32 + i).store(y)
        (out16 + i).store(y.cast[DType.bfloat16]())
    for i in range(vector_end, width):
        var y = (x[i] - mean) * inverse * at(weight, i) + at(bias, i)
        out32[i] = y
        out16[i] = y.cast[DType.bfloat16]()


@always_inline
def at[wtype: DType](vector: UnsafePointer[Scalar[wtype], _], index: Int) -> Float32:
    """vector[index] as float32, whatever its dtype."""
    return vector[index].cast[DType.float32]()


@always_inline
def gelu_tanh[width: Int](x: SIMD[DType.float32, width]) -> SIMD[DType.float32, width]:
    """GPT-2's GELU, the tanh approximation (F.gelu(approximate="tanh"))."""
    comptime SQRT_2_OVER_PI: Float32 = 0.7978845608028654
    return 0.5 * x * (1 + tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))


@always_inline
def bias_gelu[
    wtype: DType
](
    values: UnsafePointer[mut=True, Float32, _],
    values16: UnsafePointer[mut=True, BFloat16, _],
    bias: UnsafePointer[Scalar[wtype], _],
    first: Int,
    last: Int,
):
    """values[n] = gelu(values[n] + bias[n]) for n in first..last, also
    rounded into values16: in vectors, as the core that claimed these rows
    stops streaming weights while it does this."""
    var n = first
    while n + WIDTH <= last:
        var b = (bias + n).load[width=WIDTH]().cast[DType.float32]()
        var a = gelu_tanh((values + n).load[width=WIDTH]() + b)
        (values + n).store(a)
        (values16 + n).store(a.cast[DType.bfloat16]())
        n += WIDTH
    for tail in range(n, last):
        var a = gelu_tanh[1](values[tail] + at(bias, tail))
        values[tail] = a
        values16[tail] = a.cast[DType.bfloat16]()


@always_inline
def project_chunk[
    use_bf16_dot: Bool, wtype: DType
](
    w_ptr: UnsafePointer[Scalar[wtype], _],
    n_out: Int,
    n_in: Int,
    first: Int,
    last: Int,
    rows: Int,
    x32: UnsafePointer[Float32, _],
    x16: UnsafePointer[BFloat16, _],
    dest: UnsafePointer[mut=True, Float32, _],
):
    """dest[m, n] = x[m] . weight[n] for the weight rows first..last of the
    contiguous [n_out, n_in] weight at w_ptr, in memory order, and every row
    m of x ([rows, n_in], contiguous; dest is [rows, n_out]). No bias: the
    caller adds it with what follows the product."""
    comptime bf16 = use_bf16_dot and wtype == DType.bfloat16
    var streamed = first  # the weight rows before this one are done
    if rows == 1:
        comptime if bf16:
            streamed = dot_rows_streamed[True](w_ptr, first, last, n_in, x16, dest, 1)
        else:
            streamed = dot_rows_streamed[False](w_ptr, first, last, n_in, x32, dest, 1)
    for n in range(streamed, last):
        for m in range(rows):
            comptime if bf16:
                dest[m * n_out + n] = dot_bf16(
                    (w_ptr + n * n_in).bitcast[BFloat16](), x16 + m * n_in, n_in
                )
            else:
                dest[m * n_out + n] = dot_widening(w_ptr + n * n_in, x32 + m * n_in, n_in)


@always_inline
def smallest_claim[wtype: DType](n_in: Int) -> Int:
    """Weight rows in the smallest claim: CLAIM_BYTES of them, at least one."""
    return max(1, CLAIM_BYTES // (n_in * size_of[wtype]()))


@always_inline
def smallest_claim(weight: InputTensor[rank=2, ...]) -> Int:
    """The smallest claim of a [out, in] weight's rows."""
    return smallest_claim[weight.dtype](weight.dim_size(1))


# Runs of keys a decoded token's attention reads side by side (4 beat 2 and 8).
comptime KEY_STREAMS = 4


@always_inline
def score_and_ask[
    ctype: DType
](
    key_cache: UnsafePointer[Scalar[ctype], _],
    value_cache: UnsafePointer[Scalar[ctype], _],
    query: UnsafePointer[Float32, _],
    head_dim: Int,
    t: Int,
) -> Float32:
    """q . k_t, and v_t asked for from memory (attend_one_head's third pass
    reads it from the cache)."""
    var k_row = key_cache + t * head_dim
    var v_row = value_cache + t * head_dim
    comptime line = LINE_BYTES // size_of[ctype]()
    for d in range(0, head_dim, line):
        prefetch(v_row + d)
    # One sum, not dot_widening's four: four runs of keys already keep four
    # dot products in flight, and more sums here only slowed the attention.
    var vector_end = head_dim - head_dim % WIDTH
    var dot = SIMD[DType.float32, WIDTH](0)
    for d in range(0, vector_end, WIDTH):
        var k = (k_row + d).load[width=WIDTH]().cast[DType.float32]()
        dot += (query + d).load[width=WIDTH]() * k
    var score = dot.reduce_add()
    for d in range(vector_end, head_dim):
        score += query[d] * k_row[d].cast[DType.float32]()
    return score


comptime GPT2_HEAD_DIM = 64  # every GPT-2's, from 124M to 1.5B


@always_inline
def weighted_values[
    vectors: Int, ctype: DType
](
    value_cache: UnsafePointer[Scalar[ctype], _],
    weights: UnsafePointer[Float32, _],
    count: Int,
    inverse: Float32,
    dest: UnsafePointer[mut=True, Float32, _],
):
    """dest = inverse * sum over t < count of weights[t] * v_t, for rows of
    `vectors` vectors: the sums stay in registers from the first row to the last."""
    comptime dim = vectors * WIDTH
    var sums = stack_allocation[vectors, SIMD[DType.float32, WIDTH]]()
    comptime for i in range(vectors):
        sums[i] = 0
    for t in range(count):
        var v_row = value_cache + t * dim
        var weight = weights[t]
        comptime for i in range(vectors):
            sums[i] += weight * (v_row + i * WIDTH).load[width=WIDTH]().cast[DType.float32]()
    comptime for i in range(vectors):
        (dest + i * WIDTH).store(sums[i] * inverse)


def attend_one_head[
    ctype: DType
](
    key_cache: UnsafePointer[Scalar[ctype], _],
    value_cache: UnsafePointer[Scalar[ctype], _],
    query: UnsafePointer[Float32, _],
    dest: UnsafePointer[mut=True, Float32, _],
    head_dim: Int,
    position: Int,
    scores: UnsafePointer[mut=True, Float32, _],
):
    """dest = softmax(q . k_t / sqrt(head_dim)) over t = 0..position, times v_t;
    key_cache and value_cache point at this head's [context, head_dim]
    (float32, or bfloat16 widened as it is read); `scores` is scratch for
    position + 1 floats.
    In three passes, none of which waits on the position before it: the
    scores, KEY_STREAMS runs of keys side by side with each key's values
    asked for from memory; their exponentials, a vector at a time; the
    weighted values, read from the cache. A softmax computed online (a
    running maximum and sum, one pass) chains two exponentials from each
    position to the next, and on a core that keeps few reads in flight that
    chain, not the memory, sets the attention's pace."""
    var scale = Float32(1.0) / sqrt(Float32(head_dim))
    var vector_end = head_dim - head_dim % WIDTH
    var count = position + 1
    var highest = Float32.MIN
    # KEY_STREAMS streams of keys side by side, each a run of the positions,
    # and beside each its values' rows asked for.
    var part = count // KEY_STREAMS
    for t in range(part):
        var dots = SIMD[DType.float32, KEY_STREAMS](0)
        comptime for s in range(KEY_STREAMS):
            dots[s] = score_and_ask[ctype](key_cache, value_cache, query, head_dim, t + s * part)
        dots *= scale
        comptime for s in range(KEY_STREAMS):
            scores[t + s * part] = dots[s]
        highest = max(highest, dots.reduce_max())
    for t in range(KEY_STREAMS * part, count):
        var score = score_and_ask[ctype](key_cache, value_cache, query, head_dim, t) * scale
        scores[t] = score
        highest = max(highest, score)
    # The weights exp(score - highest), in place of the scores, and their sum.
    var sums = SIMD[DType.float32, WIDTH](0)
    var t = 0
    while t + WIDTH <= count:
        var weights = exp((scores + t).load[width=WIDTH]() - highest)
        (scores + t).store(weights)
        sums += weights
        t += WIDTH
    var total = sums.reduce_add()
    for tail_t in range(t, count):
        var weight = exp(scores[tail_t] - highest)
        scores[tail_t] = weight
        total += weight
    var inverse = 1 / total
    comptime if GPT2_HEAD_DIM % WIDTH == 0:
        if head_dim == GPT2_HEAD_DIM:  # the sums in registers (4 of AVX-512, 8 of AVX2)
            weighted_values[GPT2_HEAD_DIM // WIDTH](value_cache, scores, count, inverse, dest)
            return
    for d in range(head_dim):
        dest[d] = 0
    for t_v in range(count):
        var v_row = value_cache + t_v * head_dim
        var weight = scores[t_v]
        for d in range(0, vector_end, WIDTH):
            var v = (v_row + d).load[width=WIDTH]().cast[DType.float32]()
            (dest + d).store((dest + d).load[width=WIDTH]() + weight * v)
        for d in range(vector_end, head_dim):
            dest[d] += weight * v_row[d].cast[DType.float32]()
    for d in range(head_dim):
        dest[d] *= inverse


# A block's parameters, in the order the decode kernels take them: the layer
# norms' and biases' vectors as [1, n] matrices, so that all of a token's
# blocks fit in one group of rank-2 inputs of one dtype.
comptime LN_1_WEIGHT = 0
comptime LN_1_BIAS = 1
comptime C_ATTN_WEIGHT = 2
comptime C_ATTN_BIAS = 3
comptime ATTN_PROJ_WEIGHT = 4
comptime ATTN_PROJ_BIAS = 5
comptime LN_2_WEIGHT = 6
comptime LN_2_BIAS = 7
comptime C_FC_WEIGHT = 8
comptime C_FC_BIAS = 9
comptime MLP_PROJ_WEIGHT = 10
comptime MLP_PROJ_BIAS = 11
comptime BLOCK_PARAMETERS = 12


def block_shapes_error(
    dims: UnsafePointer[Int, _], blocks: Int, embed: Int, inner: Int
) -> String:
    """Why the blocks' parameters do not fit GPT-2 blocks of width `embed`
    and MLP width `inner`, or "" when they do. dims holds each parameter's
    [rows, columns]."""
    # (parameter, rows, columns) as a GPT-2 block holds them: one list for
    # every block, built once a call.
    var expected: List[Tuple[Int, Int, Int]] = [
        (LN_1_WEIGHT, 1, embed), (LN_1_BIAS, 1, embed),
        (C_ATTN_WEIGHT, 3 * embed, embed), (C_ATTN_BIAS, 1, 3 * embed),
        (ATTN_PROJ_WEIGHT, embed, embed), (ATTN_PROJ_BIAS, 1, embed),
        (LN_2_WEIGHT, 1, embed), (LN_2_BIAS, 1, embed),
        (C_FC_WEIGHT, inner, embed), (C_FC_BIAS, 1, inner),
        (MLP_PROJ_WEIGHT, embed, inner), (MLP_PROJ_BIAS, 1, embed),
    ]
    for block in range(blocks):
        var d = dims + 2 * BLOCK_PARAMETERS * block
        for entry in expected:
            var k = entry[0]
            if d[2 * k] != entry[1] or d[2 * k + 1] != entry[2]:
                return String(
                    "gpt2_decode_blocks: block ", block, "'s parameter ", k, " is [",
                    d[2 * k], ", ", d[2 * k + 1], "], not [", entry[1], ", ", entry[2], "]",
                )
    return ""


def decode_blocks[
    use_bf16_dot: Bool
](
    output: OutputTensor[dtype = DType.float32, rank=3, ...],
    key_cache: MutableInputTensor[rank=5, ...],
    value_cache: MutableInputTensor[rank=5, ...],
    hidden: InputTensor[dtype = DType.float32, rank=3, ...],
    epsilon: InputTensor[dtype = DType.float32, rank=1, ...],
    start: InputTensor[dtype = DType.int64, rank=1, ...],
    first_layer: InputTensor[dtype = DType.int64, rank=1, ...],
    parameters: InputVariadicTensors[rank=2, ...],
) raises:
    """hidden [batch, 1, embed] -> output [batch, 1, embed] through one or
    more GPT-2 blocks in a row (BLOCK_PARAMETERS parameters each), writing
    this token's key and value at position `start` of layers first_layer,
    first_layer + 1, ... in the caches [layers, batch, heads, context,
    head_dim]. epsilon holds each block's two layer norms' epsilons."""
    comptime wtype = parameters.dtype
    comptime count = parameters.size
    comptime ctype = key_cache.dtype  # the caches' (float32 or bfloat16)
    var batch = hidden.dim_size(0)
    var embed = hidden.dim_size(2)
    var heads = key_cache.dim_size(2)
    var head_dim = key_cache.dim_size(4)
    var context = key_cache.dim_size(3)
    var first = Int(first_layer.unsafe_ptr()[0])
    var position = Int(start.unsafe_ptr()[0])
    var eps = epsilon.unsafe_ptr()
    comptime if count == 0 or count % BLOCK_PARAMETERS != 0:
        raise Error("gpt2_decode_blocks: the parameters must be whole blocks of 12")
    var blocks = count // BLOCK_PARAMETERS
    if position < 0 or position >= context:
        raise Error("gpt2_decode_blocks: position beyond the cache")
    if first < 0 or first + blocks > key_cache.dim_size(0):
        raise Error("gpt2_decode_blocks: more blocks than the caches' layers")
    if hidden.dim_size(1) != 1 or heads * head_dim != embed:
        raise Error("gpt2_decode_blocks: hidden must be [batch, 1, heads * head_dim]")
    if key_cache.dim_size(1) != batch or value_cache.dim_size(1) != batch:
        raise Error("gpt2_decode_blocks: the caches must hold the same batch as hidden")
    comptime if value_cache.dtype != ctype:
        raise Error("gpt2_decode_blocks: the key and value caches must have one dtype")
    if epsilon.dim_size(0) != 2 * blocks:
        raise Error("gpt2_decode_blocks: epsilon must hold two layer norms' epsilons a block")

    # Each parameter's address and [rows, columns], read once: the workers
    # index them at run time, which the inputs' group allows only at compile time.
    var weights = alloc[UnsafePointer[Scalar[wtype], MutUntrackedOrigin]](count)
    var dims = alloc[Int](2 * count)
    var contiguous = True
    comptime for k in range(count):
        var strides = parameters[k].strides()
        dims[2 * k] = parameters[k].dim_size(0)
        dims[2 * k + 1] = parameters[k].dim_size(1)
        if strides[1] != 1 or (dims[2 * k] > 1 and strides[0] != dims[2 * k + 1]):
            contiguous = False
        weights[k] = UnsafePointer[Scalar[wtype], MutUntrackedOrigin](
            unsafe_from_address=Int(parameters[k].unsafe_ptr())
        )
    var inner = dims[2 * C_FC_WEIGHT]  # the first block's; every block's, checked
    var problem = block_shapes_error(dims, blocks, embed, inner)
    if not contiguous:
        problem = "gpt2_decode_blocks: every parameter must be contiguous"
    if problem:
        weights.free()
        dims.free()
        raise Error(problem)

    # Scratch, each [batch, width] and contiguous: the residual stream, the
    # normed input of a projection (float32 and bfloat16), qkv, the heads'
    # output, the MLP's inner activations.
    var residual = alloc[Float32](batch * embed)
    var normed = alloc[Float32](batch * embed)
    var normed16 = alloc[BFloat16](batch * embed)
    var qkv = alloc[Float32](batch * 3 * embed)
    var attended = alloc[Float32](batch * embed)
    var attended16 = alloc[BFloat16](batch * embed)
    var activated = alloc[Float32](batch * inner)
    var activated16 = alloc[BFloat16](batch * inner)
    var counters = new_counters(2 * STEPS * blocks)
    var workers = num_physical_cores()
    var scores = alloc[Float32](workers * context)  # each worker's attention scratch
    var h_strides = hidden.strides()
    var h_in = hidden.unsafe_ptr()
    for b in range(batch):
        for i in range(embed):
            residual[b * embed + i] = h_in[b * h_strides[0] + i * h_strides[2]]
    var o_strides = output.strides()
    var o_ptr = output.unsafe_ptr()
    var kc = key_cache.unsafe_ptr()
    var vc = value_cache.unsafe_ptr().bitcast[Scalar[ctype]]()
    var claim_embed = smallest_claim[wtype](embed)
    var claim_inner = smallest_claim[wtype](inner)

    def worker(index: Int) {var}:
        for block in range(blocks):
            var p = weights + BLOCK_PARAMETERS * block
            var c = counters + 2 * STEPS * block * COUNTER_STRIDE
            var layer = first + block
            # 0: layer norm 1, a row of the batch at a time.
            var done = 0
            var rows = claim(c, 0, batch, 1, workers)
            while rows[0] < rows[1]:
                for b in range(rows[0], rows[1]):
                    layer_norm_row(
                        residual + b * embed, p[LN_1_WEIGHT], p[LN_1_BIAS], eps[2 * block],
                        normed + b * embed, normed16 + b * embed, embed,
                    )
                done += rows[1] - rows[0]
                rows = claim(c, 0, batch, 1, workers)
            finished(c, 0, done)
            wait_for_step(c, 0, batch)
            # 1: qkv = c_attn(normed).
            done = 0
            rows = claim(c, 1, 3 * embed, claim_embed, workers, STREAMS)
            while rows[0] < rows[1]:
                project_chunk[use_bf16_dot](
                    p[C_ATTN_WEIGHT], 3 * embed, embed, rows[0], rows[1], batch,
                    normed, normed16, qkv,
                )
                for b in range(batch):
                    for n in range(rows[0], rows[1]):
                        qkv[b * 3 * embed + n] += at(p[C_ATTN_BIAS], n)
                done += rows[1] - rows[0]
                rows = claim(c, 1, 3 * embed, claim_embed, workers, STREAMS)
            finished(c, 1, done)
            wait_for_step(c, 1, 3 * embed)
            # 2: attention, a (sequence, head) at a time: this token's key and
            # value into the caches, then the head's output over 0..position.
            done = 0
            rows = claim(c, 2, batch * heads, 1, workers)
            while rows[0] < rows[1]:
                for bh in range(rows[0], rows[1]):
                    var b = bh // heads
                    var h = bh % heads
                    var slot = ((layer * batch + b) * heads + h) * context * head_dim
                    var query = qkv + b * 3 * embed + h * head_dim
                    var cached = slot + position * head_dim
                    cast_values(query + embed, kc + cached, head_dim)
                    cast_values(query + 2 * embed, vc + cached, head_dim)
                    var head_out = attended + b * embed + h * head_dim
                    attend_one_head(
                        kc + slot, vc + slot, query, head_out, head_dim, position,
                        scores + index * context,
                    )
                    var head_out16 = attended16 + b * embed + h * head_dim
                    for d in range(head_dim):
                        head_out16[d] = head_out[d].cast[DType.bfloat16]()
                done += rows[1] - rows[0]
                rows = claim(c, 2, batch * heads, 1, workers)
            finished(c, 2, done)
            wait_for_step(c, 2, batch * heads)
            # 3: residual += c_proj(attended). The product goes to `normed`,
            # free until step 4 reads the residual.
            done = 0
            rows = claim(c, 3, embed, claim_embed, workers, STREAMS)
            while rows[0] < rows[1]:
                project_chunk[use_bf16_dot](
                    p[ATTN_PROJ_WEIGHT], embed, embed, rows[0], rows[1], batch,
                    attended, attended16, normed,
                )
                for b in range(batch):
                    for n in range(rows[0], rows[1]):
                        var product = normed[b * embed + n]
                        residual[b * embed + n] += product + at(p[ATTN_PROJ_BIAS], n)
                done += rows[1] - rows[0]
                rows = claim(c, 3, embed, claim_embed, workers, STREAMS)
            finished(c, 3, done)
            wait_for_step(c, 3, embed)
            # 4: layer norm 2.
            done = 0
            rows = claim(c, 4, batch, 1, workers)
            while rows[0] < rows[1]:
                for b in range(rows[0], rows[1]):
                    layer_norm_row(
                        residual + b * embed, p[LN_2_WEIGHT], p[LN_2_BIAS], eps[2 * block + 1],
                        normed + b * embed, normed16 + b * embed, embed,
                    )
                done += rows[1] - rows[0]
                rows = claim(c, 4, batch, 1, workers)
            finished(c, 4, done)
            wait_for_step(c, 4, batch)
            # 5: activated = gelu(c_fc(normed)).
            done = 0
            rows = claim(c, 5, inner, claim_embed, workers, STREAMS)
            while rows[0] < rows[1]:
                project_chunk[use_bf16_dot](
                    p[C_FC_WEIGHT], inner, embed, rows[0], rows[1], batch,
                    normed, normed16, activated,
                )
                for b in range(batch):
                    var row = b * inner
                    bias_gelu(activated + row, activated16 + row, p[C_FC_BIAS], rows[0], rows[1])
                done += rows[1] - rows[0]
                rows = claim(c, 5, inner, claim_embed, workers, STREAMS)
            finished(c, 5, done)
            wait_for_step(c, 5, inner)
            # 6: residual += c_proj(activated), the product in `attended`
            # (free since step 3); after the last block, the output.
            done = 0
            var last_block = block == blocks - 1
            rows = claim(c, 6, embed, claim_inner, workers, STREAMS)
            while rows[0] < rows[1]:
                project_chunk[use_bf16_dot](
                    p[MLP_PROJ_WEIGHT], embed, inner, rows[0], rows[1], batch,
                    activated, activated16, attended,
                )
                for b in range(batch):
                    for n in range(rows[0], rows[1]):
                        var product = attended[b * embed + n]
                        var sum = residual[b * embed + n] + product + at(p[MLP_PROJ_BIAS], n)
                        residual[b * embed + n] = sum
                        if last_block:
                            o_ptr[b * o_strides[0] + n * o_strides[2]] = sum
                done += rows[1] - rows[0]
                rows = claim(c, 6, embed, claim_inner, workers, STREAMS)
            if not last_block:  # the next block's layer norm reads all of it
                finished(c, 6, done)
                wait_for_step(c, 6, embed)

    parallelize(worker, workers)
    weights.free()
    dims.free()
    residual.free()
    normed.free()
    normed16.free()
    qkv.free()
    attended.free()
    attended16.free()
    activated.free()
    activated16.free()
    counters.free()
    scores.free()


@extensibility.register("gpt2_decode_blocks")
struct DecodeBlocks:
    """One decoded token through one or more GPT-2 blocks in a row
    (decode_blocks), bfloat16 weights through the CPU's dot products where
    the kernels have them."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=3, ...],
        key_cache: MutableInputTensor[rank=5, ...],
        value_cache: MutableInputTensor[rank=5, ...],
        hidden: InputTensor[dtype = DType.float32, rank=3, ...],
        epsilon: InputTensor[dtype = DType.float32, rank=1, ...],
        start: InputTensor[dtype = DType.int64, rank=1, ...],
        first_layer: InputTensor[dtype = DType.int64, rank=1, ...],
        parameters: InputVariadicTensors[rank=2, ...],
    ) raises:
        comptime if BF16_DOT_BUILT:
            if cpu_has_bf16_dot():
                decode_blocks[True](
                    output, key_cache, value_cache, hidden, epsilon, start, first_layer, parameters
                )
                return
        decode_blocks[False](
            output, key_cache, value_cache, hidden, epsilon, start, first_layer, parameters
        )


@extensibility.register("gpt2_decode_blocks_widening")
struct DecodeBlocksWidening:
    """gpt2_decode_blocks with bfloat16 weights widened to float32 whatever
    the machine: the path of a CPU without AVX512_BF16, for the tests and
    the benchmark on one that has them."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=3, ...],
        key_cache: MutableInputTensor[rank=5, ...],
        value_cache: MutableInputTensor[rank=5, ...],
        hidden: InputTensor[dtype = DType.float32, rank=3, ...],
        epsilon: InputTensor[dtype = DType.float32, rank=1, ...],
        start: InputTensor[dtype = DType.int64, rank=1, ...],
        first_layer: InputTensor[dtype = DType.int64, rank=1, ...],
        parameters: InputVariadicTensors[rank=2, ...],
    ) raises:
        decode_blocks[False](
            output, key_cache, value_cache, hidden, epsilon, start, first_layer, parameters
        )
