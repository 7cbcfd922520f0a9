"""`python -m devtools.bench.chain`: how fast a decoded token's blocks stream
their weights, against how fast this machine reads memory, in one run.

A decoded token reads every weight of GPT-2's 12 blocks once (c_attn, c_proj,
c_fc and the MLP's c_proj: 85 M weights, 170 MB in bfloat16, 340 MB in
float32, far more than the caches hold). This times the blocks' weights read
four ways, in one graph each, in rounds, each right after the benchmark's
bandwidth probe (sums over 1 GiB on every core, by PyTorch and by our own
kernel, the faster counting):

- **a call per projection**: the four products of each block as four calls
  of our row kernel (`gpt2_linear_rows`), each output the next one's input;
  the cores go back to MAX's executor after every call;
- **a call per block**: each block as one call of `gpt2_decode_blocks`, its
  layer norms, attention and residual adds included, the cores sharing
  every step without handing back;
- **a call per token**: the twelve blocks as one call of
  `gpt2_decode_blocks`, as the fast model decodes: no hand-back between
  blocks either;
- **one call**: as many bytes in one matrix, one call of the row kernel:
  long streams, no step to start or end between them, what the kernel's
  reads reach on this machine in that round.

It prints the bytes per second of each, their ratio to the probe read just
before it (the fraction of the machine's read bandwidth the weights' stream
reaches once the calls follow one another, which is what a decoded token can
reach at best) and to the one call of the same round (what the steps and
calls between the reads cost).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from common import max_runtime
from common.cli import ArgumentParser, exit_status
from common.steps import REPO
from devtools.bench.machine import machine_line, seconds_for, wait_until_idle
from devtools.bench.probe import READERS, ReadProbe
from devtools.bench.stats import format_percent, format_spread, summary

EMBED, HEADS, CONTEXT = 768, 12, 1024
# A block's parameters in gpt2_decode_blocks' order: (name, shape); the
# matrices are [out, in], as a MAX Linear holds them. The kernel takes the
# vectors as [1, n] matrices in the weights' dtype (fast/gpt2.py).
BLOCK = (
    ("ln_1.weight", (EMBED,)),
    ("ln_1.bias", (EMBED,)),
    ("c_attn.weight", (3 * EMBED, EMBED)),
    ("c_attn.bias", (3 * EMBED,)),
    ("attn.c_proj.weight", (EMBED, EMBED)),
    ("attn.c_proj.bias", (EMBED,)),
    ("ln_2.weight", (EMBED,)),
    ("ln_2.bias", (EMBED,)),
    ("c_fc.weight", (4 * EMBED, EMBED)),
    ("c_fc.bias", (4 * EMBED,)),
    ("mlp.c_proj.weight", (EMBED, 4 * EMBED)),
    ("mlp.c_proj.bias", (EMBED,)),
)
WAYS = {
    "projections": "a call per projection (`gpt2_linear_rows`)",
    "blocks": "a call per block (`gpt2_decode_blocks`)",
    "token": "a call per token, all blocks (`gpt2_decode_blocks`)",
    "one_call": "one call, one matrix of the same bytes (`gpt2_linear_rows`)",
}
OUT = REPO / "docs" / "src" / "bench" / "chain.md"


def block_inputs(blocks: int, dtype_name: str) -> tuple[list, list, list, int]:
    """The graph's inputs, one row of x and the caches, as MAX buffers and as
    the torch tensors whose memory they borrow; then each block's parameters
    in `dtype_name` (the matrices from the profile's random_operands, the
    layer norms' weights 1, every bias 0, as [1, n]), the graph's weights as
    torch tensors; and the matrices' bytes."""
    import torch
    from max.driver import Buffer

    from devtools.bench.profile import random_operands

    # The caches in the weights' dtype, as the fast model holds them; random,
    # so that a token at a later position (kernels_ab --position) attends
    # over keys and values that differ.
    generator = torch.Generator().manual_seed(0)
    kv_shape = (blocks, 1, HEADS, CONTEXT, EMBED // HEADS)
    key_cache, value_cache = (
        torch.randn(kv_shape, generator=generator).to(getattr(torch, dtype_name)) for _ in range(2)
    )
    tensors = [torch.randn(1, 1, EMBED, generator=generator), key_cache, value_cache]
    parameters = []
    weight_bytes = 0
    for block in range(blocks):
        for index, (name, shape) in enumerate(BLOCK):
            if len(shape) == 2:
                weight = random_operands(*shape, dtype_name, 1, seed=block * 16 + index)[1]
                weight_bytes += weight.numel() * weight.element_size()
                parameters.append(weight)
            else:
                is_scale = name.startswith("ln_") and name.endswith("weight")
                vector = torch.ones(1, *shape) if is_scale else torch.zeros(1, *shape)
                parameters.append(vector.to(getattr(torch, dtype_name)))
    return [Buffer.from_dlpack(t) for t in tensors], tensors, parameters, weight_bytes


def chain_graph(
    blocks: int,
    dtype_name: str,
    way: str,
    parameters: list,
    kernels: Path | None = None,
    op_prefix: str = "",
    position: int = 0,
):
    """A compiled graph of `blocks` blocks read `way` ("projections",
    "blocks" or "token"), the token at `position`, that takes x and the
    caches and returns the last block's output. The blocks' `parameters`
    (torch tensors, block_inputs') are its weights, as the fast model's are:
    a graph input costs MAX's `execute` about a microsecond each. The ops
    come from fast/kernels, or from the kernel library `kernels` whose op
    names start with `op_prefix` (devtools.bench.kernels_ab's other kernels)."""
    import numpy as np
    from max.driver import CPU
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.graph import BufferType, DeviceRef, Graph, TensorType, Weight, ops

    from fast.gpt2 import DTYPES
    from fast.kernel_ops import KERNELS

    cpu = DeviceRef.CPU()
    kv_shape = [blocks, 1, HEADS, CONTEXT, EMBED // HEADS]
    cache_type = BufferType(DTYPES[dtype_name], kv_shape, device=cpu)
    types = [TensorType(DType.float32, [1, 1, EMBED], device=cpu), cache_type, cache_type]
    names = [f"parameter_{index}" for index in range(len(parameters))]

    def constant(values, dtype):
        return ops.constant(np.array(values, dtype=dtype.to_numpy()), dtype, device=cpu)

    with Graph(
        "chain", input_types=types, custom_extensions=[max_runtime.precompiled(kernels or KERNELS)]
    ) as graph:
        x = graph.inputs[0].tensor
        key_cache, value_cache = graph.inputs[1].buffer, graph.inputs[2].buffer
        weights = [
            graph.add_weight(Weight(name, DTYPES[dtype_name], list(tensor.shape), cpu))
            for name, tensor in zip(names, parameters, strict=True)
        ]
        if way != "projections":
            per_call = 1 if way == "blocks" else blocks
            for first in range(0, blocks, per_call):
                x = ops.inplace_custom(
                    f"{op_prefix}gpt2_decode_blocks",
                    cpu,
                    [
                        key_cache,
                        value_cache,
                        x,
                        constant([1e-5] * 2 * per_call, DType.float32),
                        constant([position], DType.int64),
                        constant([first], DType.int64),
                        *weights[first * len(BLOCK) : (first + per_call) * len(BLOCK)],
                    ],
                    [TensorType(DType.float32, [1, 1, EMBED], device=cpu)],
                )[0]
        else:
            row = x.reshape([1, EMBED])
            for index, (_, shape) in enumerate(BLOCK * blocks):
                if len(shape) == 1:
                    continue
                # The row kernel's bias is float32 [out]: zeros, as the blocks' are.
                bias = constant(np.zeros(shape[0]), DType.float32)
                out_type = TensorType(DType.float32, [1, shape[0]], device=cpu)
                (row,) = ops.custom(
                    f"{op_prefix}gpt2_linear_rows", cpu, [row, weights[index], bias], [out_type]
                )
                if shape[0] == 3 * EMBED:
                    row = row[:, :EMBED]  # c_proj takes the attention's width
            x = row.reshape([1, 1, EMBED])
        graph.output(x)
    registry = dict(zip(names, parameters, strict=True))
    return InferenceSession(devices=[CPU()]).load(graph, weights_registry=registry)


def one_call(weight_bytes: int, dtype_name: str) -> tuple:
    """The row kernel's graph on one [rows, EMBED] matrix of `weight_bytes`
    bytes and one row of x, its buffers and the torch tensors they borrow."""
    from max.driver import Buffer

    from devtools.bench.profile import one_op_graphs, random_operands
    from fast.gpt2 import DTYPES

    rows = weight_bytes // (EMBED * DTYPES[dtype_name].size_in_bytes)
    graph = one_op_graphs(rows, EMBED, dtype_name, 1, {"ours": "gpt2_linear_rows"})["ours"]
    tensors = random_operands(rows, EMBED, dtype_name, 1)
    return graph, [Buffer.from_dlpack(t) for t in tensors], tensors


def measure(dtypes: list[str], blocks: int, rounds: int, calls: int, probe_mb: int = 1024) -> dict:
    """GB/s of each way and dtype (median of `calls` calls per round), each
    right after a probe; the ratio to that probe and to the one call of the
    same round."""
    chains, borrowed = {}, []
    for name in dtypes:
        buffers, tensors, parameters, weight_bytes = block_inputs(blocks, name)
        borrowed.append(tensors)  # the buffers share their memory: keep it alive
        for way in WAYS:
            if way == "one_call":
                graph, way_buffers, tensors = one_call(weight_bytes, name)
                borrowed.append(tensors)
            else:
                graph, way_buffers = chain_graph(blocks, name, way, parameters), buffers
            graph.execute(*way_buffers)  # warm-up
            chains[name, way] = (graph, way_buffers, weight_bytes)
    max_runtime.demote_idle_pollers()  # as the fast model's generator does
    read_probe = ReadProbe((probe_mb,), best_of=1)
    speeds = {key: [] for key in chains}
    probe_before = {key: [] for key in chains}  # the memory's speed moves within seconds
    for _ in range(rounds):
        for key, (graph, buffers, weight_bytes) in chains.items():
            probe_before[key].append(read_probe())
            wait_until_idle([os.getpid()])
            speeds[key].append(weight_bytes / median_call(graph, buffers, calls) / 1e9)
    return dict(
        machine=machine_line(),
        blocks=blocks,
        probe=summary([max(reading.values()) for reading in read_probe.readings]),
        probe_by_reader={
            reader: summary([reading[reader] for reading in read_probe.readings])
            for reader in READERS
        },
        probe_mb=probe_mb,
        chains=[
            dict(
                dtype=name,
                way=way,
                gb_per_s=summary(values),
                of_probe=summary(
                    [v / p for v, p in zip(values, probe_before[name, way], strict=True)]
                ),
                of_one_call=summary(
                    [v / one for v, one in zip(values, speeds[name, "one_call"], strict=True)]
                ),
            )
            for (name, way), values in speeds.items()
        ],
    )


def median_call(graph, buffers: list, calls: int) -> float:
    """The median seconds of `calls` calls of the compiled `graph`."""
    times = sorted(seconds_for(graph.execute, *buffers) for _ in range(calls))
    return times[len(times) // 2]


def format_table(data: dict) -> str:
    lines = [
        f"Machine: {data['machine']}.",
        "",
        f"The weights of {data['blocks']} GPT-2 block{'s' if data['blocks'] != 1 else ''} "
        "(124M's shapes), one token, "
        "`python -m devtools.bench.chain`; medians over interleaved rounds (min-max):",
        "",
        "| reading | GB/s | of the probe just before it | of one call, round by round |",
        "|---|---|---|---|",
        f"| the probe: the faster sum over {data['probe_mb']} MiB on every core | "
        f"{format_spread(data['probe'])} | - | - |",
    ]
    for reader, spread in data["probe_by_reader"].items():
        lines.append(f"| the probe, by {READERS[reader]} | {format_spread(spread)} | - | - |")
    for chain in data["chains"]:
        lines.append(
            f"| {chain['dtype']} weights, {WAYS[chain['way']]} | "
            f"{format_spread(chain['gb_per_s'])} | {format_percent(chain['of_probe'])} | "
            f"{format_percent(chain['of_one_call']) if chain['way'] != 'one_call' else '-'} |"
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(
        prog="python -m devtools.bench.chain", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--dtypes", nargs="+", choices=["float32", "bfloat16"], default=["float32", "bfloat16"]
    )
    add_round_arguments(parser, rounds=5, calls_help="calls per chain per round")
    parser.add_argument("--probe-mb", type=int, default=1024, help=argparse.SUPPRESS)  # tests
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-book", action="store_true", help="print only")
    return parse_round_arguments(parser, argv)


def add_round_arguments(parser: argparse.ArgumentParser, rounds: int, calls_help: str) -> None:
    """--blocks, --rounds and --calls (this tool's and kernels_ab's)."""
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--calls", type=int, default=9, help=calls_help)


def parse_round_arguments(
    parser: argparse.ArgumentParser, argv: list[str] | None
) -> argparse.Namespace:
    """The parsed arguments, a usage error where a count is below 1."""
    args = parser.parse_args(argv)
    if min(args.blocks, args.rounds, args.calls) < 1:
        parser.error("--blocks, --rounds and --calls must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    def run() -> None:
        args = parse_args(argv)
        max_runtime.prepare()
        data = measure(args.dtypes, args.blocks, args.rounds, args.calls, args.probe_mb)
        table = format_table(data)
        print(table)
        if not args.no_book:
            args.out.write_text(table)
            print(f"Wrote {args.out}")

    return exit_status(run)


if __name__ == "__main__":
    sys.exit(main())
