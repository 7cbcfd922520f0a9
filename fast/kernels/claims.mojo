"""How the cores share a step of a kernel: each claims the next rows of it
from a counter, and waits for the others at its end by watching another.
"""

from std.atomic import Atomic
from std.ffi import c_int, c_uint, external_call
from std.math import ceildiv
from std.memory import alloc
from std.sys.info import size_of
from std.utils import IndexList
from extensibility import InputTensor


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
comptime LINE_BYTES = 64  # one cache line
# Looks at a counter before a waiting core yields (microseconds of spinning),
# then yields before it sleeps: a wait longer than that is another program
# holding the core whose rows it waits for, and a core that only yields stays
# runnable and takes its share of the cores from that program.
comptime SPINS_BEFORE_YIELD = 10000
comptime YIELDS_BEFORE_SLEEP = 100
comptime SLEEP_MICROSECONDS = 50


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
    each look, and after YIELDS_BEFORE_SLEEP more it sleeps between looks:
    when more threads than cores run (other programs), the rows it waits for
    may belong to a thread that needs this core to finish."""
    var looks = 0
    while Int(Atomic[Int64].load(counters + (2 * step + 1) * COUNTER_STRIDE)) < total:
        looks += 1
        if looks > SPINS_BEFORE_YIELD + YIELDS_BEFORE_SLEEP:
            _ = external_call["usleep", c_int](c_uint(SLEEP_MICROSECONDS))
        elif looks > SPINS_BEFORE_YIELD:
            _ = external_call["sched_yield", c_int]()


@always_inline
def step_claim(total: Int, smallest: Int, workers: Int) -> Int:
    """The smallest claim of a step of `total` rows in a call of many small
    steps (a decoded Llama token's 120 products of 0.2-1.1 MB): `smallest`,
    or the step in 2 * workers claims if those are larger. Each claim starts
    its core's reads afresh and moves the counter's line between cores;
    guided claims of CLAIM_BYTES took some ten claims a step, this takes 4
    with two cores: a Q4_1 token 1.08x as fast (the Zen 4), Q8_0 1.03x,
    bfloat16's larger rows unchanged."""
    return max(smallest, ceildiv(total, 2 * workers))


@always_inline
def smallest_claim[wtype: DType](n_in: Int) -> Int:
    """Weight rows in the smallest claim: CLAIM_BYTES of them, at least one."""
    return max(1, CLAIM_BYTES // (n_in * size_of[wtype]()))


@always_inline
def smallest_claim(weight: InputTensor[rank=2, ...]) -> Int:
    """The smallest claim of a [out, in] weight's rows."""
    return smallest_claim[weight.dtype](weight.dim_size(1))
