"""Step 30's Q8_0 kernel against step 27's dequantize-then-matmul, one token through SmolLM2's layers.

    python -m devtools.bench.q8_kernel [--rounds 7] [--repeats 20] [--out docs/src/bench/q8_kernel.md]

Three ways to compute one row x [1, in] times a Linear's weight [out, in],
each a Module compiled once for its layer: a float32 Linear (MAX's matmul on
4 bytes a weight), step 27's Q8Linear (the blocks widened to a float32
weight in the graph, then MAX's matmul), and step 30's kernel
(solutions/solution_30.mojo, which reads the blocks, 1.0625 bytes a weight).
The layers are SmolLM2-135M's: the attention's q and o projections
(576 -> 576), k and v (576 -> 192), the MLP's gate and up (576 -> 1536) and
down (1536 -> 576), and the head (576 -> 49152). Random weights, quantized
to Q8_0 by the reference. Each round times every contender once per layer,
in an order that rotates from round to round; the table gives medians and
min-max over the rounds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

from devtools.bench import command, machine, reporting, stats

LAYERS = {
    "q_proj, o_proj": (576, 576),
    "k_proj, v_proj": (576, 192),
    "gate_proj, up_proj": (576, 1536),
    "down_proj": (1536, 576),
    "lm_head": (576, 49152),
}
CONTENDERS = {
    "float32": "float32 Linear (MAX's matmul)",
    "dequantize": "Q8_0, dequantize then matmul (step 27)",
    "kernel": "Q8_0, the kernel (step 30)",
}
BYTES_PER_WEIGHT = {"float32": 4.0, "dequantize": 34 / 32, "kernel": 34 / 32}


def compiled_layers(rng: np.random.Generator) -> tuple[dict, dict]:
    """({layer: {contender: compiled module}}, {layer: x}) for every layer."""
    from max.dtype import DType
    from max.experimental.nn import Linear
    from max.experimental.tensor import Tensor
    from max.graph import TensorType

    from common import q8_kernel
    from common.steps import step
    from solutions.solution_27 import Q8Linear
    from tests import reference_quant as ref

    kernel_linear = q8_kernel.kernel_linear(q8_kernel.library(step(30).solution), Q8Linear)
    graphs, inputs = {}, {}
    for name, (in_dim, out_dim) in LAYERS.items():
        weight = (rng.standard_normal((out_dim, in_dim)) * 0.02).astype(np.float32)
        scales, values = ref.quantize_q8_0(weight)
        dense = Linear(in_dim, out_dim, bias=False)
        dense.load_state_dict({"weight": weight})
        layers = {"float32": dense, "dequantize": Q8Linear(in_dim, out_dim)}
        layers["kernel"] = kernel_linear(in_dim, out_dim)
        for key in ("dequantize", "kernel"):
            layers[key].load_state_dict({"scales": scales, "values": values})
        x_type = TensorType(DType.float32, [1, in_dim], device=dense.weight.device)
        graphs[name] = {key: layer.compile(x_type) for key, layer in layers.items()}
        inputs[name] = Tensor(rng.standard_normal((1, in_dim)).astype(np.float32))
    return graphs, inputs


def timed(run: Callable[[], object], repeats: int) -> float:
    """Microseconds per call: the mean of `repeats` back-to-back calls."""
    started = time.perf_counter()
    for _ in range(repeats):
        run()
    return 1e6 * (time.perf_counter() - started) / repeats


def measure(rounds: int, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    graphs, inputs = compiled_layers(rng)
    compile_seconds = time.perf_counter() - started
    monitor = machine.LoadMonitor()
    results = {}
    for name, layer_graphs in graphs.items():
        x = inputs[name]
        runs = {key: (lambda g=g, x=x: g(x).to_numpy()) for key, g in layer_graphs.items()}
        for run in runs.values():  # warm-up: a first call pays extra
            run()
        samples: dict[str, list[float]] = {key: [] for key in runs}
        for order in stats.round_orders(list(runs), rounds):
            for key in order:
                machine.wait_until_idle([os.getpid()])
                samples[key].append(timed(runs[key], repeats))
        ratios = stats.paired_ratios(samples["dequantize"], samples["kernel"])
        results[name] = {key: stats.summary(us) for key, us in samples.items()}
        results[name]["speedup"] = stats.summary(ratios)
    return dict(
        machine=machine.machine_line(),
        load=monitor.finish(),
        rounds=rounds,
        repeats=repeats,
        compile_seconds=compile_seconds,
        results=results,
    )


def format_report(data: dict) -> str:
    lines = [
        f"Machine: {data['machine']}. One token (x of one row), float32 activations, each "
        f"layer compiled once per contender ({data['compile_seconds']:.0f} s for all); "
        f"{data['rounds']} interleaved rounds of {data['repeats']} calls each after a "
        "warm-up; µs per call, median (min-max).",
        "",
        reporting.load_line(data["load"]),
        "",
        "| layer (in -> out) | " + " | ".join(CONTENDERS.values()) + " | kernel's speed-up |",
        "|---|" + "---|" * (len(CONTENDERS) + 1),
    ]
    for name, (in_dim, out_dim) in LAYERS.items():
        result = data["results"][name]
        cells = [stats.format_spread(result[key], "", 0) for key in CONTENDERS]
        speedup = stats.format_spread(result["speedup"], "x")
        lines.append(f"| {name} ({in_dim} -> {out_dim}) | " + " | ".join(cells) + f" | {speedup} |")
    lines += [
        "",
        "Bytes a weight read: "
        + ", ".join(f"{key} {b:.4g}" for key, b in BYTES_PER_WEIGHT.items())
        + " (step 27's path then writes and reads the float32 weight, 4 + 4 more). The "
        "speed-up is step 27's time over the kernel's, paired round by round.",
    ]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = command.parser("devtools.bench.q8_kernel", __doc__, rounds=7)
    parser.add_argument(
        "--repeats", type=int, default=20, help="calls timed together per sample (default 20)"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.repeats < 1:
        parser.error("--rounds and --repeats must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return command.main(
        parse_args, lambda args: measure(args.rounds, args.repeats), format_report, argv
    )


if __name__ == "__main__":
    sys.exit(main())
