"""How the cores share a step of a kernel: each claims the next rows of it
from a counter (or first its own part of them: claim_own_first), and waits
for the others at its end by watching another.
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


# A step of a decoded token can be shared out by parts instead: worker i
# owns the i-th part of the rows and takes it from its front, a chunk at a
# time, on a counter no other core touches until it is done with its own
# part; a core done with its own takes from the back of another's (half of
# what is left), so the cores still finish together, and one worker alone
# still does every row. A core reads its part as one run of memory, where
# claims from a shared counter gave each core pieces far apart.
comptime FRONT_BITS = 32  # a part's counter: rows taken from the front, then from the back


@always_inline
def part_rows(total: Int, part: Int, workers: Int, granule: Int) -> IndexList[2]:
    """The rows [first, last) of `part` of `total`: whole granules but at the end."""
    var each = ceildiv(ceildiv(total, workers), granule) * granule
    return IndexList[2](min(total, part * each), min(total, (part + 1) * each))


@always_inline
def claim_own_first(
    parts: UnsafePointer[mut=True, Int64, _],
    step: Int,
    total: Int,
    index: Int,
    workers: Int,
    smallest: Int,
    granule: Int,
    chunks: Int,
) -> IndexList[2]:
    """Worker `index`'s next rows [first, last) of `step`: the next chunk of
    its own part (a `chunks`-th of it, at least `smallest` rows), else half
    of what is left of another's, taken from its back; first == last ==
    total once every row is claimed. `parts` holds `workers` counters a
    step (new_counters(steps * workers)); every claim begins on a multiple
    of `granule`."""
    var counters = parts + step * workers * COUNTER_STRIDE
    var own = part_rows(total, index, workers, granule)
    var chunk = ceildiv(max(smallest, (own[1] - own[0]) // chunks), granule) * granule
    var mine = counters + index * COUNTER_STRIDE
    var taken = Atomic[Int64].load(mine)
    while True:
        var front = Int(taken & 0xFFFFFFFF)
        var left = own[1] - own[0] - front - Int(taken >> FRONT_BITS)
        if left <= 0:
            break
        var size = min(chunk, left)
        if Atomic[Int64].compare_exchange(mine, taken, taken + Int64(size)):
            return IndexList[2](own[0] + front, own[0] + front + size)
        # A core took from the back meanwhile: `taken` now holds what it left.
    for k in range(1, workers):
        var part = (index + k) % workers
        var rows = part_rows(total, part, workers, granule)
        var theirs = counters + part * COUNTER_STRIDE
        taken = Atomic[Int64].load(theirs)
        while True:
            var free = rows[0] + Int(taken & 0xFFFFFFFF)  # a multiple of granule
            var end = rows[1] - Int(taken >> FRONT_BITS)
            if end <= free:
                break
            var begin = max(free, (end - (end - free + 1) // 2) // granule * granule)
            if Atomic[Int64].compare_exchange(theirs, taken, taken + (Int64(end - begin) << FRONT_BITS)):
                return IndexList[2](begin, end)
    return IndexList[2](total, total)


@always_inline
def smallest_claim[wtype: DType](n_in: Int) -> Int:
    """Weight rows in the smallest claim: CLAIM_BYTES of them, at least one."""
    return max(1, CLAIM_BYTES // (n_in * size_of[wtype]()))


@always_inline
def smallest_claim(weight: InputTensor[rank=2, ...]) -> Int:
    """The smallest claim of a [out, in] weight's rows."""
    return smallest_claim[weight.dtype](weight.dim_size(1))
