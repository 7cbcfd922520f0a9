"""The steps of a decoded token's block besides its reads: the layer norm,
GELU, a claim's chunk of a projection, and the attention of one head over
the cache in three passes.
"""

from std.math import exp, sqrt, tanh
from std.memory import bitcast, stack_allocation
from std.sys.info import size_of
from std.sys.intrinsics import prefetch
from .cpu import WIDTH
from .claims import LINE_BYTES
from .dots import at, dot_bf16, dot_rows_streamed, dot_widening


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
    ask_for_row(value_cache + t * head_dim, head_dim)
    return key_score(query, key_cache + t * head_dim, head_dim)


@always_inline
def ask_for_row[ctype: DType](row: UnsafePointer[Scalar[ctype], _], head_dim: Int):
    """A cached row's lines asked for from memory, for a later pass to read."""
    comptime line = LINE_BYTES // size_of[ctype]()
    for d in range(0, head_dim, line):
        prefetch(row + d)


@always_inline
def key_score[
    ctype: DType
](query: UnsafePointer[Float32, _], key: UnsafePointer[Scalar[ctype], _], head_dim: Int) -> Float32:
    """q . k for one cached key (widened to float32 as it is read).

    One sum, not dot_widening's four: four runs of keys already keep four
    dot products in flight, and more sums here only slowed the attention."""
    var vector_end = head_dim - head_dim % WIDTH
    var dot = SIMD[DType.float32, WIDTH](0)
    for d in range(0, vector_end, WIDTH):
        var k = (key + d).load[width=WIDTH]().cast[DType.float32]()
        dot += (query + d).load[width=WIDTH]() * k
    var score = dot.reduce_add()
    for d in range(vector_end, head_dim):
        score += query[d] * key[d].cast[DType.float32]()
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
    var total = exponentials(scores, count, highest)
    weighted_rows(value_cache, scores, count, head_dim, 1 / total, dest)


def exponentials(scores: UnsafePointer[mut=True, Float32, _], count: Int, highest: Float32) -> Float32:
    """The weights exp(score - highest) in place of `count` scores, a vector
    at a time; returns their sum."""
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
    return total


def weighted_rows[
    ctype: DType
](
    value_cache: UnsafePointer[Scalar[ctype], _],
    weights: UnsafePointer[Float32, _],
    count: Int,
    head_dim: Int,
    inverse: Float32,
    dest: UnsafePointer[mut=True, Float32, _],
):
    """dest = inverse * sum over t < count of weights[t] * v_t, v_t the
    [count, head_dim] rows from value_cache: weighted_values' registers for
    GPT-2's head size, the sums in dest otherwise."""
    comptime if GPT2_HEAD_DIM % WIDTH == 0:
        if head_dim == GPT2_HEAD_DIM:  # the sums in registers (4 of AVX-512, 8 of AVX2)
            weighted_values[GPT2_HEAD_DIM // WIDTH](value_cache, weights, count, inverse, dest)
            return
    var vector_end = head_dim - head_dim % WIDTH
    for d in range(head_dim):
        dest[d] = 0
    for t_v in range(count):
        var v_row = value_cache + t_v * head_dim
        var weight = weights[t_v]
        for d in range(0, vector_end, WIDTH):
            var v = (v_row + d).load[width=WIDTH]().cast[DType.float32]()
            (dest + d).store((dest + d).load[width=WIDTH]() + weight * v)
        for d in range(vector_end, head_dim):
            dest[d] += weight * v_row[d].cast[DType.float32]()
    for d in range(head_dim):
        dest[d] *= inverse
