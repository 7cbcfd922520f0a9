"""Where a decoded token's time goes on a GPU: its kernels, one by one.

The fast model's decode graph on a GPU is MAX's operations alone. Nsight
Compute (`ncu`) times every kernel a program launches; this module is the
program it traces, and the summary of what it recorded:

    ncu --clock-control none --metrics gpu__time_duration.sum -o trace \\
        python -m devtools.bench.gpu_kernels run --dtype bfloat16
    ncu --import trace.ncu-rep --csv --page raw > kernels.csv
    python -m devtools.bench.gpu_kernels summarize kernels.csv

`run` loads GPT-2 124M's shapes (random weights, as the benchmark does),
prefills a 16-token prompt and decodes --tokens tokens, printing each
token's wall-clock time (meaningful without the profiler only: under it,
every kernel waits for the one before). `summarize` finds the decode's
kernels in the trace (the sequence that repeats once per token at the
trace's end) and prints the GPU time a token's kernels add up to, by kernel
family. Set against a token's wall-clock time (the benchmark's table), it
says what the GPU is busy for, and what it waits for.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from common.cli import ArgumentParser, UsageError, exit_status


def run(
    dtype_name: str, tokens: int, device_name: str = "gpu", config: dict | None = None
) -> list[float]:
    """Decode `tokens` tokens on the GPU (or `device_name`) with GPT-2 124M's
    shapes (or those `config` changes); the wall-clock seconds of each."""
    import numpy as np
    from max.dtype import DType

    from common import max_runtime
    from devtools.bench.measuring import GPT2_124M, PROMPT_LENGTH
    from fast import devices as fast_devices
    from fast import gpt2 as fast_gpt2
    from tests.fixtures import hf_model

    max_runtime.prepare()
    shapes = dict(GPT2_124M, **(config or {}))
    if tokens < 1 or PROMPT_LENGTH + tokens > shapes["n_positions"]:
        raise UsageError(
            f"--tokens must be 1 to {shapes['n_positions'] - PROMPT_LENGTH}: a "
            f"{PROMPT_LENGTH}-token prompt and the tokens fit in {shapes['n_positions']} positions."
        )
    try:
        device = fast_devices.device_from_name(device_name)
    except ValueError as error:
        raise UsageError(str(error)) from error
    dtype = DType.bfloat16 if dtype_name == "bfloat16" else DType.float32
    with tempfile.TemporaryDirectory() as directory:
        hf_model(**shapes).save_pretrained(directory)
        generator = fast_gpt2.FastGenerator(
            fast_gpt2.load(Path(directory), dtype=dtype, device=device)
        )
    prompt = np.random.default_rng(0).integers(0, shapes["vocab_size"], PROMPT_LENGTH)
    token = int(np.argmax(generator.logits(prompt.tolist())))
    seconds = []
    for position in range(PROMPT_LENGTH, PROMPT_LENGTH + tokens):
        started = time.perf_counter()
        token = int(np.argmax(generator.logits([token], start=position)))
        seconds.append(time.perf_counter() - started)
    return seconds


def read_kernels(path: Path) -> list[tuple[str, float]]:
    """(kernel name, microseconds) in launch order, from `ncu --csv --page raw`:
    a header row, a row of units, then a row per kernel."""
    with path.open(newline="") as file:
        rows = [row for row in csv.reader(file) if row]
    header_at = next((i for i, row in enumerate(rows) if "Kernel Name" in row), None)
    if header_at is None:
        raise UsageError(f"{path} has no 'Kernel Name' column: not ncu's --csv --page raw output")
    header, units = rows[header_at], rows[header_at + 1]
    name_at, time_at = header.index("Kernel Name"), header.index("gpu__time_duration.sum")
    microseconds = {
        "ns": 1e-3,
        "nsecond": 1e-3,
        "us": 1.0,
        "usecond": 1.0,
        "ms": 1e3,
        "msecond": 1e3,
    }
    if units[time_at] not in microseconds:
        raise UsageError(f"{path}: kernel times in {units[time_at]!r}, not ns, us or ms")
    scale = microseconds[units[time_at]]
    return [
        (row[name_at], float(row[time_at].replace(",", "")) * scale)
        for row in rows[header_at + 2 :]
    ]


def token_period(names: list[str], repeats: int = 3) -> int:
    """The number of kernels a decoded token launches: the shortest period
    the trace's last `repeats` periods all follow."""
    for period in range(1, len(names) // repeats + 1):
        tail = names[-period * repeats :]
        if all(tail[i] == tail[i % period] for i in range(len(tail))):
            return period
    raise UsageError("no sequence of kernels repeats at the trace's end: decode more tokens")


def family(kernel: str) -> str:
    """A kernel's name without the hash MAX appends to each specialization
    (`mogg_foreach_r5_w8_b256_gs_True_afba3507`: one per fused elementwise
    function), nor any template arguments and parameters."""
    return re.sub(r"_[0-9a-f]{8,}$", "", kernel.split("(")[0].split("<")[0].strip())


def summarize(path: Path, repeats: int = 3) -> str:
    """The Markdown the book includes: a token's kernel count and GPU time
    (the median of the trace's last `repeats` tokens), and a row per family."""
    kernels = read_kernels(path)
    period = token_period([name for name, _ in kernels], repeats)
    tokens = [kernels[len(kernels) - (k + 1) * period :][:period] for k in range(repeats)]
    per_token = [sum(us for _, us in token) for token in tokens]
    counts = Counter(family(name) for name, _ in tokens[0])
    family_times = [Counter() for _ in tokens]
    for times, token in zip(family_times, tokens, strict=True):
        for name, us in token:
            times[family(name)] += us
    # Each family's time is its median over those tokens.
    by_family = {name: statistics.median(times[name] for times in family_times) for name in counts}
    lines = [
        f"A decoded token launches {period} kernels; they run for "
        f"{statistics.median(per_token):.0f} us of GPU time "
        f"(the trace's last {repeats} tokens: {', '.join(f'{t:.0f}' for t in per_token)} us).",
        "",
        "| kernel | launches | GPU time (us) | share |",
        "|---|---|---|---|",
    ]
    total = sum(by_family.values())
    for name, us in sorted(by_family.items(), key=lambda item: -item[1]):
        lines.append(f"| `{name[:70]}` | {counts[name]} | {us:.1f} | {us / total:.0%} |")
    return "\n".join(lines)


def _main(argv: list[str] | None) -> int:
    parser = ArgumentParser(prog="python -m devtools.bench.gpu_kernels", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    traced = commands.add_parser("run", help="the program to trace: decode on the GPU")
    traced.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    traced.add_argument("--tokens", type=int, default=8)
    traced.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    traced.add_argument("--config", type=json.loads, help=argparse.SUPPRESS)  # tests: tiny shapes
    summary = commands.add_parser("summarize", help="a token's kernels from ncu's CSV")
    summary.add_argument("csv", type=Path)
    args = parser.parse_args(argv)
    if args.command == "run":
        seconds = run(args.dtype, args.tokens, args.device, args.config)
        print(f"wall clock per token (ms): {' '.join(f'{s * 1e3:.2f}' for s in seconds)}")
    else:
        if not args.csv.is_file():
            raise UsageError(f"{args.csv} is not a file")
        print(summarize(args.csv))
    return 0


def main(argv: list[str] | None = None) -> int:
    return exit_status(lambda: _main(argv))


if __name__ == "__main__":
    sys.exit(main())
