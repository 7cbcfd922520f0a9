"""x times a weight held in ggml's blocks (Q8_0, Q4_0, Q4_1), read as the
file stores them, never widened to a float32 matrix in memory; and a table's
rows widened (a Llama's token embedding in blocks).

A weight is a uint8 matrix [out, blocks * BLOCK_BYTES]: each row the blocks
of one output's 32-weight runs along the input, in the file's layout:

- Q8_0 (34 bytes): a float16 scale d, 32 int8 values q; w = d * q.
- Q4_0 (18 bytes): a float16 scale d, 16 bytes of 4-bit levels (the low
  nibbles are weights 0-15, the high ones 16-31); w = d * (q - 8).
- Q4_1 (20 bytes): float16 d and m, the same 16 bytes; w = d * q + m.

A block's sum of w * x is d * sum(q * x) + m * sum(x): the levels are
widened and multiplied in float32 registers (Q4_0's with their 8 taken off
first, so that it needs no m), the block's sum(x) computed once per call for
every row, and only one scale a block is applied to a whole vector of sums.

Decoding a token reads every weight once: the time is the blocks' bytes over
the memory's rate. The rows are claimed by the cores as in linear_rows, and
each core reads STREAMS rows far apart side by side (more reads in flight).
A prompt's many rows widen each weight row once, into a float32 panel of
rows in the L2 cache, and multiply it with every row of x.
"""

from std.memory import alloc, stack_allocation
from std.sys.info import num_physical_cores
from max.algorithm import parallelize
import extensibility
from extensibility import InputTensor, OutputTensor
from .claims import claim, new_counters
from .cpu import STREAMS, WIDTH
from .dots import dot_widening, dot_widening_streams

comptime BLOCK = 32  # weights a block
comptime HALF = BLOCK // 2
comptime Q8_0 = 0
comptime Q4_0 = 1
comptime Q4_1 = 2
# Plain rows of float32 or bfloat16 in the one-call decode (llama_decode.mojo),
# measured in blocks of 32 weights there: dots.mojo's dot_widening_streams reads them.
comptime F32 = 3
comptime BF16 = 4
comptime CLAIM_BYTES = 32768  # the blocks' bytes of the smallest claim


@always_inline
def block_bytes[kind: Int]() -> Int:
    comptime if kind == Q8_0:
        return 2 + BLOCK
    elif kind == Q4_0:
        return 2 + HALF
    elif kind == F32:
        return 4 * BLOCK
    elif kind == BF16:
        return 2 * BLOCK
    else:
        return 4 + HALF


@always_inline
def half_float(at: UnsafePointer[UInt8, _]) -> Float32:
    """The little-endian float16 at `at`, as float32."""
    return at.bitcast[Float16]()[0].cast[DType.float32]()


@always_inline
def block_scales[kind: Int](block: UnsafePointer[UInt8, _]) -> Tuple[Float32, Float32]:
    """(d, m): the block's scale, and what each weight has added (see above)."""
    var d = half_float(block)
    comptime if kind == Q4_1:
        return (d, half_float(block + 2))
    else:
        return (d, Float32(0))


@always_inline
def chunk_levels[
    kind: Int, c: Int
](block: UnsafePointer[UInt8, _]) -> Tuple[SIMD[DType.float32, WIDTH], SIMD[DType.float32, WIDTH]]:
    """The levels of weights c * WIDTH onwards and of HALF + c * WIDTH onwards
    (c < HALF / WIDTH), as float32 (Q4_0's less 8).

    Bytes are widened to 32-bit lanes as they are loaded (one instruction),
    and a 4-bit level's two nibbles are taken from those lanes (lane j: weight
    j's low nibble, weight j + 16's high one): widening the 16 bytes to 32
    separate bytes first costs AVX2 three more shuffles a block."""
    comptime if kind == Q8_0:
        var values = (block + 2).bitcast[Int8]() + c * WIDTH
        return (
            values.load[width=WIDTH]().cast[DType.float32](),
            (values + HALF).load[width=WIDTH]().cast[DType.float32](),
        )
    else:
        var packed = block + block_bytes[kind]() - HALF + c * WIDTH
        var lanes = packed.load[width=WIDTH]().cast[DType.int32]()
        var low = lanes & 15
        var high = lanes >> 4
        comptime if kind == Q4_0:
            low -= 8
            high -= 8
        return (low.cast[DType.float32](), high.cast[DType.float32]())


def block_sums_of[
    kind: Int
](x: UnsafePointer[Float32, _], blocks: Int, sums: UnsafePointer[mut=True, Float32, _]):
    """sums[b] = x[32 b] + ... + x[32 b + 31], for each block b of x's row:
    only Q4_1's m multiplies them; for the other kinds nothing is computed."""
    comptime if kind != Q4_1:
        return
    for b in range(blocks):
        var at = x + b * BLOCK
        sums[b] = (at.load[width=HALF]() + (at + HALF).load[width=HALF]()).reduce_add()


