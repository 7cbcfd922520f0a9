"""How fast this machine reads memory now, read two ways: PyTorch's sum, and
our own sum kernel (devtools/bench/kernels) reading as fast/kernels read a
token's weights. The ceiling a decoded token cannot pass is the faster.

PyTorch's sum reads one contiguous stream a core; fast/kernels read eight
streams a core, which keeps more reads in flight. Where the eight streams
read faster, a ceiling from PyTorch's sum alone would sit below what the
model can read; where PyTorch's sum is faster, the kernels' reading leaves
that much on the table. Each run records both.

Each reader also reads the largest array on end for a while (SUSTAIN_S): a
decode reads its weights for a second or more, and the fastest of a few
short reads catches the memory at its quickest, which a second's reading
averages away. A decode is paired with both readings taken right before it.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from common import max_runtime
from devtools.bench.machine import seconds_for, wait_until_idle

KERNELS = Path(__file__).with_name("kernels")  # read_sum.mojo, built by MAX on first use
# reader: what it is, for the reports; the streams a core of our kernel's reader
# (STREAMS in fast/kernels/cpu.mojo).
READERS = {"torch": "PyTorch's sum, one stream a core", "ours": "our sum, eight streams a core"}
STREAMS = {"ours": 8}
# Seconds each reader reads the largest array on end, in each probe.
SUSTAIN_S = 0.5


def sum_graph(streams: int):
    """Our sum kernel with `streams` streams a core, compiled: float32 [n] in,
    its sum [1] out."""
    from max.driver import CPU
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.graph import DeviceRef, Graph, TensorType, ops

    cpu = DeviceRef.CPU()
    input_type = TensorType(DType.float32, ["n"], device=cpu)
    with Graph(
        f"read_sum_{streams}",
        input_types=[input_type],
        custom_extensions=[max_runtime.precompiled(KERNELS)],
    ) as g:
        out_type = TensorType(DType.float32, [1], device=cpu)
        parameters = {"streams": streams}
        g.output(ops.custom("bench_read_sum", cpu, [g.inputs[0]], [out_type], parameters)[0])
    return InferenceSession(devices=[CPU()]).load(g)


class ReadProbe:
    """Call it for the GB/s this machine reads now: the fastest of `best_of`
    reads by each reader over arrays of each size in `sizes_mb` (all larger
    than the caches). Each call's figure per reader is kept in `readings`;
    with `sustain_s`, also each reader's GB/s over that many seconds of
    reading the largest array on end, in `sustained` (a size given twice is
    read once)."""

    def __init__(
        self, sizes_mb: Sequence[int] = (256, 1024), best_of: int = 3, sustain_s: float = 0.0
    ) -> None:
        self.sizes_mb = tuple(dict.fromkeys(sizes_mb))
        self.best_of, self.sustain_s = best_of, sustain_s
        self.graphs = {reader: sum_graph(streams) for reader, streams in STREAMS.items()}
        self.readings: list[dict[str, float]] = []
        self.sustained: list[dict[str, float]] = []

    def __call__(self) -> float:
        best = dict.fromkeys(READERS, 0.0)
        for megabytes in self.sizes_mb:
            sustain_s = self.sustain_s if megabytes == max(self.sizes_mb) else 0.0
            fastest, sustained = self.read(megabytes, sustain_s)
            for reader, gb_s in fastest.items():
                best[reader] = max(best[reader], gb_s)
            if sustained:
                self.sustained.append(sustained)
        self.readings.append(best)
        return max(best.values())

    def last_sustained(self) -> float | None:
        """The fastest reader's sustained GB/s in the last call, or None
        where it read none (no sustain_s, or no call yet)."""
        if not self.sustain_s or not self.sustained:
            return None
        return max(self.sustained[-1].values())

    def read(self, megabytes: int, sustain_s: float = 0.0) -> tuple[dict, dict]:
        """Each reader's fastest GB/s over one array of `megabytes` MiB, and
        (with `sustain_s`) its GB/s over that many seconds of reading it on
        end; one reader after the other, each once this process is quiet:
        PyTorch's threads spin for a while after a sum, and take the same
        cores from our kernel if it reads right after one."""
        import torch
        from max.driver import Buffer

        data = torch.ones(megabytes * 2**20 // 4, dtype=torch.float32)
        buffer = Buffer.from_dlpack(data)  # shares data's memory
        reads = {"torch": data.sum}
        for reader, graph in self.graphs.items():
            reads[reader] = functools.partial(graph.execute, buffer)
        fastest, sustained = {}, {}
        for reader, read in reads.items():
            wait_until_idle([os.getpid()])
            read()  # warm-up: the pages, the threads
            seconds = min(seconds_for(read) for _ in range(self.best_of))
            fastest[reader] = data.numel() * 4 / seconds / 1e9
            if sustain_s > 0:
                passes, seconds = reads_for(read, sustain_s)
                sustained[reader] = passes * data.numel() * 4 / seconds / 1e9
        return fastest, sustained


def reads_for(read: Callable[[], object], seconds: float) -> tuple[int, float]:
    """Call `read` again and again for at least `seconds` (at least once):
    how many times, and the seconds they took."""
    passes, started = 0, time.perf_counter()
    while passes == 0 or time.perf_counter() - started < seconds:
        read()
        passes += 1
    return passes, time.perf_counter() - started
