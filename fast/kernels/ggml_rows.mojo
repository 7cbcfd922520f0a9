"""x times a weight held in ggml's blocks (Q8_0, Q4_0, Q4_1; blocks.mojo),
never widened to a float32 matrix in memory, or held in float32 or bfloat16
rows; and a table's rows widened (a Llama's token embedding in blocks).

A weight is a uint8 matrix [out, blocks * BLOCK_BYTES]: each row the blocks
of one output's 32-weight runs along the input. Q8_0 rows are as the file
stores them; a 4-bit matrix's rows are grouped, GROUP rows' blocks side by
side (token_rows.mojo), which widen_matrix_row reads too.

Decoding a token reads every weight once: the time is the blocks' bytes over
the memory's rate. The rows are claimed by the cores as in linear_rows, and
each core reads a group, or STREAMS Q8_0 rows far apart, side by side,
multiplying its integers by x rounded to 16-bit levels (token_rows.mojo). A
prompt's many rows widen each weight row once, into a float32 panel of rows in the
L2 cache, and multiply it with every row of x in float32: there the
multiply-adds, not the bytes, bound the time, and each widened weight
serves every row. Where the CPU has AVX-512's VNNI, a prompt's blocks are
multiplied in integers instead (int_panels.mojo), twice the products an
instruction.
"""

from std.memory import alloc, stack_allocation
from std.sys.info import num_physical_cores, size_of
from max.algorithm import parallelize
import extensibility
from extensibility import InputTensor, OutputTensor
from .claims import claim, new_counters
from .blocks import BF16, BLOCK, CLAIM_BYTES, F32, HALF, Q4_0, Q4_1, Q8_0, block_bytes, block_scales, levels_at
from .cpu import STREAMS, WIDTH
from .dots import dot_widening
from .int_panels import INT_MR, INT_PANEL, INT_PANELS, int_panel_times_x, widen_int_panel
from .token_rows import prepare_x, row_block, rows_times, x_floats


@always_inline
def chunk_levels[
    kind: Int, c: Int
](levels: UnsafePointer[UInt8, _]) -> Tuple[SIMD[DType.float32, WIDTH], SIMD[DType.float32, WIDTH]]:
    """The levels of a block's weights c * WIDTH onwards and HALF + c * WIDTH
    onwards (c < HALF / WIDTH), as float32 (Q4_0's less 8); `levels` is where
    the block's values (Q8_0) or 16 bytes of 4-bit levels begin.

    Bytes are widened to 32-bit lanes as they are loaded (one instruction),
    and a 4-bit level's two nibbles are taken from those lanes (lane j: weight
    j's low nibble, weight j + 16's high one): widening the 16 bytes to 32
    separate bytes first costs AVX2 three more shuffles a block."""
    comptime if kind == Q8_0:
        var values = levels.bitcast[Int8]() + c * WIDTH
        return (
            values.load[width=WIDTH]().cast[DType.float32](),
            (values + HALF).load[width=WIDTH]().cast[DType.float32](),
        )
    else:
        var lanes = (levels + c * WIDTH).load[width=WIDTH]().cast[DType.int32]()
        var low = lanes & 15
        var high = lanes >> 4
        comptime if kind == Q4_0:
            low -= 8
            high -= 8
        return (low.cast[DType.float32](), high.cast[DType.float32]())


