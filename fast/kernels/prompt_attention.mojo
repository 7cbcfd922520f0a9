"""A prompt's causal self-attention in one call a block: only the scores the
causal mask keeps, a softmax computed online, none of the scores stored.
"""

from std.atomic import Atomic
from std.math import ceildiv, exp, iota, sqrt
from std.memory import alloc, stack_allocation
from std.sys.info import num_physical_cores
from std.utils import IndexList
from max.algorithm import parallelize
import extensibility
from extensibility import InputTensor, OutputTensor
from .cpu import BF16_DOT_BUILT, WIDTH, cpu_has_amx, cpu_has_bf16_dot
from .claims import new_counters
from .prompt_attention_amx import prompt_attention_amx


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
