"""One decoded token through all of a Llama's layers in one call, its
matrices in ggml's blocks (llama_decode_blocks_q8_0, _q4_0, _q4_1) or in
plain float32 or bfloat16 rows (_f32, _bf16).

As graph operations a layer is about thirty of MAX's calls (two RMSNorms,
four projections, the rotations, the cache's writes and reads, attention,
SiLU and the adds), each ending with the cores handed back to MAX's
executor. Here, as in decode_blocks (GPT-2's), one call runs every layer:
each core takes a share of every step and waits for the others at its end
by watching a counter. Every step is shared by parts (claims.mojo's
claim_own_first): each core reads its own part of a matrix as one run of
memory, and takes its own heads one at a time on a counter that the other
core touches only once done with its own. Heads claimed from one shared
counter moved its cache line between the cores at every claim: 3% of a
Q4_1 token on the Zen 4. A layer's steps:

0. q, k, v: the fused [q; k; v] rows times the normed stream (and Qwen2's
   biases added, each core to its own rows);
1. each key/value head's key rotated, it and its value written at `start`;
2. each key/value head's group of query heads rotated and attended over a
   run of the cached positions, a run for each core (group_attention.mojo:
   each row read once for the group, and by one core);
3. the stream += o's rows times the heads' outputs, each core first joining
   the runs into its own copy of them;
4. gate and up: the fused [gate; up] rows times the normed stream;
5. the stream += down's rows times SiLU(gate) * up.

Each core normalizes the stream itself (hidden numbers: cheaper than a
step), makes its own SiLU(gate) * up, and rounds its own copy of a
product's x to 16-bit levels (token_rows.mojo).
"""

from std.math import exp, sqrt, cos, sin
from std.memory import alloc
from std.sys.info import num_physical_cores
from max.algorithm import parallelize
import extensibility
from extensibility import InputTensor, InputVariadicTensors, OutputTensor
from extensibility.managed_tensor_slice import _MutableInputTensor as MutableInputTensor
from .claims import COUNTER_STRIDE, claim_own_first, finished, new_counters, wait_for_step
from .cpu import STREAMS, WIDTH
from .blocks import BF16, BLOCK, CLAIM_BYTES, F32, Q4_0, Q4_1, Q8_0, block_bytes
from .group_attention import attend_group_run, merge_runs, run_floats, run_positions
from .token_rows import is_grouped, prepare_x, rows_times, x_floats

comptime STEPS = 6
comptime MATRICES = 4  # a layer's: qkv, o, gate_up, down


def rms_normed(
    x: UnsafePointer[Float32, _],
    weight: UnsafePointer[Float32, _],
    eps: Float32,
    n: Int,
    dest: UnsafePointer[mut=True, Float32, _],
):
    """dest = x / sqrt(mean(x^2) + eps) * weight (RMSNorm)."""
    var whole = n - n % WIDTH
    var squares = SIMD[DType.float32, WIDTH](0)
    for i in range(0, whole, WIDTH):
        var v = (x + i).load[width=WIDTH]()
        squares += v * v
    var total = squares.reduce_add()
    for i in range(whole, n):
        total += x[i] * x[i]
    var scale = 1 / sqrt(total / Float32(n) + eps)
    for i in range(0, whole, WIDTH):
        (dest + i).store((x + i).load[width=WIDTH]() * scale * (weight + i).load[width=WIDTH]())
    for i in range(whole, n):
        dest[i] = x[i] * scale * weight[i]


def rotate_half_pairs(
    x: UnsafePointer[mut=True, Float32, _], turns: UnsafePointer[Float32, _], head_dim: Int
):
    """x (one head) turned by step 19's rotation: number i and number
    i + head_dim / 2 are a pair, turned by the angle whose cosine is turns[i]
    and sine turns[half + i]."""
    var half = head_dim // 2
    for i in range(half):
        var c = turns[i]
        var s = turns[half + i]
        var first = x[i]
        var second = x[i + half]
        x[i] = first * c - second * s
        x[i + half] = second * c + first * s


