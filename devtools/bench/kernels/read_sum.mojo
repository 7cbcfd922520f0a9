"""The benchmark's memory probe: the sum of a float32 array, read by every
core, each core's slice in `streams` equal parts read side by side.

A decoded token's weights are read by fast/kernels in eight streams a core,
32 bytes a load, and one core then has more reads from memory in flight
than with one long stream (PyTorch's sum reads one a core). A ceiling
measured with one stream can sit below what the kernels read;
devtools/bench/probe.py reads with both and takes the faster.
"""

from std.math import ceildiv
from std.memory import alloc, stack_allocation
from std.sys.info import num_physical_cores, simd_width_of
from max.algorithm import parallelize
import extensibility
from extensibility import InputTensor, OutputTensor

# 32 bytes a load (at most a vector register), as fast/kernels read a
# token's weights (READ_BYTES there).
comptime WIDTH = min(simd_width_of[DType.float32](), 8)


@extensibility.register("bench_read_sum")
struct ReadSum:
    """Output[0] = the sum of data: every core sums its slice in `streams`
    parts side by side; the values left over from equal parts of whole
    vectors (under four vectors a part) are summed at the end, on one core."""

    @staticmethod
    def execute[
        target: StaticString, streams: Int
    ](
        output: OutputTensor[dtype = DType.float32, rank=1, ...],
        data: InputTensor[dtype = DType.float32, rank=1, ...],
    ):
        var workers = num_physical_cores()
        var part = read_part(data.dim_size(0), workers, streams)
        var values = data.unsafe_ptr()
        var totals = alloc[Float32](workers)
        # With fewer than four streams, each keeps several sums, so that the
        # additions' latency never holds the reads back.
        comptime sums_per_stream = ceildiv(4, streams)

        def worker(index: Int) {var}:
            var first = values + index * streams * part
            var sums = stack_allocation[streams * sums_per_stream, SIMD[DType.float32, WIDTH]]()
            comptime for s in range(streams * sums_per_stream):
                sums[s] = 0
            for k in range(0, part, WIDTH * sums_per_stream):
                comptime for s in range(streams):
                    comptime for u in range(sums_per_stream):
                        sums[s * sums_per_stream + u] += (
                            first + s * part + k + u * WIDTH
                        ).load[width=WIDTH]()
            var total = Float32(0)
            comptime for s in range(streams * sums_per_stream):
                total += sums[s].reduce_add()
            totals[index] = total

        parallelize(worker, workers)
        var total = Float32(0)
        for index in range(workers):
            total += totals[index]
        for k in range(workers * streams * part, data.dim_size(0)):
            total += values[k]
        output.unsafe_ptr()[0] = total
        totals.free()


def read_part(n: Int, workers: Int, streams: Int) -> Int:
    """Values in one stream's part: whole groups of four vectors (the step of
    the loop at any stream count), the same for every part."""
    var group = 4 * WIDTH
    return n // (workers * streams * group) * group
