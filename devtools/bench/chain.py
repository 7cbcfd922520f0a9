"""`python -m devtools.bench.chain`: how fast one token's projections stream
their weights, against how fast this machine reads memory, in one run.

A decoded token is 48 projections in a row (GPT-2's 12 blocks of four), each
its own call of our kernel, each reading its weights from memory once. This
times a chain of 24 MLP pairs (768 -> 3072 -> 768, distinct weights, 226 MB
in bfloat16 and 453 MB in float32, both far larger than the caches) in one
graph, interleaved with the benchmark's bandwidth probe (a sum over 1 GiB on
every core), and prints the bytes per second of each and their ratio: the
fraction of the machine's read bandwidth the kernels reach once the calls
follow one another, which is what a decoded token can reach at best.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common import max_runtime
from common.cli import ArgumentParser, exit_status
from common.steps import REPO
from devtools.bench.machine import machine_line, read_bandwidth, seconds_for
from devtools.bench.stats import format_spread, summary

EMBED, INNER = 768, 3072
OUT = REPO / "docs" / "src" / "bench" / "chain.md"


def chain_graph(pairs: int, dtype_name: str):
    """A compiled graph of `pairs` MLP pairs through gpt2_linear_rows, one
    row of x, each pair's output the next one's input."""
    import numpy as np
    from max.driver import CPU
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.graph import DeviceRef, Graph, TensorType, ops

    from fast.gpt2 import DTYPES, KERNELS

    cpu = DeviceRef.CPU()
    weight_dtype = DTYPES[dtype_name]
    types = [TensorType(DType.float32, [1, EMBED], device=cpu)]
    for _ in range(pairs):
        types += [
            TensorType(weight_dtype, [INNER, EMBED], device=cpu),
            TensorType(weight_dtype, [EMBED, INNER], device=cpu),
        ]
    with Graph("chain", input_types=types, custom_extensions=[KERNELS]) as graph:
        x = graph.inputs[0]
        for pair in range(pairs):
            for weight in graph.inputs[1 + 2 * pair : 3 + 2 * pair]:
                n_out = int(weight.shape[0])
                bias = ops.constant(np.zeros(n_out, np.float32), DType.float32, device=cpu)
                out_type = TensorType(DType.float32, [1, n_out], device=cpu)
                x = ops.custom("gpt2_linear_rows", cpu, [x, weight, bias], [out_type])[0]
        graph.output(x)
    return InferenceSession(devices=[CPU()]).load(graph)


def chain_inputs(pairs: int, dtype_name: str) -> tuple[list, list, int]:
    """The chain's buffers (one row of x, then each projection's random
    weights, from the profile's random_operands), the torch tensors whose
    memory they borrow, and the weights' bytes."""
    from max.driver import Buffer

    from devtools.bench.profile import random_operands

    x = random_operands(INNER, EMBED, dtype_name, 1)[0]
    shapes = ((INNER, EMBED), (EMBED, INNER)) * pairs
    weights = [
        random_operands(n_out, n_in, dtype_name, 1, seed=seed)[1]
        for seed, (n_out, n_in) in enumerate(shapes)
    ]
    tensors = [x, *weights]
    weight_bytes = sum(w.numel() * w.element_size() for w in weights)
    return [Buffer.from_dlpack(t) for t in tensors], tensors, weight_bytes


def measure(dtypes: list[str], pairs: int, rounds: int, calls: int, probe_mb: int = 1024) -> dict:
    """GB/s of each chain (median of `calls` calls per round) and of the
    probe, interleaved round by round; the ratio paired by round."""
    chains, borrowed = {}, []
    for name in dtypes:
        buffers, tensors, weight_bytes = chain_inputs(pairs, name)
        borrowed.append(tensors)  # the buffers share their memory: keep it alive
        chains[name] = (chain_graph(pairs, name), buffers, weight_bytes)
        chains[name][0].execute(*buffers)  # warm-up
    probe, speeds = [], {name: [] for name in dtypes}
    for _ in range(rounds):
        probe.append(read_bandwidth((probe_mb,), best_of=1))
        for name, (graph, buffers, weight_bytes) in chains.items():
            times = sorted(seconds_for(graph.execute, *buffers) for _ in range(calls))
            speeds[name].append(weight_bytes / times[len(times) // 2] / 1e9)
    return dict(
        machine=machine_line(),
        pairs=pairs,
        probe=summary(probe),
        probe_mb=probe_mb,
        chains={
            name: dict(
                gb_per_s=summary(values),
                of_probe=summary([v / p for v, p in zip(values, probe, strict=True)]),
            )
            for name, values in speeds.items()
        },
    )


def format_table(data: dict) -> str:
    lines = [
        f"Machine: {data['machine']}.",
        "",
        f"A chain of {2 * data['pairs']} projections (768 -> 3072 -> 768, one row), "
        "`python -m devtools.bench.chain`; medians over interleaved rounds (min-max):",
        "",
        "| reading | GB/s | of the probe, round by round |",
        "|---|---|---|",
        f"| the probe: a sum over {data['probe_mb']} MiB on every core | "
        f"{format_spread(data['probe'])} | - |",
    ]
    for name, chain in data["chains"].items():
        of_probe = {k: 100 * chain["of_probe"][k] for k in ("median", "min", "max")}
        lines.append(
            f"| our kernels, {name} weights | {format_spread(chain['gb_per_s'])} | "
            f"{format_spread(of_probe, unit='%', digits=0)} |"
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(
        prog="python -m devtools.bench.chain", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--dtypes", nargs="+", choices=["float32", "bfloat16"], default=["float32", "bfloat16"]
    )
    parser.add_argument("--pairs", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=9, help="calls per chain per round")
    parser.add_argument("--probe-mb", type=int, default=1024, help=argparse.SUPPRESS)  # tests
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-book", action="store_true", help="print only")
    args = parser.parse_args(argv)
    if min(args.pairs, args.rounds, args.calls) < 1:
        parser.error("--pairs, --rounds and --calls must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    def run() -> None:
        args = parse_args(argv)
        max_runtime.prepare()
        data = measure(args.dtypes, args.pairs, args.rounds, args.calls, args.probe_mb)
        table = format_table(data)
        print(table)
        if not args.no_book:
            args.out.write_text(table)
            print(f"Wrote {args.out}")

    return exit_status(run)


if __name__ == "__main__":
    sys.exit(main())
