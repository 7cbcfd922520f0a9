"""CPU kernels for tools/fast_gpt2.py: one token's projections and attention.

Decoding one token is memory-bound: each weight is read once and used for one
multiply-add, so the time is the weights' bytes over the memory bandwidth.
These kernels read every weight row exactly once, in order, and spread the
rows over the cores; bfloat16 weights are widened to float32 in registers, so
they cost half the bytes with float32 arithmetic.
"""

from std.math import exp
from max.algorithm import parallelize
import extensibility
from extensibility import InputTensor, OutputTensor
from extensibility.managed_tensor_slice import _MutableInputTensor as MutableInputTensor

comptime WIDTH = 16  # float32 lanes in one AVX-512 register
comptime ROWS_PER_TASK = 32  # weight rows one parallel task reads


@extensibility.register("gpt2_linear_rows")
struct LinearRows:
    """Output[m, n] = x[m, :] . weight[n, :] + bias[n], for a few rows x.

    weight is [out, in] (a MAX Linear's layout), float32 or bfloat16; x,
    bias and the output are float32.
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
        var rows = x.dim_size(0)
        var n_out = weight.dim_size(0)
        var n_in = weight.dim_size(1)
        var w_ptr = weight.unsafe_ptr()
        var x_ptr = x.unsafe_ptr()
        var b_ptr = bias.unsafe_ptr()
        var out_ptr = output.unsafe_ptr()
        var vector_end = n_in - n_in % WIDTH

        def task(index: Int) {var}:
            var first = index * ROWS_PER_TASK
            var last = min(first + ROWS_PER_TASK, n_out)
            for m in range(rows):
                var x_row = x_ptr + m * n_in
                for n in range(first, last):
                    var w_row = w_ptr + n * n_in
                    var acc = SIMD[DType.float32, WIDTH](0)
                    for k in range(0, vector_end, WIDTH):
                        var w = (w_row + k).load[width=WIDTH]().cast[DType.float32]()
                        acc += w * (x_row + k).load[width=WIDTH]()
                    var total = acc.reduce_add()
                    for k in range(vector_end, n_in):
                        total += w_row[k].cast[DType.float32]() * x_row[k]
                    out_ptr[m * n_out + n] = total + b_ptr[n]

        parallelize(task, (n_out + ROWS_PER_TASK - 1) // ROWS_PER_TASK)


@extensibility.register("gpt2_cache_write")
struct CacheWrite:
    """Writes new keys and values [batch, heads, seq, head_dim] into one
    layer's slots of the caches [layers, batch, heads, context, head_dim],
    at positions start .. start + seq."""

    @staticmethod
    def execute[
        layer: Int, target: StaticString
    ](
        key_cache: MutableInputTensor[dtype = DType.float32, rank=5, ...],
        value_cache: MutableInputTensor[dtype = DType.float32, rank=5, ...],
        key: InputTensor[dtype = DType.float32, rank=4, ...],
        value: InputTensor[dtype = DType.float32, rank=4, ...],
        start: InputTensor[dtype = DType.int64, rank=1, ...],
    ) raises:
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
        for bh in range(batch * heads):
            var cache_row = ((layer * batch * heads + bh) * context + first) * head_dim
            var new_row = bh * seq * head_dim
            for i in range(seq * head_dim):
                kc[cache_row + i] = k_ptr[new_row + i]
                vc[cache_row + i] = v_ptr[new_row + i]


@extensibility.register("gpt2_decode_attention")
struct DecodeAttention:
    """One new token per sequence: writes its key and value at position
    `start` of one layer's caches, then attends over positions 0 .. start.

    query, key, value: [batch, heads, 1, head_dim]; output likewise. The
    softmax is computed online (running max and sum), in one pass over the
    cache, so no scores array is needed.
    """

    @staticmethod
    def execute[
        layer: Int, target: StaticString
    ](
        output: OutputTensor[dtype = DType.float32, rank=4, ...],
        key_cache: MutableInputTensor[dtype = DType.float32, rank=5, ...],
        value_cache: MutableInputTensor[dtype = DType.float32, rank=5, ...],
        query: InputTensor[dtype = DType.float32, rank=4, ...],
        key: InputTensor[dtype = DType.float32, rank=4, ...],
        value: InputTensor[dtype = DType.float32, rank=4, ...],
        start: InputTensor[dtype = DType.int64, rank=1, ...],
    ) raises:
        var batch = query.dim_size(0)
        var heads = query.dim_size(1)
        var head_dim = query.dim_size(3)
        var context = key_cache.dim_size(3)
        var position = Int(start.unsafe_ptr()[0])
        if position < 0 or position >= context:
            raise Error("gpt2_decode_attention: position beyond the cache")
        var kc = key_cache.unsafe_ptr()
        var vc = value_cache.unsafe_ptr()
        var q_ptr = query.unsafe_ptr()
        var k_ptr = key.unsafe_ptr()
        var v_ptr = value.unsafe_ptr()
        var out_ptr = output.unsafe_ptr()
        var scale = Float32(1.0) / Float32(head_dim).__pow__(Float32(0.5))
        var vector_end = head_dim - head_dim % WIDTH

        def task(bh: Int) {var}:
            var base = (layer * batch * heads + bh) * context * head_dim
            var row = bh * head_dim
            for d in range(head_dim):
                kc[base + position * head_dim + d] = k_ptr[row + d]
                vc[base + position * head_dim + d] = v_ptr[row + d]
            var running_max = Float32.MIN
            var running_sum = Float32(0)
            for d in range(head_dim):
                out_ptr[row + d] = 0
            for t in range(position + 1):
                var k_row = kc + base + t * head_dim
                var v_row = vc + base + t * head_dim
                var dot = SIMD[DType.float32, WIDTH](0)
                for d in range(0, vector_end, WIDTH):
                    dot += (q_ptr + row + d).load[width=WIDTH]() * (k_row + d).load[width=WIDTH]()
                var score = dot.reduce_add()
                for d in range(vector_end, head_dim):
                    score += q_ptr[row + d] * k_row[d]
                score *= scale
                var new_max = max(running_max, score)
                var correction = exp(running_max - new_max)
                var weight = exp(score - new_max)
                running_sum = running_sum * correction + weight
                for d in range(0, vector_end, WIDTH):
                    var acc = (out_ptr + row + d).load[width=WIDTH]()
                    (out_ptr + row + d).store(acc * correction + weight * (v_row + d).load[width=WIDTH]())
                for d in range(vector_end, head_dim):
                    out_ptr[row + d] = out_ptr[row + d] * correction + weight * v_row[d]
                running_max = new_max
            for d in range(head_dim):
                out_ptr[row + d] = out_ptr[row + d] / running_sum

        parallelize(task, batch * heads)
