"""The machine under the benchmark: what it is (machine_line), how busy it
is while we measure (LoadMonitor, is_busy), what share of its read bandwidth
(the ceiling no decoder can pass, measured by devtools/bench/probe.py) each
contender reaches, and waiting until the contenders' processes are quiet
before the next timed call."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from devtools.bench.stats import summary

# Load above this fraction of the cores, or other processes using more than
# this fraction of the CPU time while we measure: the machine is busy.
BUSY_FRACTION = 0.25


def machine_line(device: str = "cpu") -> str:
    """The CPU, its cores, Python and the libraries' versions, on one line; the
    GPU first when the figures are the GPU's."""
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}"
        for name in ("max", "torch", "transformers", "numpy")
    )
    host = f"{cpu_name()}, {cores_line()}, Python {platform.python_version()}, {versions}"
    return f"{gpu_name()} on {host}" if device == "gpu" else host


def usable_cpus() -> int:
    """The CPUs this process may run on: fewer than os.cpu_count() under a CPU
    mask (taskset, a container's cpuset). Every contender gets this many
    threads, so none is told of cores it cannot use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity (macOS)
        return os.cpu_count() or 1


def cores_line() -> str:
    usable, present = usable_cpus(), os.cpu_count() or 1
    return f"{usable} cores" if usable == present else f"{usable} of {present} cores (a CPU mask)"


def gpu_name() -> str:
    """The first GPU's name as PyTorch reads it (the benchmark's peer runs there)."""
    try:
        import torch

        return torch.cuda.get_device_name(0)
    except (ImportError, RuntimeError, AssertionError):
        return "a GPU"


def cpuinfo_field(name: str) -> str | None:
    """The first CPU's `name` line of /proc/cpuinfo, or None where there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == name:
                return value.strip()
    except OSError:
        pass
    return None


# AMD's cores by (cpu family, model range): a cloud machine's model name is
# often a bare "AMD EPYC", the same for chips whose speeds differ several-fold.
AMD_CORES = {
    23: ((0x00, 0x2F, "Zen"), (0x30, 0xFF, "Zen 2")),
    25: ((0x10, 0x1F, "Zen 4"), (0x60, 0xAF, "Zen 4"), (0x00, 0xFF, "Zen 3")),
    26: ((0x00, 0xFF, "Zen 5"),),
}


def amd_core(family: int, model: int) -> str | None:
    """The core of an AMD chip of this family and model, or None if unknown."""
    for first, last, core in AMD_CORES.get(family, ()):
        if first <= model <= last:
            return core
    return None


def cpu_name() -> str:
    """The first CPU's model name, with its core where the name leaves it out
    ("AMD EPYC (Zen 3)")."""
    name = cpuinfo_field("model name")
    if not name:
        return f"{platform.machine()} {platform.processor() or platform.system()}"
    if cpuinfo_field("vendor_id") == "AuthenticAMD" and "Zen" not in name:
        family, model = cpuinfo_field("cpu family") or "", cpuinfo_field("model") or ""
        if family.isdigit() and model.isdigit() and (core := amd_core(int(family), int(model))):
            return f"{name} ({core})"
    return name


def cpu_flags() -> set[str]:
    """The first CPU's flags (avx2, avx512f, ...); empty where /proc/cpuinfo has none."""
    return set((cpuinfo_field("flags") or "").split())


def cpu_times(pids: Sequence[int] = ()) -> tuple[float, float] | None:
    """(seconds of CPU time used by every process, by this one and the
    benchmark's workers `pids`) so far; None where /proc/stat is missing."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    user, nice, system = (int(v) for v in fields[:3])
    irq = sum(int(v) for v in fields[5:8])
    ours = os.times()
    return (user + nice + system + irq) / ticks, ours.user + ours.system + sum(
        _process_cpu_seconds(pid, ticks) for pid in pids
    )


def _process_cpu_seconds(pid: int, ticks: int) -> float:
    """User + system CPU time of process `pid`, its threads included."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()  # after the command name
    return (int(fields[11]) + int(fields[12])) / ticks


