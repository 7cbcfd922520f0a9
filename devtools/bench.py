"""Benchmark our GPT-2 against Hugging Face transformers, interleaved, with spreads.

Same weights, same prompt, greedy decoding, batch 1, on this machine.

    python -m devtools.bench [--json out.json] [--dtype bfloat16] [--device gpu]
    python -m devtools.bench --render out.json     (the book's table and plot only)

Each round runs every contender once per length, in a rotating order (A B C,
then B C A, ...), so that whatever else the machine does lands on all of them;
after a warm-up, --repeats rounds give a tokens/s sample per contender and
length, and each round gives a ratio to transformers from runs seconds apart.
Reported: the median ratio with its spread (min-max and quartiles), time to
first token, prefill throughput on a 512-token prompt, compile times, the
machine's load while it ran, and the memory-bandwidth ceiling. --json writes
every figure; the Markdown table and the plot in docs/src/bench/ are rendered
from the same data.

Weights are GPT-2 124M's shapes with random N(0, 0.02) values: the speed does
not depend on the values, and nothing has to be downloaded.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common import max_runtime
from common.steps import REPO

OUT = REPO / "docs" / "src" / "bench"
LENGTHS = (32, 128, 512)
PROMPT_LENGTH = 16
PREFILL_LENGTH = 512
GPT2_124M = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
BASELINE = "transformers"
OURS = ("fast", "step")  # keys of our contenders; every other one is a peer
# Load above this fraction of the cores, or other processes using more than
# this fraction of the CPU time while we measure: the machine is busy.
BUSY_FRACTION = 0.25


@dataclass
class Contender:
    """Something that generates: `generate(prompt, n)` returns n token ids."""

    key: str
    name: str
    generate: Callable[[list[int], int], list[int]]
    compile_s: float | None = None
    max_length: int | None = None  # longer runs are skipped (quadratic models)
    bytes_per_weight: float = 4.0  # what one decoded token reads per weight


# --- statistics (pure: tests/test_bench.py checks them) ------------------------


def summary(samples: Sequence[float]) -> dict:
    """Median, min, max and quartiles of a sample (and the sample itself)."""
    values = sorted(float(v) for v in samples)
    if not values:
        raise ValueError("no samples to summarize")
    if len(values) > 1:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    else:
        q1 = q3 = values[0]
    return dict(
        median=statistics.median(values),
        min=values[0],
        max=values[-1],
        q1=q1,
        q3=q3,
        n=len(values),
        samples=[float(v) for v in samples],
    )


def round_orders(keys: Sequence[str], rounds: int) -> list[list[str]]:
    """The order of the contenders in each round: rotated by one each round,
    so none always runs first or right after another particular one."""
    keys = list(keys)
    return [keys[r % len(keys) :] + keys[: r % len(keys)] for r in range(rounds)]


def paired_ratios(ours: Sequence[float], theirs: Sequence[float]) -> list[float]:
    """Round-by-round ratios of two tokens/s samples measured in the same rounds."""
    if len(ours) != len(theirs):
        raise ValueError(f"samples from different rounds: {len(ours)} vs {len(theirs)}")
    return [a / b for a, b in zip(ours, theirs, strict=True)]


def format_spread(stats: dict, unit: str = "", digits: int = 2) -> str:
    """'1.34x (1.28-1.40)': the median, then min-max."""
    f = f"{{:.{digits}f}}"
    return f"{f.format(stats['median'])}{unit} ({f.format(stats['min'])}-{f.format(stats['max'])})"


# --- the machine --------------------------------------------------------------


def machine_line() -> str:
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}"
        for name in ("max", "torch", "transformers", "numpy")
    )
    return f"{cpu_name()}, {os.cpu_count()} cores, Python {platform.python_version()}, {versions}"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor() or platform.system()}"


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
        cores = os.cpu_count() or 1
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


def read_bandwidth(sizes_mb: Sequence[int] = (256, 1024), best_of: int = 3) -> float:
    """GB/s this machine reads from memory now: the fastest of `best_of` sums
    (torch's reduction streams the array on every core) over arrays of each
    size in `sizes_mb`, all larger than the caches."""
    import torch

    best = 0.0
    for megabytes in sizes_mb:
        data = torch.ones(megabytes * 2**20 // 4, dtype=torch.float32)
        data.sum()
        seconds = min(_seconds(data.sum) for _ in range(best_of))
        best = max(best, data.numel() * 4 / seconds / 1e9)
        del data
    return best


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


def _seconds(fn: Callable[..., object], *args: object) -> float:
    started = time.perf_counter()
    fn(*args)
    return time.perf_counter() - started


# --- contenders ---------------------------------------------------------------


def transformers_contender(
    hf_model, key: str, name: str, device: str, bytes_per_weight: float = 4.0
) -> Contender:
    import torch

    torch_device = "cuda" if device == "gpu" else "cpu"
    hf_model = hf_model.to(torch_device)

    def generate(prompt: list[int], count: int) -> list[int]:
        ids = torch.tensor([prompt], device=torch_device)
        with torch.no_grad():
            out = hf_model.generate(
                ids, max_new_tokens=count, min_new_tokens=count, do_sample=False
            )
        if torch_device == "cuda":
            torch.cuda.synchronize()
        return out[0, len(prompt) :].tolist()

    return Contender(key, name, generate, bytes_per_weight=bytes_per_weight)


def ours_contenders(directory: Path, dtype_name: str, device_name: str, no_cache_max: int):
    """The fast model (fast/gpt2.py), and on the CPU in float32 the
    tutorial's step 17 (compiled, KV cache) and step 16 (compiled, no cache)."""
    from fast import gpt2 as fast_gpt2

    device = fast_gpt2.device_from_name(device_name)
    dtype = fast_gpt2.DTYPES[dtype_name]
    contenders = []
    started = time.perf_counter()
    fast = fast_gpt2.FastGenerator(fast_gpt2.load(directory, dtype=dtype, device=device))
    contenders.append(
        Contender(
            "fast",
            f"ours, fast (fast/gpt2.py, {dtype_name})",
            lambda prompt, n: list(fast.generate(prompt, n)),
            time.perf_counter() - started,
            bytes_per_weight=2.0 if dtype_name == "bfloat16" else 4.0,
        )
    )
    if dtype_name == "float32" and device_name == "cpu":
        from solutions.solution_14 import generate_tokens
        from solutions.solution_15 import load_pretrained
        from solutions.solution_16 import compile_model
        from solutions.solution_17 import CachedGPT2LMHeadModel, compile_cached, generate_cached

        cached = load_pretrained(directory, CachedGPT2LMHeadModel)
        started = time.perf_counter()
        forward = compile_cached(cached)
        contenders.append(
            Contender(
                "step17",
                "ours, tutorial step 17 (compiled, KV cache)",
                lambda prompt, n: list(generate_cached(forward, cached.config, prompt, n)),
                time.perf_counter() - started,
            )
        )
        if no_cache_max > 0:
            plain = load_pretrained(directory)
            started = time.perf_counter()
            compiled = compile_model(plain)
            contenders.append(
                Contender(
                    "step16",
                    "ours, tutorial step 16 (compiled, no cache)",
                    lambda prompt, n: list(generate_tokens(compiled, prompt, n)),
                    time.perf_counter() - started,
                    max_length=no_cache_max,
                )
            )
    return contenders


# --- each family of contenders in its own process ------------------------------
#
# MAX and PyTorch each keep a pool of worker threads, one per core, that keep
# spinning for a while after their work is done, waiting for more. In one
# process they take turns fighting over the same two cores: transformers ran
# at 24 tokens/s alone and at 7-18 tokens/s in a process where MAX had run.
# So PyTorch's contenders and ours run in two worker processes, started
# before MAX is loaded (MAX's runtime rewrites the environment a child
# inherits); the rounds alternate between them, and only one works at a time.


def _worker(connection, family: str, directory: str, dtype: str, device: str | None, extra: dict):
    """A worker process: builds one family's contenders, then runs the
    generate requests it is sent until it is told to stop."""
    try:
        if family == "torch":
            contenders = _torch_contenders(Path(directory), dtype, device)
        elif family == "llama":
            contenders = _llama_contenders(Path(directory), dtype)
        else:
            max_runtime.prepare()
            from fast import gpt2 as fast_gpt2

            device = device or fast_gpt2.default_device_name()
            contenders = ours_contenders(Path(directory), dtype, device, extra["no_cache_max"])
        by_key = {c.key: c for c in contenders}
        described = [
            (c.key, c.name, c.compile_s, c.max_length, c.bytes_per_weight) for c in contenders
        ]
        connection.send(("ready", described))
    except Exception as error:  # the parent reports it, cleanly
        connection.send(("error", f"{family} contenders could not be built: {error!r}"))
        return
    while True:
        request = connection.recv()
        if request[0] == "stop":
            return
        _, key, prompt, count = request
        try:
            connection.send(("ok", by_key[key].generate(prompt, count)))
        except Exception as error:
            connection.send(("error", f"{key} failed: {error!r}"))


class ContenderProcess:
    """The parent's handle on a worker process and the contenders it holds."""

    NOTES = {
        "max": "compiling MAX graphs: minutes on a machine's first run, seconds from MAX's cache",
        "llama": "writing GGUF files and loading them",
        "torch": "loading transformers",
    }

    def __init__(self, family: str, directory: str, args: argparse.Namespace) -> None:
        import multiprocessing

        self.family = family
        self.note = self.NOTES.get(family, "")
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        extra = dict(no_cache_max=args.no_cache_max)
        self.process = context.Process(
            target=_worker,
            args=(child, family, directory, args.dtype, args.device, extra),
            daemon=False,  # MAX compiles in processes of its own
        )
        self.process.start()

    def contenders(self) -> list[Contender]:
        status, payload = self.connection.recv()
        if status != "ready":
            raise RuntimeError(payload)
        return [
            Contender(key, name, self._generator(key), compile_s, max_length, bytes_per_weight)
            for key, name, compile_s, max_length, bytes_per_weight in payload
        ]

    def _generator(self, key: str) -> Callable[[list[int], int], list[int]]:
        def generate(prompt: list[int], count: int) -> list[int]:
            self.connection.send(("generate", key, prompt, count))
            status, payload = self.connection.recv()
            if status != "ok":
                raise RuntimeError(payload)
            return payload

        return generate

    def stop(self) -> None:
        if self.process.is_alive():
            self.connection.send(("stop",))
            self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.kill()


def _torch_contenders(directory: Path, dtype: str, device: str | None) -> list[Contender]:
    import torch
    from transformers import GPT2LMHeadModel

    torch.set_num_threads(os.cpu_count() or 1)
    device = device or ("gpu" if torch.cuda.is_available() else "cpu")
    model = GPT2LMHeadModel.from_pretrained(directory).eval()
    contenders = [
        transformers_contender(model, BASELINE, "transformers (PyTorch, float32)", device)
    ]
    if dtype == "bfloat16":
        model16 = GPT2LMHeadModel.from_pretrained(directory).eval().to(torch.bfloat16)
        contenders.append(
            transformers_contender(
                model16, "transformers-bf16", "transformers (PyTorch, bfloat16)", device, 2.0
            )
        )
    return contenders


def _llama_contenders(directory: Path, dtype: str) -> list[Contender]:
    """llama.cpp on the same weights: float32, and with bfloat16 weights its
    bf16 and (one byte a weight, a different trade of accuracy) q8_0."""
    from devtools import llama_peer

    config = json.loads((directory / "config.json").read_text())
    kinds = ["f32"] if dtype == "float32" else ["bf16", "q8_0"]
    bytes_per_weight = {"f32": 4.0, "bf16": 2.0, "q8_0": 34 / 32}  # q8_0: 32 int8 + a scale
    contenders = []
    for kind in kinds:
        path = llama_peer.write_gguf(directory, directory / f"model-{kind}.gguf", kind)
        generator = llama_peer.LlamaGenerator(path, context=config["n_positions"])
        label = f"llama.cpp ({kind}{', 8-bit weights' if kind == 'q8_0' else ''})"
        contenders.append(
            Contender(
                f"llama.cpp-{kind}",
                label,
                generator.generate,
                bytes_per_weight=bytes_per_weight[kind],
            )
        )
    return contenders


# --- where the time goes: the decode graphs' operations ------------------------


def decode_graph_ops(config: dict) -> dict:
    """Operations in the one-token (decode) graph of step 17 and of the fast
    model, counted by kind in the traced MLIR (traced, not compiled: cheap).
    Constants and weight references are not counted: they do no work."""
    import re
    from collections import Counter

    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.graph import BufferType, TensorType

    from fast.gpt2 import FastGPT2
    from solutions.solution_01 import GPT2Config
    from solutions.solution_17 import CachedGPT2LMHeadModel

    gpt2 = GPT2Config(**config)
    head_dim = gpt2.n_embd // gpt2.n_head
    cache = [gpt2.n_layer, 1, gpt2.n_head, "past", head_dim]
    token = TensorType(DType.int64, [1, 1], device=CPU())
    with F.lazy():
        step17, fast = CachedGPT2LMHeadModel(gpt2), FastGPT2(gpt2)
    fast.use_kernels = True  # the CPU path the benchmark times
    tensor_cache = TensorType(DType.float32, cache, device=CPU())
    buffer = BufferType(DType.float32, [*cache[:3], gpt2.n_positions, head_dim], device=CPU())
    staged = {
        "step17": step17.trace(token, tensor_cache, tensor_cache),
        "fast": fast.trace(token, buffer, buffer, TensorType(DType.int64, [1], device=CPU())),
    }
    counts = {}
    for key, graph in staged.items():
        ops = Counter(
            op.removeprefix("rmo.").removeprefix("mo.")
            for op in re.findall(r"= \"?((?:rmo|mo)\.[a-z_.]+)", str(graph))
        )
        for free in ("constant", "constant.external", "chain.create"):
            ops.pop(free, None)
        counts[key] = dict(ops.most_common())
    return counts


def projection_profile(config: dict, dtype_name: str, repeats: int = 30) -> dict:
    """Where a decode step's time goes: its largest projection, the head
    (one row x the vocab_size x n_embd embedding table), timed three ways in
    interleaved rounds: MAX's matmul in a one-op graph, our kernel
    (fast/kernels, gpt2_linear_rows) in a one-op graph, and PyTorch's linear.
    Milliseconds per call, and the bytes/s each reaches reading the table."""
    import torch
    from max.driver import CPU, Buffer
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.graph import DeviceRef, Graph, TensorType, ops

    from fast.gpt2 import DTYPES, KERNELS

    n_in, n_out = config["n_embd"], config["vocab_size"]
    dtype = DTYPES[dtype_name]
    torch_dtype = torch.bfloat16 if dtype_name == "bfloat16" else torch.float32
    cpu = DeviceRef.CPU()
    row = TensorType(DType.float32, [1, n_in], device=cpu)
    table = TensorType(dtype, [n_out, n_in], device=cpu)
    bias = TensorType(DType.float32, [n_out], device=cpu)
    session = InferenceSession(devices=[CPU()])
    with Graph("max_matmul", input_types=[row, table]) as graph:
        x, weight = graph.inputs
        graph.output(
            x @ ops.cast(weight, DType.float32).T if dtype_name != "float32" else x @ weight.T
        )
    max_matmul = session.load(graph)
    with Graph("our_kernel", input_types=[row, table, bias], custom_extensions=[KERNELS]) as graph:
        out_type = TensorType(DType.float32, [1, n_out], device=cpu)
        graph.output(ops.custom("gpt2_linear_rows", cpu, list(graph.inputs), [out_type])[0])
    kernel = session.load(graph)
    x = torch.randn(1, n_in)
    weight = (torch.randn(n_out, n_in) * 0.02).to(torch_dtype)
    zero_bias = torch.zeros(n_out)
    buffers = [Buffer.from_dlpack(t) for t in (x, weight, zero_bias)]
    x_torch = x.to(torch_dtype)
    ways = {
        "max_matmul": lambda: max_matmul.execute(*buffers[:2]),
        "our_kernel": lambda: kernel.execute(*buffers),
        "torch_linear": lambda: torch.nn.functional.linear(x_torch, weight),
    }
    samples = {key: [] for key in ways}
    for call in ways.values():  # warm-up
        call()
    for order in round_orders(list(ways), repeats):
        for key in order:
            samples[key].append(_seconds(ways[key]) * 1000)
    table_bytes = n_out * n_in * (2 if dtype_name == "bfloat16" else 4)
    return dict(
        shape=[n_out, n_in],
        dtype=dtype_name,
        table_bytes=table_bytes,
        milliseconds={key: summary(values) for key, values in samples.items()},
        gb_per_s={
            key: table_bytes / (statistics.median(values) / 1000) / 1e9
            for key, values in samples.items()
        },
    )


# --- measuring ----------------------------------------------------------------


def measure(
    contenders: list[Contender],
    prompt: list[int],
    long_prompt: list[int],
    lengths: Sequence[int],
    repeats: int,
    log: Callable[[str], None] = print,
    settle: Callable[[], None] = lambda: None,
    probe: Callable[[], float] | None = None,
) -> dict:
    """Interleaved rounds: tokens/s per contender and length, first-token
    latency (the short prompt, one token) and prefill throughput (the long
    prompt, one token), each a list of `repeats` samples. `settle` runs
    before each timed call (the workers' spinning threads); `probe`, if
    given, measures the memory bandwidth at the start of every round (the
    machine's changes within minutes: one figure taken before the run is no
    ceiling)."""
    by_key = {c.key: c for c in contenders}
    tokens_per_s = {c.key: {n: [] for n in lengths} for c in contenders}
    first_token = {c.key: [] for c in contenders}
    prefill = {c.key: [] for c in contenders}
    bandwidth: list[float] = []
    for contender in contenders:  # warm-up: not timed
        contender.generate(prompt, 2)
        contender.generate(long_prompt, 1)
    for round_index, order in enumerate(round_orders([c.key for c in contenders], repeats)):
        if probe is not None:
            settle()
            bandwidth.append(probe())
        for key in order:
            contender = by_key[key]
            settle()
            first_token[key].append(_seconds(contender.generate, prompt, 1))
            settle()
            prefill[key].append(len(long_prompt) / _seconds(contender.generate, long_prompt, 1))
        for n in lengths:
            for key in order:
                contender = by_key[key]
                if contender.max_length is not None and n > contender.max_length:
                    continue
                settle()
                tokens_per_s[key][n].append(n / _seconds(contender.generate, prompt, n))
        log(
            f"round {round_index + 1}/{repeats}: "
            + "; ".join(
                f"{key} "
                + " ".join(
                    f"{tokens_per_s[key][n][-1]:.1f}" for n in lengths if tokens_per_s[key][n]
                )
                for key in order
            )
            + " tok/s"
        )
    return dict(
        tokens_per_s=tokens_per_s, first_token=first_token, prefill=prefill, bandwidth=bandwidth
    )


def results_from(
    contenders: list[Contender], raw: dict, lengths: Sequence[int], baselines: Sequence[str]
) -> tuple[dict, dict]:
    """Summaries per contender, and paired ratios of each of ours to each baseline."""
    per_contender = {}
    for c in contenders:
        per_contender[c.key] = dict(
            name=c.name,
            compile_s=c.compile_s,
            bytes_per_weight=c.bytes_per_weight,
            tokens_per_s={
                str(n): summary(raw["tokens_per_s"][c.key][n])
                for n in lengths
                if raw["tokens_per_s"][c.key][n]
            },
            first_token_s=summary(raw["first_token"][c.key]),
            prefill_tokens_per_s=summary(raw["prefill"][c.key]),
        )
    ratios = {}
    for c in contenders:
        if c.key in baselines:
            continue
        for base in baselines:
            ratios[f"{c.key}/{base}"] = {
                str(n): summary(
                    paired_ratios(raw["tokens_per_s"][c.key][n], raw["tokens_per_s"][base][n])
                )
                for n in lengths
                if raw["tokens_per_s"][c.key][n]
            }
    return per_contender, ratios


def families(args: argparse.Namespace) -> list[str]:
    """The worker families to start: PyTorch's, ours, and llama.cpp's when it
    is installed (said, with the command that installs it, when it is not)."""
    from devtools import llama_peer

    chosen = ["torch", "max"]
    if args.device == "gpu":
        return chosen
    reason = llama_peer.missing()
    if reason is None:
        chosen.insert(1, "llama")
    else:
        print(f"Without llama.cpp: {reason}", file=sys.stderr, flush=True)
    return chosen


def run(args: argparse.Namespace) -> dict:
    import torch

    from common.cli import progress
    from tests.fixtures import hf_model

    torch.set_num_threads(os.cpu_count() or 1)
    lengths = tuple(args.lengths)
    config = dict(GPT2_124M, **(args.config or {}))
    rng = np.random.default_rng(0)
    prompt = rng.integers(0, config["vocab_size"], PROMPT_LENGTH).tolist()
    prefill_length = min(args.prefill_length, config["n_positions"] - 1)
    long_prompt = rng.integers(0, config["vocab_size"], prefill_length).tolist()
    if max(lengths) + PROMPT_LENGTH > config["n_positions"]:
        raise SystemExit(
            f"error: --lengths up to {max(lengths)} + a {PROMPT_LENGTH}-token prompt exceed "
            f"the context ({config['n_positions']})."
        )
    hf = hf_model(**config)
    weight_count = sum(
        int(np.prod(p.shape)) for name, p in hf.named_parameters() if name != "lm_head.weight"
    )
    print(f"Load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    probe = functools.partial(
        read_bandwidth, sizes_mb=args.bandwidth_sizes, best_of=args.bandwidth_repeats
    )
    print(f"Memory read bandwidth now: {probe():.1f} GB/s", flush=True)

    workers = []
    contenders: list[Contender] = []
    with tempfile.TemporaryDirectory() as directory:
        hf.save_pretrained(directory)
        del hf
        try:
            workers = [ContenderProcess(family, directory, args) for family in families(args)]
            for worker in workers:
                with progress(f"building {worker.family}'s contenders", note=worker.note):
                    contenders += worker.contenders()
        except BaseException:
            for worker in workers:
                worker.stop()
            raise
    try:
        pids = [worker.process.pid for worker in workers]
        return measure_all(
            args, config, contenders, prompt, long_prompt, lengths, probe, weight_count, pids
        )
    finally:
        for worker in workers:
            worker.stop()


def measure_all(args, config, contenders, prompt, long_prompt, lengths, probe, weight_count, pids):
    from fast import gpt2 as fast_gpt2

    device = args.device or fast_gpt2.default_device_name()
    print(f"Machine: {machine_line()}; device {device}, dtype {args.dtype}", flush=True)
    baselines = [c.key for c in contenders if not c.key.startswith(OURS)]
    prefill_length = len(long_prompt)
    for c in contenders:
        if c.compile_s is not None:
            print(f"compile {c.key}: {c.compile_s:.1f} s", flush=True)

    monitor = LoadMonitor(pids)
    raw = measure(
        contenders,
        prompt,
        long_prompt,
        lengths,
        args.repeats,
        settle=lambda: wait_until_idle(pids),
        probe=probe,
    )
    wait_until_idle(pids)
    raw["bandwidth"].append(probe())  # and once more after the last round
    load = monitor.finish()
    per_contender, ratios = results_from(contenders, raw, lengths, baselines)
    bandwidth = summary(raw["bandwidth"])
    ceiling = bandwidth["max"]
    bytes_per_weight = 2 if args.dtype == "bfloat16" else 4
    return dict(
        machine=machine_line(),
        device=device,
        dtype=args.dtype,
        config=config,
        batch=1,
        prompt_length=PROMPT_LENGTH,
        prefill_length=prefill_length,
        lengths=list(lengths),
        repeats=args.repeats,
        load=load,
        bandwidth_gb_s=dict(
            bandwidth,
            method=f"fastest of {args.bandwidth_repeats} sums of "
            + " and ".join(f"{size} MiB" for size in args.bandwidth_sizes)
            + " on every core, at the start of every round and after the last",
        ),
        ceiling_gb_s=ceiling,
        weight_count=weight_count,
        weight_bytes=weight_count * bytes_per_weight,
        roofline_tokens_per_s=ceiling * 1e9 / (weight_count * bytes_per_weight),
        ceiling_fraction=ceiling_fractions(per_contender, weight_count, ceiling),
        contenders=per_contender,
        ratios=ratios,
        decode_ops=decode_graph_ops(config),
        projection=projection_profile(config, args.dtype) if args.profile else None,
    )


# --- reporting (from the JSON data only) ----------------------------------------


def format_report(data: dict) -> str:
    """The Markdown the book includes: machine, load, table, ratios, ceiling."""
    lengths = data["lengths"]
    load = data["load"]
    other = load["other_processes_cpu_fraction"]
    lines = [
        f"Machine: {data['machine']}. Device: {data['device']}, weights in {data['dtype']}, "
        f"batch {data['batch']}, {data['prompt_length']}-token prompt, greedy; "
        f"{data['repeats']} interleaved rounds after a warm-up.",
        "",
        f"Load while measuring: load average {load['loadavg_before'][0]:.2f} before, "
        f"{load['loadavg_after'][0]:.2f} after"
        + (f", other processes used {other:.0%} of the CPU" if other is not None else "")
        + (" (**busy machine: figures are noisy**)" if load["busy"] else "")
        + ".",
        "",
        "| model | "
        + " | ".join(f"{n} tokens" for n in lengths)
        + f" | first token | prefill ({data['prefill_length']} tokens) | compile |",
        "|---" * (len(lengths) + 4) + "|",
    ]
    for contender in data["contenders"].values():
        cells = [
            format_spread(contender["tokens_per_s"][str(n)], " tok/s", 1)
            if str(n) in contender["tokens_per_s"]
            else "not run"
            for n in lengths
        ]
        first = contender["first_token_s"]
        compile_s = contender["compile_s"]
        lines.append(
            f"| {contender['name']} | "
            + " | ".join(cells)
            + f" | {first['median'] * 1000:.0f} ms ({first['min'] * 1000:.0f}-{first['max'] * 1000:.0f})"
            + f" | {format_spread(contender['prefill_tokens_per_s'], ' tok/s', 0)}"
            + f" | {f'{compile_s:.1f} s' if compile_s is not None else '-'} |"
        )
    lines += [
        "",
        "Median ratio of tokens/s, paired round by round (min-max over the rounds; "
        "quartiles in the JSON):",
        "",
        "| ratio | " + " | ".join(f"{n} tokens" for n in lengths) + " |",
        "|---" * (len(lengths) + 1) + "|",
    ]
    for pair, per_length in data["ratios"].items():
        ours, base = pair.split("/")
        name = f"{data['contenders'][ours]['name']} / {data['contenders'][base]['name']}"
        cells = [
            format_spread(per_length[str(n)], "x") if str(n) in per_length else "-" for n in lengths
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines + format_ceiling(data)) + "\n"


def format_ceiling(data: dict) -> list[str]:
    """The memory-bandwidth ceiling and each contender's fraction of it; no
    fraction at all when one is over 100% (then the ceiling is wrong)."""
    bandwidth = data["bandwidth_gb_s"]
    ceiling = data.get("ceiling_gb_s", bandwidth["max"])
    weights = data.get("weight_count")
    lines = [
        "",
        f"Memory read bandwidth {format_spread(bandwidth, ' GB/s', 1)} ({bandwidth['method']}); "
        f"the ceiling is the fastest read, {ceiling:.1f} GB/s: a token that reads every weight "
        "once cannot come faster than the weights' bytes over it.",
    ]
    fractions = data.get("ceiling_fraction")
    if not fractions or not weights:
        return lines + [""]
    over = {key: f for key, f in fractions.items() if f > 1.0}
    if over:
        names = ", ".join(f"{data['contenders'][k]['name']} ({f:.0%})" for k, f in over.items())
        return lines + [
            "",
            f"**No fractions of the ceiling are given**: {names} would exceed it, so the "
            "ceiling was measured too low (the machine's bandwidth moved during the run).",
            "",
        ]
    lines += ["", "| model | bytes per token | best median | of the ceiling |", "|---|---|---|---|"]
    for key, fraction in fractions.items():
        contender = data["contenders"][key]
        best = max(s["median"] for s in contender["tokens_per_s"].values())
        megabytes = weights * contender["bytes_per_weight"] / 1e6
        lines.append(
            f"| {contender['name']} | {megabytes:.0f} MB | {best:.1f} tok/s | {fraction:.0%} |"
        )
    return lines + [""]


def over_ceiling(data: dict) -> list[str]:
    """The contenders whose fraction of the ceiling is over 100%."""
    return [key for key, f in (data.get("ceiling_fraction") or {}).items() if f > 1.0]


def format_profile(data: dict) -> str:
    """The decode graphs' operations by kind, step 17 against the fast model."""
    ops = data.get("decode_ops")
    if not ops:
        return "(this benchmark data has no operation counts)\n"
    kinds = sorted(set(ops["step17"]) | set(ops["fast"]), key=lambda k: -ops["step17"].get(k, 0))
    lines = [
        f"Operations in the one-token (decode) graph, {data['config']['n_layer']} layers "
        "(constants and weight references left out):",
        "",
        "| operation | step 17 | fast |",
        "|---|---|---|",
    ]
    lines += [f"| {k} | {ops['step17'].get(k, 0)} | {ops['fast'].get(k, 0)} |" for k in kinds]
    lines.append(
        f"| **total** | **{sum(ops['step17'].values())}** | **{sum(ops['fast'].values())}** |"
    )
    return "\n".join(lines + format_projection(data.get("projection"))) + "\n"


def format_projection(projection: dict | None) -> list[str]:
    """The head's projection timed alone (bench --profile), as table lines."""
    if not projection:
        return ["", "(the head's projection was not timed alone: run with --profile)"]
    n_out, n_in = projection["shape"]
    names = {
        "max_matmul": "MAX's matmul (`x @ W.T`, one-op graph)",
        "our_kernel": "our kernel (`gpt2_linear_rows`, one-op graph)",
        "torch_linear": "PyTorch's `linear`",
    }
    lines = [
        "",
        f"The head's projection alone: one row times the {n_out} x {n_in} "
        f"{projection['dtype']} table ({projection['table_bytes'] / 1e6:.0f} MB), "
        "interleaved rounds:",
        "",
        "| implementation | ms per call (min-max) | GB/s read |",
        "|---|---|---|",
    ]
    for key, name in names.items():
        stats = projection["milliseconds"][key]
        lines.append(f"| {name} | {format_spread(stats)} | {projection['gb_per_s'][key]:.1f} |")
    return lines


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for contender in data["contenders"].values():
        lengths = sorted(int(n) for n in contender["tokens_per_s"])
        stats = [contender["tokens_per_s"][str(n)] for n in lengths]
        medians = [s["median"] for s in stats]
        errors = [
            [m - s["min"] for m, s in zip(medians, stats, strict=True)],
            [s["max"] - m for m, s in zip(medians, stats, strict=True)],
        ]
        axes.errorbar(lengths, medians, yerr=errors, marker="o", capsize=3, label=contender["name"])
    axes.axhline(
        data["roofline_tokens_per_s"], color="grey", linestyle="--", label="bandwidth ceiling"
    )
    axes.set_xscale("log", base=2)
    axes.set_xlabel("generated tokens")
    axes.set_ylabel("tokens / s (median, min-max)")
    axes.set_title(f"GPT-2 124M shapes, {data['dtype']}, batch 1, greedy, {data['device']}")
    axes.legend(fontsize=7)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def output_suffix(data: dict) -> str:
    """'' for the CPU in float32 (results.md, ...), else e.g. '_bfloat16' or
    '_gpu_float32': each device and dtype keeps its own files in the book."""
    if data["device"] == "cpu":
        return "" if data["dtype"] == "float32" else f"_{data['dtype']}"
    return f"_{data['device']}_{data['dtype']}"


def render(data: dict, out: Path) -> str:
    """Write the book's table (results*.md) and plot from the benchmark data."""
    report = format_report(data)
    suffix = output_suffix(data)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"results{suffix}.md").write_text(report)
    (out / f"profile{suffix}.md").write_text(format_profile(data))
    plot(data, out / f"tokens_per_second{suffix}.png")
    (out / f"results{suffix}.json").write_text(json.dumps(data, indent=1) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--lengths",
        type=int,
        nargs="+",
        default=list(LENGTHS),
        help="numbers of new tokens to time (default 32 128 512)",
    )
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument(
        "--device", choices=["cpu", "gpu"], default=None, help="default: gpu when MAX sees one"
    )
    parser.add_argument("--json", type=Path, help="write every figure to this JSON file")
    parser.add_argument(
        "--out", type=Path, default=OUT, help="where the book's table and plot go (docs/src/bench)"
    )
    parser.add_argument("--no-book", action="store_true", help="do not write the table and plot")
    parser.add_argument(
        "--render",
        type=Path,
        metavar="JSON",
        help="only render the table and plot from a JSON file",
    )
    parser.add_argument(
        "--no-cache-max",
        type=int,
        default=32,
        help="longest run of step 16's model without a cache (it is quadratic; 0 skips it)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also time the head's projection alone: MAX's matmul, our kernel, PyTorch",
    )
    parser.add_argument("--prefill-length", type=int, default=PREFILL_LENGTH)
    parser.add_argument(
        "--bandwidth-repeats", type=int, default=3, help="sums per size per bandwidth probe"
    )
    parser.add_argument(  # tests: small arrays
        "--bandwidth-sizes", type=int, nargs="+", default=[256, 1024], help=argparse.SUPPRESS
    )
    parser.add_argument("--config", type=json.loads, help=argparse.SUPPRESS)  # tests: tiny shapes
    args = parser.parse_args(argv)
    if args.repeats < 1 or min(args.lengths) < 1:
        parser.error("--repeats and --lengths must be at least 1")
    max_runtime.prepare()
    if args.render is not None:
        try:
            data = json.loads(args.render.read_text())
        except (OSError, json.JSONDecodeError) as error:
            print(f"error: cannot read {args.render}: {error}", file=sys.stderr)
            return 2
        print(render(data, args.out))
        return 0
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print(
            "error: the benchmark compares against transformers: install the test extras "
            '(pip install -e ".[test]", or use `pixi run bench`).',
            file=sys.stderr,
        )
        return 2
    try:
        data = run(args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return 130
    report = render(data, args.out) if not args.no_book else format_report(data)
    print(report)
    if over_ceiling(data):
        print(
            "warning: a contender read faster than the measured ceiling, so the report gives "
            "no fraction of it: the bandwidth moved during the run; measure again.",
            file=sys.stderr,
        )
    if data["load"]["busy"]:
        print(
            "warning: the machine was busy while measuring (see the load line); the ratios "
            "are paired round by round, but rerun on a quiet machine for figures to publish.",
            file=sys.stderr,
        )
    if args.json is not None:
        args.json.write_text(json.dumps(data, indent=1) + "\n")
        print(f"Wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