def silu_times(
    gate: UnsafePointer[Float32, _],
    up: UnsafePointer[Float32, _],
    n: Int,
    dest: UnsafePointer[mut=True, Float32, _],
):
    """dest = SiLU(gate) * up over n numbers, WIDTH at a time (exponentials
    a vector at a time: one number at a time, they took 4% of a Q4_1 token
    on the Zen 3)."""
    var whole = n - n % WIDTH
    for i in range(0, whole, WIDTH):
        var g = (gate + i).load[width=WIDTH]()
        (dest + i).store(g / (1 + exp(-g)) * (up + i).load[width=WIDTH]())
    for i in range(whole, n):
        dest[i] = gate[i] / (1 + exp(-gate[i])) * up[i]


def decode_layers[
    kind: Int
](
    output: OutputTensor[dtype = DType.float32, rank=2, ...],
    key_cache: MutableInputTensor[rank=4, ...],
    value_cache: MutableInputTensor[rank=4, ...],
    hidden: InputTensor[dtype = DType.float32, rank=2, ...],
    norms: InputTensor[dtype = DType.float32, rank=3, ...],
    biases: InputTensor[dtype = DType.float32, rank=2, ...],
    inv_freq: InputTensor[dtype = DType.float32, rank=1, ...],
    settings: InputTensor[dtype = DType.float32, rank=1, ...],
    start: InputTensor[dtype = DType.int64, rank=1, ...],
    matrices: InputVariadicTensors[rank=2, ...],
    name: StaticString,
) raises:
    """hidden [1, width] -> output [1, width] through every layer; caches
    [layers, kv_heads, context, head_dim], float32 or float16 (each key and
    value rounded as it is stored, widened as it is read); norms [layers,
    2, width]; settings [eps, heads, biased]; biases [layers, qkv rows], the
    biases of q, k and v (Qwen2's) added to step 0's rows where `biased` is
    not 0 (else any shape: unread); matrices: each layer's qkv, o, gate_up,
    down."""
    comptime count = matrices.size
    comptime size = block_bytes[kind]()
    comptime ctype = key_cache.dtype
    comptime assert ctype == value_cache.dtype, "the caches' dtypes differ"
    comptime assert ctype == DType.float32 or ctype == DType.float16, "float32 or float16 caches"
    var layers = key_cache.dim_size(0)
    var kv_heads = key_cache.dim_size(1)
    var context = key_cache.dim_size(2)
    var head_dim = key_cache.dim_size(3)
    var width = hidden.dim_size(1)
    var eps = settings[0]
    var heads = Int(settings[1])
    var biased = settings.dim_size(0) > 2 and settings[2] != 0
    var position = Int(start[0])
    comptime if count == 0 or count % MATRICES != 0:
        raise Error(name, ": the matrices must be whole layers of 4")
    if count // MATRICES != layers or norms.dim_size(0) != layers:
        raise Error(name, ": one layer of matrices and norms for each layer of the caches")
    if position < 0 or position >= context:
        raise Error(name, ": position ", position, " beyond the cache's ", context)
    if hidden.dim_size(0) != 1 or width % BLOCK != 0 or heads % kv_heads != 0:
        raise Error(name, ": hidden must be one row of whole blocks")
    var q_width = heads * head_dim
    var kv_width = kv_heads * head_dim
    var qkv_rows = q_width + 2 * kv_width
    if biased and (biases.dim_size(0) != layers or biases.dim_size(1) != qkv_rows):
        raise Error(name, ": the biases must be [layers, ", qkv_rows, "]: q's, k's and v's rows")
    var pointers = alloc[UnsafePointer[UInt8, MutUntrackedOrigin]](count)
    var rows = alloc[Int](count)
    var problem = False
    comptime for k in range(count):
        rows[k] = matrices[k].dim_size(0)
        var strides = matrices[k].strides()
        if strides[1] != 1 or strides[0] != matrices[k].dim_size(1):
            problem = True
        pointers[k] = UnsafePointer[UInt8, MutUntrackedOrigin](
            unsafe_from_address=Int(matrices[k].unsafe_ptr())
        )
    var inner = rows[2] // 2
    for layer in range(layers):
        var m = layer * MATRICES
        if rows[m] != qkv_rows or rows[m + 1] != width or rows[m + 2] != 2 * inner or rows[m + 3] != width:
            problem = True
    if problem or inner % BLOCK != 0:
        pointers.free()
        rows.free()
        raise Error(name, ": the matrices are not a Llama's qkv, o, gate_up and down")
    var width_blocks = width // BLOCK
    var inner_blocks = inner // BLOCK
    var q_blocks = q_width // BLOCK
    var width_bytes = width_blocks * size
    var inner_bytes = inner_blocks * size
    var q_bytes = q_blocks * size

    var stream = output.unsafe_ptr()  # the residual stream, in place
    for i in range(width):
        stream[i] = hidden[0, i]
    var qkv = alloc[Float32](qkv_rows)
    var gate_up = alloc[Float32](2 * inner)
    var workers = num_physical_cores()
    # Two counters a step, as claims.mojo lays them out; only the second, the
    # rows done, is used here (finished, wait_for_step).
    var counters = new_counters(2 * STEPS * layers)
    var parts = new_counters(STEPS * layers * workers)  # each step's parts (claims.mojo)
    var group = heads // kv_heads
    var largest = max(width, inner, q_width)  # the longest x a product multiplies
    var each = largest + x_floats(largest // BLOCK) + group * (context + head_dim)
    var scratch = alloc[Float32](workers * each)
    var kc = key_cache.unsafe_ptr()
    var vc = value_cache.unsafe_ptr().bitcast[Scalar[ctype]]()  # the same dtype (asserted)
    # The rotation's cosines and sines at this position, once for every head and layer.
    var turns = alloc[Float32](head_dim)
    for i in range(head_dim // 2):
        var angle = Float32(position) * inv_freq[i]
        turns[i] = cos(angle)
        turns[head_dim // 2 + i] = sin(angle)
    var norm_ptr = norms.unsafe_ptr()
    var bias_ptr = biases.unsafe_ptr()
    var units = kv_heads * workers  # the attention's: a key/value head's run
    var runs = alloc[Float32](units * group * run_floats(head_dim))
    var smallest_width = max(1, CLAIM_BYTES // width_bytes)
    var smallest_inner = max(1, CLAIM_BYTES // inner_bytes)
    # A core's part in chunks: a 4-bit matrix's read as one run, other rows
    # STREAMS runs side by side in each chunk, which must be long.
    comptime chunks = 8 if is_grouped[kind]() else 2

    def worker(index: Int) {var}:
        var x = scratch + index * each
        var x_area = x + largest  # x rounded to 16-bit levels (token_rows.mojo)
        var scores = x_area + x_floats(largest // BLOCK)
        var queries = scores + group * context
        for layer in range(layers):
            var c = counters + 2 * STEPS * layer * COUNTER_STRIDE
            var w = pointers + layer * MATRICES
            var layer_cache = layer * kv_heads * context * head_dim
            # 0: q, k, v of the normed stream.
            rms_normed(stream, norm_ptr + 2 * layer * width, eps, width, x)
            prepare_x[kind](x, width_blocks, x_area)
            var done = 0
            var claimed = claim_own_first(parts, layer * STEPS + 0, qkv_rows, index, workers, smallest_width, STREAMS, chunks)
            while claimed[0] < claimed[1]:
                rows_times[kind](w[0], width_bytes, claimed[0], claimed[1], width_blocks, x, x_area, qkv, 1, False)
                if biased:  # by the core that made these rows: no other core writes them
                    for n in range(claimed[0], claimed[1]):
                        qkv[n] += bias_ptr[layer * qkv_rows + n]
                done += claimed[1] - claimed[0]
                claimed = claim_own_first(parts, layer * STEPS + 0, qkv_rows, index, workers, smallest_width, STREAMS, chunks)
            finished(c, 0, done)
            wait_for_step(c, 0, qkv_rows)
            # 1: each key/value head's key turned, it and its value cached.
            done = 0
            claimed = claim_own_first(parts, layer * STEPS + 1, kv_heads, index, workers, 1, 1, kv_heads)
            while claimed[0] < claimed[1]:
                for h in range(claimed[0], claimed[1]):
                    var key = qkv + q_width + h * head_dim
                    rotate_half_pairs(key, turns, head_dim)
                    var slot = layer_cache + (h * context + position) * head_dim
                    for d in range(head_dim):
                        kc[slot + d] = key[d].cast[ctype]()
                        vc[slot + d] = key[kv_width + d].cast[ctype]()
                done += claimed[1] - claimed[0]
                claimed = claim_own_first(parts, layer * STEPS + 1, kv_heads, index, workers, 1, 1, kv_heads)
            finished(c, 1, done)
            wait_for_step(c, 1, kv_heads)
            # 2: each key/value head's group of queries attended over a run of
            # positions 0 .. start (a run for each worker: group_attention.mojo).
            done = 0
            claimed = claim_own_first(parts, layer * STEPS + 2, units, index, workers, 1, 1, units)
            while claimed[0] < claimed[1]:
                for unit in range(claimed[0], claimed[1]):
                    var kv_head = unit // workers
                    var span = run_positions(position + 1, unit % workers, workers)
                    for j in range(group):
                        var h = kv_head * group + j
                        for d in range(head_dim):
                            queries[j * head_dim + d] = qkv[h * head_dim + d]
                        rotate_half_pairs(queries + j * head_dim, turns, head_dim)
                    var cached = layer_cache + kv_head * context * head_dim
                    attend_group_run(
                        kc + cached, vc + cached, queries, group, head_dim, span[0], span[1], scores,
                        runs + unit * group * run_floats(head_dim),
                    )
                done += claimed[1] - claimed[0]
                claimed = claim_own_first(parts, layer * STEPS + 2, units, index, workers, 1, 1, units)
            finished(c, 2, done)
            wait_for_step(c, 2, units)
            # 3: the stream += o times the heads' outputs (each core joins the
            # runs into its own copy).
            merge_runs(runs, heads, group, workers, head_dim, x)
            prepare_x[kind](x, q_blocks, x_area)
            done = 0
            claimed = claim_own_first(parts, layer * STEPS + 3, width, index, workers, smallest_width, STREAMS, chunks)
            while claimed[0] < claimed[1]:
                rows_times[kind](w[1], q_bytes, claimed[0], claimed[1], q_blocks, x, x_area, stream, 1, True)
                done += claimed[1] - claimed[0]
                claimed = claim_own_first(parts, layer * STEPS + 3, width, index, workers, smallest_width, STREAMS, chunks)
            finished(c, 3, done)
            wait_for_step(c, 3, width)
            # 4: gate and up of the normed stream.
            rms_normed(stream, norm_ptr + (2 * layer + 1) * width, eps, width, x)
            prepare_x[kind](x, width_blocks, x_area)
            done = 0
            claimed = claim_own_first(parts, layer * STEPS + 4, 2 * inner, index, workers, smallest_width, STREAMS, chunks)
            while claimed[0] < claimed[1]:
                rows_times[kind](w[2], width_bytes, claimed[0], claimed[1], width_blocks, x, x_area, gate_up, 1, False)
                done += claimed[1] - claimed[0]
                claimed = claim_own_first(parts, layer * STEPS + 4, 2 * inner, index, workers, smallest_width, STREAMS, chunks)
            finished(c, 4, done)
            wait_for_step(c, 4, 2 * inner)
            # 5: the stream += down times SiLU(gate) * up (each core its own copy).
            silu_times(gate_up, gate_up + inner, inner, x)
            prepare_x[kind](x, inner_blocks, x_area)
            done = 0
            claimed = claim_own_first(parts, layer * STEPS + 5, width, index, workers, smallest_inner, STREAMS, chunks)
            while claimed[0] < claimed[1]:
                rows_times[kind](w[3], inner_bytes, claimed[0], claimed[1], inner_blocks, x, x_area, stream, 1, True)
                done += claimed[1] - claimed[0]
                claimed = claim_own_first(parts, layer * STEPS + 5, width, index, workers, smallest_inner, STREAMS, chunks)
            finished(c, 5, done)
            wait_for_step(c, 5, width)

    parallelize(worker, workers)
    counters.free()
    parts.free()
    turns.free()
    scratch.free()
    gate_up.free()
    runs.free()
    qkv.free()
    rows.free()
    pointers.free()


@extensibility.register("llama_decode_blocks_q8_0")
struct DecodeQ8_0:
    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        key_cache: MutableInputTensor[rank=4, ...],
        value_cache: MutableInputTensor[rank=4, ...],
        hidden: InputTensor[dtype = DType.float32, rank=2, ...],
        norms: InputTensor[dtype = DType.float32, rank=3, ...],
        biases: InputTensor[dtype = DType.float32, rank=2, ...],
        inv_freq: InputTensor[dtype = DType.float32, rank=1, ...],
        settings: InputTensor[dtype = DType.float32, rank=1, ...],
        start: InputTensor[dtype = DType.int64, rank=1, ...],
        matrices: InputVariadicTensors[dtype = DType.uint8, rank=2, ...],
    ) raises:
        decode_layers[Q8_0](
            output, key_cache, value_cache, hidden, norms, biases, inv_freq, settings, start, matrices,
            "llama_decode_blocks_q8_0",
        )


@extensibility.register("llama_decode_blocks_q4_0")
struct DecodeQ4_0:
    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        key_cache: MutableInputTensor[rank=4, ...],
        value_cache: MutableInputTensor[rank=4, ...],
        hidden: InputTensor[dtype = DType.float32, rank=2, ...],
        norms: InputTensor[dtype = DType.float32, rank=3, ...],
        biases: InputTensor[dtype = DType.float32, rank=2, ...],
        inv_freq: InputTensor[dtype = DType.float32, rank=1, ...],
        settings: InputTensor[dtype = DType.float32, rank=1, ...],
        start: InputTensor[dtype = DType.int64, rank=1, ...],
        matrices: InputVariadicTensors[dtype = DType.uint8, rank=2, ...],
    ) raises:
        decode_layers[Q4_0](
            output, key_cache, value_cache, hidden, norms, biases, inv_freq, settings, start, matrices,
            "llama_decode_blocks_q4_0",
        )


@extensibility.register("llama_decode_blocks_q4_1")
struct DecodeQ4_1:
    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        key_cache: MutableInputTensor[rank=4, ...],
        value_cache: MutableInputTensor[rank=4, ...],
        hidden: InputTensor[dtype = DType.float32, rank=2, ...],
        norms: InputTensor[dtype = DType.float32, rank=3, ...],
        biases: InputTensor[dtype = DType.float32, rank=2, ...],
        inv_freq: InputTensor[dtype = DType.float32, rank=1, ...],
        settings: InputTensor[dtype = DType.float32, rank=1, ...],
        start: InputTensor[dtype = DType.int64, rank=1, ...],
        matrices: InputVariadicTensors[dtype = DType.uint8, rank=2, ...],
    ) raises:
        decode_layers[Q4_1](
            output, key_cache, value_cache, hidden, norms, biases, inv_freq, settings, start, matrices,
            "llama_decode_blocks_q4_1",
        )


@extensibility.register("llama_decode_blocks_f32")
struct DecodeF32:
    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        key_cache: MutableInputTensor[rank=4, ...],
        value_cache: MutableInputTensor[rank=4, ...],
        hidden: InputTensor[dtype = DType.float32, rank=2, ...],
        norms: InputTensor[dtype = DType.float32, rank=3, ...],
        biases: InputTensor[dtype = DType.float32, rank=2, ...],
        inv_freq: InputTensor[dtype = DType.float32, rank=1, ...],
        settings: InputTensor[dtype = DType.float32, rank=1, ...],
        start: InputTensor[dtype = DType.int64, rank=1, ...],
        matrices: InputVariadicTensors[dtype = DType.float32, rank=2, ...],
    ) raises:
        decode_layers[F32](
            output, key_cache, value_cache, hidden, norms, biases, inv_freq, settings, start, matrices,
            "llama_decode_blocks_f32",
        )


@extensibility.register("llama_decode_blocks_bf16")
struct DecodeBF16:
    @staticmethod
    def execute[
        target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        key_cache: MutableInputTensor[rank=4, ...],
        value_cache: MutableInputTensor[rank=4, ...],
        hidden: InputTensor[dtype = DType.float32, rank=2, ...],
        norms: InputTensor[dtype = DType.float32, rank=3, ...],
        biases: InputTensor[dtype = DType.float32, rank=2, ...],
        inv_freq: InputTensor[dtype = DType.float32, rank=1, ...],
        settings: InputTensor[dtype = DType.float32, rank=1, ...],
        start: InputTensor[dtype = DType.int64, rank=1, ...],
        matrices: InputVariadicTensors[dtype = DType.bfloat16, rank=2, ...],
    ) raises:
        decode_layers[BF16](
            output, key_cache, value_cache, hidden, norms, biases, inv_freq, settings, start, matrices,
            "llama_decode_blocks_bf16",
        )