@always_inline
def block_products[kind: Int](block: UnsafePointer[UInt8, _], x: UnsafePointer[Float32, _]) -> SIMD[DType.float32, WIDTH]:
    """The block's levels times its 32 numbers of x, added down to WIDTH lanes."""
    var sums = SIMD[DType.float32, WIDTH](0)
    comptime for c in range(HALF // WIDTH):
        var levels = chunk_levels[kind, c](block)
        sums += levels[0] * (x + c * WIDTH).load[width=WIDTH]()
        sums += levels[1] * (x + HALF + c * WIDTH).load[width=WIDTH]()
    return sums


@always_inline
def dot_rows_blocks[
    kind: Int, streams: Int
](
    first_row: UnsafePointer[UInt8, _],
    stride: Int,
    blocks: Int,
    x: UnsafePointer[Float32, _],
    x_sums: UnsafePointer[Float32, _],
) -> SIMD[DType.float32, streams]:
    """The rows first_row + s * stride (s < streams) times x, at once:
    `streams` reads in flight, each block's x read from the L1 cache."""
    comptime size = block_bytes[kind]()
    comptime if kind == F32 or kind == BF16:  # plain rows: GPT-2's dot, widening in registers
        comptime wtype = DType.float32 if kind == F32 else DType.bfloat16
        var rows = first_row.bitcast[Scalar[wtype]]()
        return dot_widening_streams[streams](rows, stride * BLOCK // size, x, blocks * BLOCK)
    # One register of sums and one number of m * sum(x) for each row (a
    # vector's lanes written one at a time would chain every block's adds).
    # A block's 32 products are added down to one register (WIDTH lanes)
    # before its scale: with AVX2's 16 registers, sums of 16 lanes (two
    # registers) for each of 8 rows would not fit and would go through memory.
    var level_sums = stack_allocation[streams, SIMD[DType.float32, WIDTH]]()
    var offsets = stack_allocation[streams, Float32]()
    comptime for s in range(streams):
        level_sums[s] = 0
        offsets[s] = 0
    for b in range(blocks):
        comptime for s in range(streams):
            var block = first_row + s * stride + b * size
            var scales = block_scales[kind](block)
            level_sums[s] += scales[0] * block_products[kind](block, x + b * BLOCK)
            comptime if kind == Q4_1:
                offsets[s] += scales[1] * x_sums[b]
    var totals = SIMD[DType.float32, streams](0)
    comptime for s in range(streams):
        totals[s] = offsets[s] + level_sums[s].reduce_add()
    return totals


@always_inline
def widen_row[
    kind: Int
](row: UnsafePointer[UInt8, _], blocks: Int, dest: UnsafePointer[mut=True, Float32, _]):
    """A row of blocks as float32 weights."""
    comptime size = block_bytes[kind]()
    for b in range(blocks):
        var block = row + b * size
        var scales = block_scales[kind](block)
        comptime for c in range(HALF // WIDTH):
            var levels = chunk_levels[kind, c](block)
            (dest + b * BLOCK + c * WIDTH).store(scales[0] * levels[0] + scales[1])
            (dest + b * BLOCK + HALF + c * WIDTH).store(scales[0] * levels[1] + scales[1])


comptime TILE = 4  # a prompt's weight rows multiplied at once
# ... by this many rows of x: TILE * X_TILE sums, a weight row's vector and an
# input's held in registers, 4 x 4 of them fill AVX-512's 32 registers, and
# would spill AVX2's 16 (4 x 2 fit).
comptime X_TILE = 4 if WIDTH >= 16 else 2
# A prompt's weight rows widened at once, and the bytes of x's rows taken
# against them at a time: both held in the L2 cache (up to 32 x 1536 x 4 =
# 192 KB and 128 KB), each x row read from memory once per PANEL weight rows.
comptime PANEL = 32
comptime X_CHUNK_BYTES = 131072


@always_inline
def tile_dots(
    w: UnsafePointer[Float32, _], x: UnsafePointer[Float32, _], n_in: Int
) -> SIMD[DType.float32, X_TILE * TILE]:
    """sums[i * TILE + t] = x's row i . w's row t, for X_TILE rows of x and
    TILE of w (rows n_in apart); n_in a multiple of WIDTH (whole blocks)."""
    var acc = stack_allocation[X_TILE * TILE, SIMD[DType.float32, WIDTH]]()
    comptime for i in range(X_TILE * TILE):
        acc[i] = 0
    for k in range(0, n_in, WIDTH):
        var weights = stack_allocation[TILE, SIMD[DType.float32, WIDTH]]()
        comptime for t in range(TILE):
            weights[t] = (w + t * n_in + k).load[width=WIDTH]()
        comptime for i in range(X_TILE):
            var inputs = (x + i * n_in + k).load[width=WIDTH]()
            comptime for t in range(TILE):
                acc[i * TILE + t] += weights[t] * inputs
    var sums = SIMD[DType.float32, X_TILE * TILE](0)
    comptime for i in range(X_TILE * TILE):
        sums[i] = acc[i].reduce_add()
    return sums


def check_blocks[kind: Int](weight: InputTensor[rank=2, ...], n_in: Int, name: StaticString) raises:
    var blocks = n_in // BLOCK
    if n_in % BLOCK != 0 or weight.dim_size(1) != blocks * block_bytes[kind]():
        raise Error(name, ": the weight must be [out, in / 32 * ", block_bytes[kind](), "] bytes")
    var strides = weight.strides()
    if strides[1] != 1 or strides[0] != weight.dim_size(1):
        raise Error(name, ": the weight must be contiguous")


def rows_times_blocks[
    kind: Int
](
    output: OutputTensor[dtype = DType.float32, rank=2, ...],
    x: InputTensor[dtype = DType.float32, rank=2, ...],
    weight: InputTensor[dtype = DType.uint8, rank=2, ...],
    name: StaticString,
) raises:
    """output[m, n] = x[m, :] . W[n, :], W the blocks of `kind` in weight."""
    var rows = x.dim_size(0)
    var n_in = x.dim_size(1)
    var n_out = weight.dim_size(0)
    check_blocks[kind](weight, n_in, name)
    if output.dim_size(0) != rows or output.dim_size(1) != n_out:
        raise Error(name, ": the output must be [rows, out]")
    var blocks = n_in // BLOCK
    comptime size = block_bytes[kind]()
    var row_bytes = blocks * size
    # x contiguous, with each block's sum once for all weight rows.
    var x_rows = alloc[Float32](rows * n_in)
    var x_sums = alloc[Float32](rows * blocks)
    var x_strides = x.strides()
    var x_in = x.unsafe_ptr()
    for m in range(rows):
        for k in range(n_in):
            x_rows[m * n_in + k] = x_in[m * x_strides[0] + k * x_strides[1]]
        block_sums_of[kind](x_rows + m * n_in, blocks, x_sums + m * blocks)
    var w_ptr = weight.unsafe_ptr()
    var out_ptr = output.unsafe_ptr()
    var out_strides = output.strides()

    def one_token(first: Int, last: Int) {var}:
        # STREAMS equal parts of the rows side by side, then the rows left.
        var part = (last - first) // STREAMS
        for i in range(part):
            var n = first + i
            var dots = dot_rows_blocks[kind, STREAMS](
                w_ptr + n * row_bytes, part * row_bytes, blocks, x_rows, x_sums
            )
            comptime for s in range(STREAMS):
                out_ptr[(n + s * part) * out_strides[1]] = dots[s]
        for n in range(first + STREAMS * part, last):
            var dot = dot_rows_blocks[kind, 1](w_ptr + n * row_bytes, 0, blocks, x_rows, x_sums)
            out_ptr[n * out_strides[1]] = dot[0]

    def many_tokens(first: Int, last: Int) {var}:
        # PANEL weight rows widened at a time, then x in chunks of `chunk`
        # rows, each chunk against TILE of the panel's rows at a time: TILE x
        # X_TILE sums in registers, each load of a weight or an input feeding
        # several multiply-adds. Panel and chunk stay in the L2 cache, so a
        # row of x comes from memory once a panel, not once every TILE rows.
        var widened = alloc[Float32](PANEL * n_in)
        var chunk = max(X_TILE, X_CHUNK_BYTES // (n_in * 4) // X_TILE * X_TILE)
        var n = first
        while n < last:
            var count = min(PANEL, last - n)
            for t in range(count):
                widen_row[kind](w_ptr + (n + t) * row_bytes, blocks, widened + t * n_in)
            var tiled = count // TILE * TILE  # the panel's rows in whole tiles
            for m0 in range(0, rows, chunk):
                var m1 = min(rows, m0 + chunk)
                for t0 in range(0, tiled, TILE):
                    var w_tile = widened + t0 * n_in
                    var m = m0
                    while m + X_TILE <= m1:
                        var sums = tile_dots(w_tile, x_rows + m * n_in, n_in)
                        comptime for i in range(X_TILE):
                            comptime for t in range(TILE):
                                out_ptr[(m + i) * out_strides[0] + (n + t0 + t) * out_strides[1]] = sums[i * TILE + t]
                        m += X_TILE
                    for row in range(m, m1):
                        for t in range(t0, t0 + TILE):
                            var dot = dot_widening(widened + t * n_in, x_rows + row * n_in, n_in)
                            out_ptr[row * out_strides[0] + (n + t) * out_strides[1]] = dot
                for t in range(tiled, count):
                    for row in range(m0, m1):
                        var dot = dot_widening(widened + t * n_in, x_rows + row * n_in, n_in)
                        out_ptr[row * out_strides[0] + (n + t) * out_strides[1]] = dot
            n += count
        widened.free()

    var claims = new_counters(1)
    var workers = num_physical_cores()
    var smallest = max(1, CLAIM_BYTES // row_bytes)

    def worker(index: Int) {var}:
        var claimed = claim(claims, 0, n_out, smallest, workers, STREAMS)
        while claimed[0] < claimed[1]:
            if rows == 1:
                one_token(claimed[0], claimed[1])
            else:
                many_tokens(claimed[0], claimed[1])
            claimed = claim(claims, 0, n_out, smallest, workers, STREAMS)

    parallelize(worker, workers)
    claims.free()
    x_sums.free()
    x_rows.free()


@extensibility.register("ggml_rows_q8_0")
struct RowsQ8_0:
    """Output[m, n] = x[m, :] . W[n, :], W in Q8_0 blocks: uint8 [out, in / 32 * 34]."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        x: InputTensor[dtype = DType.float32, rank=2, ...],
        weight: InputTensor[dtype = DType.uint8, rank=2, ...],
    ) raises:
        rows_times_blocks[Q8_0](output, x, weight, "ggml_rows_q8_0")


@extensibility.register("ggml_rows_q4_0")
struct RowsQ4_0:
    """Output[m, n] = x[m, :] . W[n, :], W in Q4_0 blocks: uint8 [out, in / 32 * 18]."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        x: InputTensor[dtype = DType.float32, rank=2, ...],
        weight: InputTensor[dtype = DType.uint8, rank=2, ...],
    ) raises:
        rows_times_blocks[Q4_0](output, x, weight, "ggml_rows_q4_0")


@extensibility.register("ggml_rows_q4_1")
struct RowsQ4_1:
    """Output[m, n] = x[m, :] . W[n, :], W in Q4_1 blocks: uint8 [out, in / 32 * 20]."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        x: InputTensor[dtype = DType.float32, rank=2, ...],
        weight: InputTensor[dtype = DType.uint8, rank=2, ...],
    ) raises:
        rows_times_blocks[Q4_1](output, x, weight, "ggml_rows_q4_1")


def gather_widened[
    kind: Int
](
    output: OutputTensor[dtype = DType.float32, rank=2, ...],
    ids: InputTensor[dtype = DType.int64, rank=1, ...],
    table: InputTensor[dtype = DType.uint8, rank=2, ...],
    name: StaticString,
) raises:
    """output[m, :] = the table's row ids[m], widened (an embedding lookup)."""
    var n_in = output.dim_size(1)
    check_blocks[kind](table, n_in, name)
    var blocks = n_in // BLOCK
    var row_bytes = blocks * block_bytes[kind]()
    var vocab = table.dim_size(0)
    var out_strides = output.strides()
    if out_strides[1] != 1:
        raise Error(name, ": the output must be contiguous")
    for m in range(ids.dim_size(0)):
        var id = Int(ids[m])
        if id < 0 or id >= vocab:
            raise Error(name, ": token id ", id, " is not in the table of ", vocab)
        widen_row[kind](
            table.unsafe_ptr() + id * row_bytes, blocks, output.unsafe_ptr() + m * out_strides[0]
        )


@extensibility.register("ggml_gather_q8_0")
struct GatherQ8_0:
    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        ids: InputTensor[dtype = DType.int64, rank=1, ...],
        table: InputTensor[dtype = DType.uint8, rank=2, ...],
    ) raises:
        gather_widened[Q8_0](output, ids, table, "ggml_gather_q8_0")


@extensibility.register("ggml_gather_q4_0")
struct GatherQ4_0:
    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        ids: InputTensor[dtype = DType.int64, rank=1, ...],
        table: InputTensor[dtype = DType.uint8, rank=2, ...],
    ) raises:
        gather_widened[Q4_0](output, ids, table, "ggml_gather_q4_0")


@extensibility.register("ggml_gather_q4_1")
struct GatherQ4_1:
    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        ids: InputTensor[dtype = DType.int64, rank=1, ...],
        table: InputTensor[dtype = DType.uint8, rank=2, ...],
    ) raises:
        gather_widened[Q4_1](output, ids, table, "ggml_gather_q4_1")