@always_inline
def widen_block[
    kind: Int
](levels: UnsafePointer[UInt8, _], d: Float32, m: Float32, dest: UnsafePointer[mut=True, Float32, _]):
    """A block's 32 weights d * level + m as float32, its levels at `levels`."""
    comptime for c in range(HALF // WIDTH):
        var chunk = chunk_levels[kind, c](levels)
        (dest + c * WIDTH).store(d * chunk[0] + m)
        (dest + HALF + c * WIDTH).store(d * chunk[1] + m)


@always_inline
def widen_row[
    kind: Int
](row: UnsafePointer[UInt8, _], blocks: Int, dest: UnsafePointer[mut=True, Float32, _]):
    """A row of blocks as the file stores them (or of float32 or bfloat16
    weights) as float32 weights."""
    comptime if kind == F32 or kind == BF16:
        comptime wtype = DType.float32 if kind == F32 else DType.bfloat16
        var weights = row.bitcast[Scalar[wtype]]()
        for k in range(0, blocks * BLOCK, WIDTH):
            (dest + k).store((weights + k).load[width=WIDTH]().cast[DType.float32]())
        return
    comptime size = block_bytes[kind]()
    for b in range(blocks):
        var block = row + b * size
        var scales = block_scales[kind](block)
        widen_block[kind](block + levels_at[kind](), scales[0], scales[1], dest + b * BLOCK)


def widen_matrix_row[
    kind: Int
](w: UnsafePointer[UInt8, _], n: Int, rows: Int, blocks: Int, dest: UnsafePointer[mut=True, Float32, _]):
    """Row n of a [rows, blocks] matrix as float32 weights: a 4-bit matrix's
    rows held grouped (token_rows.mojo), the others as the file stores them."""
    comptime if kind == F32 or kind == BF16:
        widen_row[kind](w + n * blocks * block_bytes[kind](), blocks, dest)
        return
    for b in range(blocks):
        var block = row_block[kind](w, n, rows, blocks, b)
        widen_block[kind](w + block[0], block[1], block[2], dest + b * BLOCK)


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
    if n_in % BLOCK != 0 or weight.dim_size(1) * size_of[weight.dtype]() != blocks * block_bytes[kind]():
        comptime if kind == F32 or kind == BF16:
            raise Error(name, ": the weight must be [out, in], in a multiple of 32")
        raise Error(name, ": the weight must be [out, in / 32 * ", block_bytes[kind](), "] bytes")
    var strides = weight.strides()
    if strides[1] != 1 or strides[0] != weight.dim_size(1):
        raise Error(name, ": the weight must be contiguous")


def rows_times_blocks[
    kind: Int
](
    output: OutputTensor[dtype = DType.float32, rank=2, ...],
    x: InputTensor[dtype = DType.float32, rank=2, ...],
    weight: InputTensor[rank=2, ...],
    name: StaticString,
) raises:
    """output[m, n] = x[m, :] . W[n, :], W the blocks of `kind` in weight
    (or its float32 or bfloat16 rows)."""
    var rows = x.dim_size(0)
    var n_in = x.dim_size(1)
    var n_out = weight.dim_size(0)
    check_blocks[kind](weight, n_in, name)
    if output.dim_size(0) != rows or output.dim_size(1) != n_out:
        raise Error(name, ": the output must be [rows, out]")
    var blocks = n_in // BLOCK
    comptime size = block_bytes[kind]()
    var row_bytes = blocks * size
    # x contiguous; one token's rounded to 16-bit levels once for all weight
    # rows, and so are a prompt's rows for the integer panels.
    comptime integers = INT_PANELS and (kind == Q8_0 or kind == Q4_0 or kind == Q4_1)
    var area = x_floats(blocks, spread=rows == 1)  # a prompt's rows without the token's spread run
    var x_rows = alloc[Float32](rows * n_in)
    var x_area = alloc[Float32](area * (rows if integers else 1))
    var x_strides = x.strides()
    var x_in = x.unsafe_ptr()
    for m in range(rows):
        for k in range(n_in):
            x_rows[m * n_in + k] = x_in[m * x_strides[0] + k * x_strides[1]]
    if rows == 1 or integers:
        for m in range(rows):
            prepare_x[kind](x_rows + m * n_in, blocks, x_area + m * area, spread=rows == 1)
    var w_ptr = weight.unsafe_ptr().bitcast[UInt8]()
    var out_ptr = output.unsafe_ptr()
    var out_strides = output.strides()

    def one_token(first: Int, last: Int) {var}:
        rows_times[kind](w_ptr, row_bytes, first, last, blocks, x_rows, x_area, out_ptr, out_strides[1], False)

    def many_tokens_integers(first: Int, last: Int) {var}:
        # int_panels.mojo: INT_PANEL weight rows' levels at a time, x's rows
        # (prepared above) in chunks of whole INT_MR tiles against them.
        var panel = alloc[Int16](INT_PANEL * n_in)
        var scales = alloc[Float32](2 * INT_PANEL * blocks)
        var chunk = max(INT_MR, X_CHUNK_BYTES // (area * 4) // INT_MR * INT_MR)
        var n = first
        while n < last:
            var count = min(INT_PANEL, last - n)
            widen_int_panel[kind](w_ptr, n, count, n_out, blocks, panel, scales)
            for m0 in range(0, rows, chunk):
                var m1 = min(rows, m0 + chunk)
                var at = out_ptr + n * out_strides[1]
                int_panel_times_x[kind](panel, scales, count, blocks, x_area, area, m0, m1, at, out_strides)
            n += count
        scales.free()
        panel.free()

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
                widen_matrix_row[kind](w_ptr, n + t, n_out, blocks, widened + t * n_in)
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
    # A token's claims are of bytes read (claims.mojo); a prompt's are of
    # multiply-adds, a panel each at the smallest: a claim of CLAIM_BYTES'
    # rows took a core a millisecond there, and the other waited for it.
    var smallest = max(1, CLAIM_BYTES // row_bytes) if rows == 1 else PANEL
    var granule = STREAMS if rows == 1 else PANEL

    def worker(index: Int) {var}:
        var claimed = claim(claims, 0, n_out, smallest, workers, granule)
        while claimed[0] < claimed[1]:
            if rows == 1:
                one_token(claimed[0], claimed[1])
            else:
                comptime if integers:
                    many_tokens_integers(claimed[0], claimed[1])
                else:
                    many_tokens(claimed[0], claimed[1])
            claimed = claim(claims, 0, n_out, smallest, workers, granule)

    parallelize(worker, workers)
    claims.free()
    x_area.free()
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


@extensibility.register("ggml_rows_f32")
struct RowsF32:
    """Output[m, n] = x[m, :] . W[n, :], W float32 [out, in]: a prompt's rows
    through the blocks' panels (in a multiple of 32)."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        x: InputTensor[dtype = DType.float32, rank=2, ...],
        weight: InputTensor[dtype = DType.float32, rank=2, ...],
    ) raises:
        rows_times_blocks[F32](output, x, weight, "ggml_rows_f32")


@extensibility.register("ggml_rows_bf16")
struct RowsBF16:
    """Output[m, n] = x[m, :] . W[n, :], W bfloat16 [out, in], widened a panel at a time."""

    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        x: InputTensor[dtype = DType.float32, rank=2, ...],
        weight: InputTensor[dtype = DType.bfloat16, rank=2, ...],
    ) raises:
        rows_times_blocks[BF16](output, x, weight, "ggml_rows_bf16")


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
    var vocab = table.dim_size(0)
    var out_strides = output.strides()
    if out_strides[1] != 1:
        raise Error(name, ": the output must be contiguous")
    for m in range(ids.dim_size(0)):
        var id = Int(ids[m])
        if id < 0 or id >= vocab:
            raise Error(name, ": token id ", id, " is not in the table of ", vocab)
        widen_matrix_row[kind](table.unsafe_ptr(), id, vocab, blocks, output.unsafe_ptr() + m * out_strides[0])


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
