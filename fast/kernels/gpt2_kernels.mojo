"""CPU kernels for fast/gpt2.py: one token's projections and attention.

Decoding one token is memory-bound: each weight is read once and used for one
multiply-add, so the time is the weights' bytes over the memory bandwidth.
These kernels read every weight row exactly once, in order, and spread the
rows over the cores. bfloat16 weights cost half the bytes: on a CPU with
AVX512_BF16 they are multiplied as they are, by its bfloat16 dot products,
which also run a prompt's many rows in register tiles; elsewhere they are
widened to float32 in registers.
"""

from std.math import exp
from std.memory import alloc, stack_allocation
from std.sys.info import CompilationTarget, simd_width_of, size_of
from std.sys.intrinsics import llvm_intrinsic, prefetch
from max.algorithm import parallelize
import extensibility
from extensibility import InputTensor, OutputTensor
from extensibility.managed_tensor_slice import _MutableInputTensor as MutableInputTensor

# float32 lanes in one vector register of the machine the kernels are built
# for (MAX builds them on it): 16 with AVX-512, 8 with AVX2, 4 with NEON.
comptime WIDTH = simd_width_of[DType.float32]()
comptime ROWS_PER_TASK = 32  # weight rows one parallel task reads
comptime LINE_BYTES = 64  # one cache line
# vdpbf16ps (AVX512_BF16): each float32 lane adds the products of a pair of
# bfloat16 lanes, so one instruction does 32 multiply-adds on 64 bytes of
# weights, where widening them to float32 first takes two loads, two
# conversions and two FMAs.
comptime HAS_BF16_DOT = CompilationTarget._has_feature["avx512bf16"]()
comptime PAIRS = 32  # bfloat16 lanes one vdpbf16ps reads from each operand
comptime BF16_TILE = 4  # the many-row product: 4 rows of x by 4 weight rows
# Below 8 rows the weights' stream from memory sets the time, and one row at
# a time in memory order streams faster than four rows interleaved; from 8
# rows on the arithmetic does, and the tiles do it twice as fast (the
# profile's table by row count, docs/src/performance.md).
comptime BF16_TILES_FROM = 8


@always_inline
def dot_pairs(
    sums: SIMD[DType.float32, 16],
    a: SIMD[DType.bfloat16, PAIRS],
    b: SIMD[DType.bfloat16, PAIRS],
) -> SIMD[DType.float32, 16]:
    """sums[i] += a[2i] * b[2i] + a[2i + 1] * b[2i + 1] (vdpbf16ps)."""
    return llvm_intrinsic["llvm.x86.avx512bf16.dpbf16ps.512", SIMD[DType.float32, 16]](
        sums, a, b
    )


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
        comptime if weight.dtype == DType.bfloat16 and HAS_BF16_DOT:
            linear_rows_bf16_dot(output, x, weight, bias)
        else:
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


@extensibility.register("gpt2_bf16_dot_available")
struct Bf16DotAvailable:
    """[1] if these kernels were built with AVX512_BF16's dot products, else
    [0]: whether gpt2_linear_rows multiplies bfloat16 weights as they are,
    as the compiler that built it, not /proc/cpuinfo, decides."""

    @staticmethod
    def execute[target: StaticString](output: OutputTensor[dtype = DType.int32, rank=1, ...]):
        output.unsafe_ptr()[0] = 1 if HAS_BF16_DOT else 0


def contiguous_weight(weight: InputTensor[rank=2, ...]) raises:
    var w_strides = weight.strides()
    if w_strides[1] != 1 or w_strides[0] != weight.dim_size(1):
        raise Error("gpt2_linear_rows: the weight must be a contiguous [out, in] matrix")