class LoadMonitor:
    """Load average at the start and end, and the CPU share of *other*
    processes over the measured span (/proc/stat minus our own CPU time)."""

    def __init__(self, pids: Sequence[int] = ()) -> None:
        self.pids = list(pids)
        self.load_before = os.getloadavg()
        self.times = cpu_times(self.pids)
        self.started = time.perf_counter()

    def finish(self) -> dict:
        cores = usable_cpus()
        elapsed = time.perf_counter() - self.started
        other = None
        now = cpu_times(self.pids)
        if now is not None and self.times is not None and elapsed > 0:
            busy = (now[0] - self.times[0]) - (now[1] - self.times[1])
            other = max(0.0, busy / (elapsed * cores))
        load_after = os.getloadavg()
        return dict(
            cores=cores,
            loadavg_before=list(self.load_before),
            loadavg_after=list(load_after),
            other_processes_cpu_fraction=other,
            busy=is_busy(self.load_before[0], other, cores),
        )


def is_busy(load_1min: float, other_fraction: float | None, cores: int) -> bool:
    """Busy: other processes used over BUSY_FRACTION of the CPU while we ran,
    or (when that cannot be told) the load average exceeded that share of the
    cores before we started."""
    if other_fraction is not None:
        return other_fraction > BUSY_FRACTION
    return load_1min > BUSY_FRACTION * cores


def ceiling_fractions(contenders: dict, weight_count: int, ceiling_gb_s: float) -> dict:
    """Each contender's best median tokens/s as a fraction of what the ceiling
    allows it (the ceiling's bytes/s over the bytes it reads per token)."""
    fractions = {}
    for key, contender in contenders.items():
        speeds = [s["median"] for s in contender["tokens_per_s"].values()]
        if not speeds:
            continue
        bytes_per_token = weight_count * contender["bytes_per_weight"]
        fractions[key] = max(speeds) * bytes_per_token / (ceiling_gb_s * 1e9)
    return fractions


def paired_fractions(
    contenders: dict, weight_count: int, probe_before: dict[str, dict[int, list[float]]]
) -> dict:
    """Each contender's tokens/s at the length of its best median, round by
    round, as a fraction of what the probe read just before that decode
    allows it: {key: its length and the summary}. The machine's bandwidth
    moves within seconds; this pairs each decode with the reading just
    before it, where the ceiling is the run's best."""
    fractions = {}
    for key, contender in contenders.items():
        speeds = contender["tokens_per_s"]
        if not speeds:
            continue
        length = max(speeds, key=lambda n: speeds[n]["median"])
        bytes_per_token = weight_count * contender["bytes_per_weight"]
        samples = speeds[length]["samples"]
        probes = probe_before[key][int(length)]
        shares = [
            tokens * bytes_per_token / (gb_s * 1e9)
            for tokens, gb_s in zip(samples, probes, strict=True)
        ]
        fractions[key] = dict(summary(shares), length=int(length))
    return fractions


def wait_until_idle(pids: Sequence[int], window: float = 0.2, timeout: float = 3.0) -> None:
    """Return once the workers `pids` have used at most two clock ticks of
    CPU over `window` seconds, or after `timeout`. A contender's thread pool
    keeps spinning for a while after its work; timed during that spin, the
    next contender (in the other process) would share the cores with it."""
    ticks = os.sysconf("SC_CLK_TCK")
    deadline = time.perf_counter() + timeout
    used = sum(_process_cpu_seconds(pid, ticks) for pid in pids)
    while time.perf_counter() < deadline:
        time.sleep(window)
        before, used = used, sum(_process_cpu_seconds(pid, ticks) for pid in pids)
        if used - before <= 2 / ticks:
            return


def seconds_for(fn: Callable[..., object], *args: object) -> float:
    """Wall-clock seconds one call of `fn(*args)` takes."""
    started = time.perf_counter()
    fn(*args)
    return time.perf_counter() - started
