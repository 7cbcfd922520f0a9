"""One decoded token through all of the model's transformer blocks, in one
call (gpt2_decode_blocks).
"""

from std.memory import alloc, bitcast
from std.sys.info import num_physical_cores
from max.algorithm import parallelize
import extensibility
from extensibility import InputTensor, InputVariadicTensors, OutputTensor
from extensibility.managed_tensor_slice import _MutableInputTensor as MutableInputTensor
from .cpu import BF16_DOT_BUILT, STREAMS, cpu_has_bf16_dot
from .claims import COUNTER_STRIDE, claim, finished, new_counters, smallest_claim, wait_for_step
from .dots import at
from .cache_write import cast_values
from .decode_steps import attend_one_head, bias_gelu, layer_norm_row, project_chunk


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

comptime STEPS = 7  # a block's steps, as listed above


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