def linear_rows_widening(
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
    var vector_end = n_in - n_in % WIDTH
    var pair_end = n_in - n_in % (2 * WIDTH)

    def task(index: Int) {var}:
        var first = index * ROWS_PER_TASK
        var last = min(first + ROWS_PER_TASK, n_out)
        var n_start = first
        comptime if size_of[weight.dtype]() == 4:
            if rows == 1:
                # One token, float32 weights: the rows one after the other,
                # in memory order, four sums over consecutive chunks of a
                # row so that four loads are in flight: 10-25% faster than
                # the four interleaved rows below (docs/src/performance.md,
                # "What stands between the kernels and the ceiling").
                for n in range(first, last):
                    var w_row = w_ptr + n * n_in
                    var a0 = SIMD[DType.float32, WIDTH](0)
                    var a1 = SIMD[DType.float32, WIDTH](0)
                    var a2 = SIMD[DType.float32, WIDTH](0)
                    var a3 = SIMD[DType.float32, WIDTH](0)
                    var k = 0
                    while k + 4 * WIDTH <= n_in:
                        var w = w_row + k
                        var xk = x_ptr + k
                        a0 += w.load[width=WIDTH]().cast[DType.float32]() * xk.load[width=WIDTH]()
                        w += WIDTH
                        xk += WIDTH
                        a1 += w.load[width=WIDTH]().cast[DType.float32]() * xk.load[width=WIDTH]()
                        w += WIDTH
                        xk += WIDTH
                        a2 += w.load[width=WIDTH]().cast[DType.float32]() * xk.load[width=WIDTH]()
                        w += WIDTH
                        xk += WIDTH
                        a3 += w.load[width=WIDTH]().cast[DType.float32]() * xk.load[width=WIDTH]()
                        k += 4 * WIDTH
                    while k + WIDTH <= n_in:
                        a0 += (w_row + k).load[width=WIDTH]().cast[DType.float32]() * (
                            x_ptr + k
                        ).load[width=WIDTH]()
                        k += WIDTH
                    var total = ((a0 + a1) + (a2 + a3)).reduce_add()
                    for tail_k in range(k, n_in):
                        total += w_row[tail_k].cast[DType.float32]() * x_ptr[tail_k]
                    out_ptr[n * out_strides[1]] = total + b_ptr[n * b_stride]
                n_start = last
        if rows == 1:
                while n_start < last:
                    var w_row = w_ptr + n_start * n_in
                    var a0 = SIMD[DType.float32, WIDTH](0)
                    var a1 = SIMD[DType.float32, WIDTH](0)
                    var a2 = SIMD[DType.float32, WIDTH](0)
                    var a3 = SIMD[DType.float32, WIDTH](0)
                    var k = 0
                    while k + 4 * WIDTH <= n_in:
                        a0 += (w_row + k).load[width=WIDTH]().cast[DType.float32]() * (x_ptr + k).load[width=WIDTH]()
                        a1 += (w_row + k + WIDTH).load[width=WIDTH]().cast[DType.float32]() * (x_ptr + k + WIDTH).load[width=WIDTH]()
                        a2 += (w_row + k + 2 * WIDTH).load[width=WIDTH]().cast[DType.float32]() * (x_ptr + k + 2 * WIDTH).load[width=WIDTH]()
                        a3 += (w_row + k + 3 * WIDTH).load[width=WIDTH]().cast[DType.float32]() * (x_ptr + k + 3 * WIDTH).load[width=WIDTH]()
                        k += 4 * WIDTH
                    while k + WIDTH <= n_in:
                        a0 += (w_row + k).load[width=WIDTH]().cast[DType.float32]() * (x_ptr + k).load[width=WIDTH]()
                        k += WIDTH
                    var total = ((a0 + a1) + (a2 + a3)).reduce_add()
                    while k < n_in:
                        total += w_row[k].cast[DType.float32]() * x_ptr[k]
                        k += 1
                    out_ptr[n_start * out_strides[1]] = total + b_ptr[n_start * b_stride]
                    n_start += 1
        if rows == 1 and n_start < last:
            # One token (decoding), bfloat16 weights widened: four weight
            # rows at a time, each with its own sum, share every load of x
            # and keep four streams of loads in flight.
            while n_start + 4 <= last:
                var w0 = w_ptr + n_start * n_in
                var w1 = w0 + n_in
                var w2 = w1 + n_in
                var w3 = w2 + n_in
                var a0 = SIMD[DType.float32, WIDTH](0)
                var a1 = SIMD[DType.float32, WIDTH](0)
                var a2 = SIMD[DType.float32, WIDTH](0)
                var a3 = SIMD[DType.float32, WIDTH](0)
                for k in range(0, vector_end, WIDTH):
                    comptime if size_of[weight.dtype]() < 4:
                        # bfloat16: ask for the next four rows' line now.
                        # Left to itself, the hardware prefetcher falls
                        # behind four interleaved streams of half-width
                        # loads (docs/src/performance.md, bfloat16).
                        if k % (LINE_BYTES // size_of[weight.dtype]()) == 0:
                            prefetch(w0 + k + 4 * n_in)
                            prefetch(w1 + k + 4 * n_in)
                            prefetch(w2 + k + 4 * n_in)
                            prefetch(w3 + k + 4 * n_in)
                    var xk = (x_ptr + k).load[width=WIDTH]()
                    a0 += (w0 + k).load[width=WIDTH]().cast[DType.float32]() * xk
                    a1 += (w1 + k).load[width=WIDTH]().cast[DType.float32]() * xk
                    a2 += (w2 + k).load[width=WIDTH]().cast[DType.float32]() * xk
                    a3 += (w3 + k).load[width=WIDTH]().cast[DType.float32]() * xk
                var t0 = a0.reduce_add()
                var t1 = a1.reduce_add()
                var t2 = a2.reduce_add()
                var t3 = a3.reduce_add()
                for k in range(vector_end, n_in):
                    t0 += w0[k].cast[DType.float32]() * x_ptr[k]
                    t1 += w1[k].cast[DType.float32]() * x_ptr[k]
                    t2 += w2[k].cast[DType.float32]() * x_ptr[k]
                    t3 += w3[k].cast[DType.float32]() * x_ptr[k]
                var col = out_strides[1]
                out_ptr[n_start * col] = t0 + b_ptr[n_start * b_stride]
                out_ptr[(n_start + 1) * col] = t1 + b_ptr[(n_start + 1) * b_stride]
                out_ptr[(n_start + 2) * col] = t2 + b_ptr[(n_start + 2) * b_stride]
                out_ptr[(n_start + 3) * col] = t3 + b_ptr[(n_start + 3) * b_stride]
                n_start += 4
        for n in range(n_start, last):
            var w_row = w_ptr + n * n_in
            var b = b_ptr[n * b_stride]
            var m = 0
            while m + 4 <= rows:
                var x0 = x_ptr + m * n_in
                var x1 = x0 + n_in
                var x2 = x1 + n_in
                var x3 = x2 + n_in
                var a0 = SIMD[DType.float32, WIDTH](0)
                var a1 = SIMD[DType.float32, WIDTH](0)
                var a2 = SIMD[DType.float32, WIDTH](0)
                var a3 = SIMD[DType.float32, WIDTH](0)
                for k in range(0, vector_end, WIDTH):
                    var w = (w_row + k).load[width=WIDTH]().cast[DType.float32]()
                    a0 += w * (x0 + k).load[width=WIDTH]()
                    a1 += w * (x1 + k).load[width=WIDTH]()
                    a2 += w * (x2 + k).load[width=WIDTH]()
                    a3 += w * (x3 + k).load[width=WIDTH]()
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
                # One row: two sums over alternate chunks, so that an FMA
                # need not wait for the one before it.
                var x_row = x_ptr + m * n_in
                var even = SIMD[DType.float32, WIDTH](0)
                var odd = SIMD[DType.float32, WIDTH](0)
                for k in range(0, pair_end, 2 * WIDTH):
                    var w0 = (w_row + k).load[width=WIDTH]().cast[DType.float32]()
                    var w1 = (w_row + k + WIDTH).load[width=WIDTH]().cast[DType.float32]()
                    even += w0 * (x_row + k).load[width=WIDTH]()
                    odd += w1 * (x_row + k + WIDTH).load[width=WIDTH]()
                for k in range(pair_end, vector_end, WIDTH):
                    var w = (w_row + k).load[width=WIDTH]().cast[DType.float32]()
                    even += w * (x_row + k).load[width=WIDTH]()
                var total = (even + odd).reduce_add()
                for k in range(vector_end, n_in):
                    total += w_row[k].cast[DType.float32]() * x_row[k]
                out_ptr[m * out_strides[0] + n * out_strides[1]] = total + b
                m += 1

    parallelize(task, (n_out + ROWS_PER_TASK - 1) // ROWS_PER_TASK)
    x_rows.free()


def linear_rows_bf16_dot(
    output: OutputTensor[dtype = DType.float32, rank=2, ...],
    x: InputTensor[dtype = DType.float32, rank=2, ...],
    weight: InputTensor[rank=2, ...],
    bias: InputTensor[dtype = DType.float32, rank=1, ...],
) raises:
    """bfloat16 weights through vdpbf16ps, x rounded to bfloat16 once.

    A few rows of x (decoding, a small batch) take the weight rows one after
    the other, in memory order. Eight rows or more (a prompt) go four by four
    against four weight rows: sixteen sums in registers, so that each load,
    of a weight or of x, feeds four dot products and the product runs at the
    dot-product units' speed rather than the loads'."""
    var rows = x.dim_size(0)
    var n_out = weight.dim_size(0)
    var n_in = weight.dim_size(1)
    contiguous_weight(weight)
    var x_rows = alloc[BFloat16](rows * n_in)
    var x_strides = x.strides()
    var x_in = x.unsafe_ptr()
    var vector_end = n_in - n_in % WIDTH
    for m in range(rows):
        var row_in = x_in + m * x_strides[0]
        var row_out = x_rows + m * n_in
        var k = 0
        if x_strides[1] == 1:
            while k < vector_end:
                (row_out + k).store((row_in + k).load[width=WIDTH]().cast[DType.bfloat16]())
                k += WIDTH
        while k < n_in:
            row_out[k] = row_in[k * x_strides[1]].cast[DType.bfloat16]()
            k += 1
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

    def task(index: Int) {var}:
        var first = index * ROWS_PER_TASK
        var last = min(first + ROWS_PER_TASK, n_out)
        var tiled_rows = rows - rows % BF16_TILE if rows >= BF16_TILES_FROM else 0
        var n = first
        if tiled_rows > 0:
            while n + BF16_TILE <= last:
                for m in range(0, tiled_rows, BF16_TILE):
                    var sums = stack_allocation[BF16_TILE * BF16_TILE, SIMD[DType.float32, 16]]()
                    comptime for s in range(BF16_TILE * BF16_TILE):
                        sums[s] = 0
                    for k in range(0, dot_end, PAIRS):
                        comptime for j in range(BF16_TILE):
                            var w_row = w_ptr + (n + j) * n_in
                            # The next four rows' line: the first pass over
                            # these rows reads them from memory.
                            prefetch(w_row + k + BF16_TILE * n_in)
                            var w = (w_row + k).load[width=PAIRS]()
                            comptime for i in range(BF16_TILE):
                                var xk = (x_ptr + (m + i) * n_in + k).load[width=PAIRS]()
                                sums[i * BF16_TILE + j] = dot_pairs(sums[i * BF16_TILE + j], w, xk)
                    comptime for i in range(BF16_TILE):
                        comptime for j in range(BF16_TILE):
                            var total = sums[i * BF16_TILE + j].reduce_add()
                            total += tail(w_ptr + (n + j) * n_in, x_ptr + (m + i) * n_in)
                            store(m + i, n + j, total)
                n += BF16_TILE
        # The rows of x the tiles left (all of them below BF16_TILES_FROM)
        # against the weight rows one at a time, in memory order: one stream
        # that the hardware prefetcher follows.
        for n_row in range(first, last):
            var w_row = w_ptr + n_row * n_in
            var m_first = tiled_rows if n_row < n else 0
            for m in range(m_first, rows):
                var x_row = x_ptr + m * n_in
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
                store(m, n_row, (even + odd).reduce_add() + tail(w_row, x_row))

    parallelize(task, (n_out + ROWS_PER_TASK - 1) // ROWS_PER_TASK)
    x_rows.free()


@extensibility.register("gpt2_cache_write")
struct CacheWrite:
    """Writes new keys and values [batch, heads, seq, head_dim] into one
    layer's slots of the caches [layers, batch, heads, context, head_dim],
    at positions start .. start + seq."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        key_cache: MutableInputTensor[dtype = DType.float32, rank=5, ...],
        value_cache: MutableInputTensor[dtype = DType.float32, rank=5, ...],
        key: InputTensor[dtype = DType.float32, rank=4, ...],
        value: InputTensor[dtype = DType.float32, rank=4, ...],
        start: InputTensor[dtype = DType.int64, rank=1, ...],
        layer_index: InputTensor[dtype = DType.int64, rank=1, ...],
    ) raises:
        var layer = Int(layer_index.unsafe_ptr()[0])
        var batch = key.dim_size(0)
        var heads = key.dim_size(1)
        var seq = key.dim_size(2)
        var head_dim = key.dim_size(3)
        var context = key_cache.dim_size(3)
        var first = Int(start.unsafe_ptr()[0])
        if first < 0 or first + seq > context:
            raise Error("gpt2_cache_write: positions beyond the cache")
        var kc = key_cache.unsafe_ptr()
        var vc = value_cache.unsafe_ptr()
        var k_ptr = key.unsafe_ptr()
        var v_ptr = value.unsafe_ptr()
        var ks = key.strides()
        var vs = value.strides()
        for b in range(batch):
            for h in range(heads):
                var slot = ((layer * batch + b) * heads + h) * context + first
                for s in range(seq):
                    for d in range(head_dim):
                        var cached = (slot + s) * head_dim + d
                        kc[cached] = k_ptr[b * ks[0] + h * ks[1] + s * ks[2] + d * ks[3]]
                        vc[cached] = v_ptr[b * vs[0] + h * vs[1] + s * vs[2] + d * vs[3]]


@extensibility.register("gpt2_decode_attention")
struct DecodeAttention:
    """One new token per sequence: writes its key and value at position
    `start` of one layer's caches, then attends over positions 0 .. start.

    qkv: [batch, 1, 3 * embed], the c_attn projection as it comes (query,
    key, value side by side, each head's head_dim values together);
    output: [batch, 1, embed], the heads merged back. Reading the heads
    straight from qkv spares the graph a split, three reshapes and
    transposes into heads and one back, per layer. The softmax is computed
    online (running max and sum), in one pass over the cache, so no scores
    array is needed.
    """

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=3, ...],
        key_cache: MutableInputTensor[dtype = DType.float32, rank=5, ...],
        value_cache: MutableInputTensor[dtype = DType.float32, rank=5, ...],
        qkv: InputTensor[dtype = DType.float32, rank=3, ...],
        start: InputTensor[dtype = DType.int64, rank=1, ...],
        layer_index: InputTensor[dtype = DType.int64, rank=1, ...],
    ) raises:
        var layer = Int(layer_index.unsafe_ptr()[0])
        var batch = qkv.dim_size(0)
        var heads = key_cache.dim_size(2)
        var head_dim = key_cache.dim_size(4)
        var embed = heads * head_dim
        var context = key_cache.dim_size(3)
        var position = Int(start.unsafe_ptr()[0])
        if position < 0 or position >= context:
            raise Error("gpt2_decode_attention: position beyond the cache")
        if qkv.dim_size(1) != 1 or qkv.dim_size(2) != 3 * embed:
            raise Error("gpt2_decode_attention: qkv must be [batch, 1, 3 * heads * head_dim]")
        var kc = key_cache.unsafe_ptr()
        var vc = value_cache.unsafe_ptr()
        var qkv_in = qkv.unsafe_ptr()
        var out_ptr = output.unsafe_ptr()
        var qkv_strides = qkv.strides()
        var out_strides = output.strides()
        var scale = Float32(1.0) / Float32(head_dim).__pow__(Float32(0.5))
        var vector_end = head_dim - head_dim % WIDTH
        # Per (batch, head): its query and its running output, contiguous.
        var scratch = alloc[Float32](batch * heads * 2 * head_dim)

        def task(bh: Int) {var}:
            var b = bh // heads
            var h = bh % heads
            var base = ((layer * batch + b) * heads + h) * context * head_dim
            var q = scratch + bh * 2 * head_dim
            var acc = q + head_dim
            var row = b * qkv_strides[0]
            for d in range(head_dim):
                var column = (h * head_dim + d) * qkv_strides[2]
                q[d] = qkv_in[row + column]
                acc[d] = 0
                kc[base + position * head_dim + d] = qkv_in[row + column + embed * qkv_strides[2]]
                vc[base + position * head_dim + d] = qkv_in[
                    row + column + 2 * embed * qkv_strides[2]
                ]
            var running_max = Float32.MIN
            var running_sum = Float32(0)
            for t in range(position + 1):
                var k_row = kc + base + t * head_dim
                var v_row = vc + base + t * head_dim
                var dot = SIMD[DType.float32, WIDTH](0)
                for d in range(0, vector_end, WIDTH):
                    dot += (q + d).load[width=WIDTH]() * (k_row + d).load[width=WIDTH]()
                var score = dot.reduce_add()
                for d in range(vector_end, head_dim):
                    score += q[d] * k_row[d]
                score *= scale
                var new_max = max(running_max, score)
                var correction = exp(running_max - new_max)
                var weight = exp(score - new_max)
                running_sum = running_sum * correction + weight
                for d in range(0, vector_end, WIDTH):
                    var old = (acc + d).load[width=WIDTH]()
                    (acc + d).store(old * correction + weight * (v_row + d).load[width=WIDTH]())
                for d in range(vector_end, head_dim):
                    acc[d] = acc[d] * correction + weight * v_row[d]
                running_max = new_max
            for d in range(head_dim):
                out_ptr[b * out_strides[0] + (h * head_dim + d) * out_strides[2]] = (
                    acc[d] / running_sum
                )

        parallelize(task, batch * heads)
        scratch.free()

