"""A decoded Llama token's attention, a key/value head's group of query
heads at once over a run of the cached positions (flash-decoding's split).

decode_steps.mojo's attend_one_head serves one query head over every
position: a key/value head's rows were read again for each query head of its
group, and with SmolLM2's 3 key/value heads on 2 cores one head's rows were
read from memory by both. Here a unit of work is one key/value head's group
over one run of the positions (a run for each core): each key and value row
is read once for the whole group, and the cores read different rows. A run
leaves, for each query head, its largest score m, its weights' sum
l = sum exp(score - m) and its values weighted by them, o (not yet divided);
merge_runs then joins a head's runs: with M the largest of their m's, the
head's output is sum(o * exp(m - M)) / sum(l * exp(m - M)), the softmax of
every position as if taken at once.
"""

from std.math import ceildiv, exp, sqrt
from .decode_steps import KEY_STREAMS, ask_for_row, exponentials, key_score, weighted_rows


def run_positions(count: Int, run: Int, runs: Int) -> Tuple[Int, Int]:
    """The positions [first, last) of `run` of `runs` over `count` positions
    (empty where the runs outnumber the positions)."""
    var each = ceildiv(count, runs)
    return (min(count, run * each), min(count, (run + 1) * each))


def run_floats(head_dim: Int) -> Int:
    """What a run leaves for one query head: o, then m and l."""
    return head_dim + 2


@always_inline
def score_position[
    ctype: DType
](
    keys: UnsafePointer[Scalar[ctype], _],
    values: UnsafePointer[Scalar[ctype], _],
    queries: UnsafePointer[Float32, _],
    group: Int,
    head_dim: Int,
    t: Int,
    first: Int,
    count: Int,
    scale: Float32,
    scores: UnsafePointer[mut=True, Float32, _],
    runs_out: UnsafePointer[mut=True, Float32, _],
):
    """Position t's score for each query of the group, its values asked for."""
    ask_for_row(values + t * head_dim, head_dim)
    var stride = run_floats(head_dim)
    for j in range(group):
        var score = key_score(queries + j * head_dim, keys + t * head_dim, head_dim) * scale
        scores[j * count + t - first] = score
        var out = runs_out + j * stride
        out[head_dim] = max(out[head_dim], score)


def attend_group_run[
    ctype: DType
](
    keys: UnsafePointer[Scalar[ctype], _],
    values: UnsafePointer[Scalar[ctype], _],
    queries: UnsafePointer[Float32, _],
    group: Int,
    head_dim: Int,
    first: Int,
    last: Int,
    scores: UnsafePointer[mut=True, Float32, _],
    runs_out: UnsafePointer[mut=True, Float32, _],
):
    """The `group` queries ([group, head_dim], turned) over the positions
    [first, last) of one key/value head's rows (keys and values point at
    its [context, head_dim], float32 or float16, widened as they are read):
    each query's o, m and l into runs_out
    ([group, run_floats(head_dim)]). `scores` is scratch for
    group * (last - first) floats."""
    var count = last - first
    var scale = Float32(1.0) / sqrt(Float32(head_dim))
    var stride = run_floats(head_dim)
    for j in range(group):  # an empty run's m and l: merge_runs skips it
        runs_out[j * stride + head_dim] = Float32.MIN
        runs_out[j * stride + head_dim + 1] = 0
    if count <= 0:
        return
    # The scores, each key read once for the group and its values asked
    # for; KEY_STREAMS runs of keys side by side (as attend_one_head reads).
    var part = count // KEY_STREAMS
    for i in range(part):
        comptime for s in range(KEY_STREAMS):
            var t = first + i + s * part
            score_position(keys, values, queries, group, head_dim, t, first, count, scale, scores, runs_out)
    for t in range(first + KEY_STREAMS * part, last):
        score_position(keys, values, queries, group, head_dim, t, first, count, scale, scores, runs_out)
    # The weights exp(score - m) in place of the scores, their sum l, and o:
    # the values weighted, a query at a time, the run's value rows still in
    # the core's caches from the scores' pass.
    for j in range(group):
        var out = runs_out + j * stride
        var weights = scores + j * count
        out[head_dim + 1] = exponentials(weights, count, out[head_dim])
        weighted_rows(values + first * head_dim, weights, count, head_dim, 1, out)


def merge_runs(
    runs_in: UnsafePointer[Float32, _],
    heads: Int,
    group: Int,
    runs: Int,
    head_dim: Int,
    dest: UnsafePointer[mut=True, Float32, _],
):
    """Each query head's output into dest [heads, head_dim], from its runs:
    runs_in holds, for key/value head g and run r, attend_group_run's
    [group, run_floats(head_dim)] at ((g * runs + r) * group) * run_floats."""
    var stride = run_floats(head_dim)
    for h in range(heads):
        var g = h // group
        var j = h % group
        var highest = Float32.MIN
        for r in range(runs):
            highest = max(highest, runs_in[((g * runs + r) * group + j) * stride + head_dim])
        var out = dest + h * head_dim
        for d in range(head_dim):
            out[d] = 0
        var total = Float32(0)
        for r in range(runs):
            var run = runs_in + ((g * runs + r) * group + j) * stride
            if run[head_dim + 1] == 0:  # no positions
                continue
            var weight = exp(run[head_dim] - highest)
            total += run[head_dim + 1] * weight
            for d in range(head_dim):
                out[d] += run[d] * weight
        var inverse = 1 / total
        for d in range(head_dim):
            out[d] *= inverse
