"""`python -m devtools.bench.kernels_ab --against REV`: the decode kernels of
the working tree against those of a git revision, in one process, taking
turns.

A change to fast/kernels that is worth a few percent is smaller than the
memory's own moves between two benchmark runs, or between two processes that
take turns. Here both versions run in the same process on the same weights:
twelve GPT-2 blocks of 124M's shapes (devtools.bench.chain's graph, one call
per token as the fast model decodes; the token at `--position`, its
attention over that many cached keys and values and its own, random ones
in the weights' dtype, as the fast model caches them), each version's call
timed `--calls` times in each round (the median counts), the two versions
in alternating order. It prints each version's median call and the ratio of
the two, round by round: its median, quartiles and range. `--against HEAD`
on an unchanged tree measures the kernel against a copy of itself: what a
run can resolve.

The revision's kernels are copied out of git with their ops renamed
(`base_gpt2_...`), so that both libraries load side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from common import max_runtime
from common.cli import ArgumentParser, UsageError, exit_status
from common.steps import REPO
from devtools.bench.chain import (
    CONTEXT,
    EMBED,
    WAYS,
    add_round_arguments,
    block_inputs,
    chain_graph,
    median_call,
    parse_round_arguments,
)
from devtools.bench.machine import machine_line, wait_until_idle
from devtools.bench.stats import paired_ratios, summary

KERNELS_IN_REPO = "fast/kernels"
PREFIX = "base_"  # the revision's op names: base_gpt2_decode_blocks, ...
PROJECTIONS = {  # --rows: [n_out, n_in] of the MLP's two projections
    "the MLP's first projection": (4 * EMBED, EMBED),
    "the MLP's second projection": (EMBED, 4 * EMBED),
}


def git(*args: str) -> str:
    """git's output in the repository; a UsageError with git's own words
    where it fails (an unknown revision, no repository)."""
    try:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    except OSError as error:
        raise UsageError(f"cannot run git: {error}") from error
    if done.returncode != 0:
        raise UsageError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def kernels_at(revision: str, directory: Path) -> Path:
    """fast/kernels as it is at `revision`, written to `directory`, every op
    registered under PREFIX + its name."""
    try:
        names = git("ls-tree", "--name-only", f"{revision}:{KERNELS_IN_REPO}").split()
    except UsageError as error:
        raise UsageError(f"{revision} has no {KERNELS_IN_REPO} ({error})") from error
    sources = [name for name in names if name.endswith(".mojo")]
    if not sources:
        raise UsageError(f"{revision} has no Mojo files in {KERNELS_IN_REPO}")
    for name in sources:
        text = git("show", f"{revision}:{KERNELS_IN_REPO}/{name}")
        renamed = re.sub(r'register\("gpt2_', f'register("{PREFIX}gpt2_', text)
        (directory / name).write_text(renamed)
    return directory


def measure(
    revision: str,
    kernels: Path,
    dtype_name: str,
    blocks: int,
    rounds: int,
    calls: int,
    way: str,
    position: int = 0,
) -> dict:
    """Seconds per call of each version (the median of `calls`, per round),
    the rounds alternating which goes first, and the largest difference
    between their outputs; the revision's kernels are in `kernels`
    (kernels_at); the token at `position` of the caches."""
    # the torch tensors lend the buffers their memory: kept until the return
    buffers, _tensors, parameters, _ = block_inputs(blocks, dtype_name)
    graphs = {"working tree": chain_graph(blocks, dtype_name, way, parameters, position=position)}
    with revision_builds(revision):
        graphs[revision] = chain_graph(
            blocks,
            dtype_name,
            way,
            parameters,
            kernels=kernels,
            op_prefix=PREFIX,
            position=position,
        )
    return compare(graphs, buffers, revision, dtype_name, rounds, calls)


def measure_rows(
    revision: str,
    kernels: Path,
    dtype_name: str,
    shape: tuple[int, int],
    rows: int,
    rounds: int,
    calls: int,
) -> dict:
    """measure, for the projection kernel alone at `rows` rows of x against
    a weight of `shape` ([n_out, n_in])."""
    from max.driver import Buffer

    from devtools.bench.profile import one_op_graphs, random_operands

    op = "gpt2_linear_rows"
    tensors = random_operands(*shape, dtype_name, rows)
    buffers = [Buffer.from_dlpack(tensor) for tensor in tensors]
    graphs = one_op_graphs(*shape, dtype_name, rows, {"working tree": op})
    with revision_builds(revision):
        graphs |= one_op_graphs(*shape, dtype_name, rows, {revision: PREFIX + op}, kernels)
    return compare(graphs, buffers, revision, dtype_name, rounds, calls)


@contextlib.contextmanager
def revision_builds(revision: str):
    """MAX's compile errors, building the revision's kernels, as a UsageError
    that names the revision."""
    try:
        yield
    except Exception as error:  # MAX's compile errors have no common type
        message = str(error).strip()
        raise UsageError(
            f"the kernels at {revision} do not build, or do not take the inputs the "
            f"working tree's graph gives them: {type(error).__name__}: "
            f"{message.splitlines()[0] if message else ''}"
        ) from error


def compare(
    graphs: dict, buffers: list, revision: str, dtype_name: str, rounds: int, calls: int
) -> dict:
    """The two graphs' outputs and calls, in alternating rounds."""
    import numpy as np

    outputs = [np.from_dlpack(graph.execute(*buffers)[0]) for graph in graphs.values()]
    max_runtime.demote_idle_pollers()  # as the fast model's generator does
    seconds = alternating_rounds(graphs, buffers, rounds, calls)
    return dict(
        dtype=dtype_name,
        seconds={key: summary(values) for key, values in seconds.items()},
        # round by round: how many times faster the working tree's call is
        speedup=summary(paired_ratios(seconds[revision], seconds["working tree"])),
        largest_difference=float(np.max(np.abs(outputs[0] - outputs[1]))),
    )


def alternating_rounds(graphs: dict, buffers: list, rounds: int, calls: int) -> dict:
    """Each graph's median call over `calls` calls, per round, the graphs
    taking turns and the first of them alternating, each once this
    process is quiet."""
    seconds = {key: [] for key in graphs}
    order = list(graphs)
    for index in range(rounds):
        for key in order if index % 2 == 0 else order[::-1]:
            wait_until_idle([os.getpid()])
            seconds[key].append(median_call(graphs[key], buffers, calls))
    return seconds


def format_result(result: dict, revision: str, what: str) -> str:
    """One line: `what` was measured, each version's median call, the ratio."""
    ms = {key: 1e3 * spread["median"] for key, spread in result["seconds"].items()}
    speedup = result["speedup"]
    return (
        f"{result['dtype']}, {what}: "
        f"working tree {ms['working tree']:.3f} ms, {revision} {ms[revision]:.3f} ms "
        f"(medians of the rounds); the working tree {speedup['median']:.3f}x as fast "
        f"(quartiles {speedup['q1']:.3f}-{speedup['q3']:.3f}x, "
        f"{speedup['min']:.3f}-{speedup['max']:.3f}x over {speedup['n']} rounds); "
        f"outputs differ by at most {result['largest_difference']:.3g}"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(
        prog="python -m devtools.bench.kernels_ab", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--against", required=True, metavar="REV", help="the git revision to compare with"
    )
    parser.add_argument(
        "--dtypes", nargs="+", choices=["float32", "bfloat16"], default=["bfloat16", "float32"]
    )
    add_round_arguments(parser, rounds=40, calls_help="calls per version per round")
    parser.add_argument(
        "--way", choices=[way for way in WAYS if way != "one_call"], default="token"
    )
    parser.add_argument(
        "--rows",
        type=int,
        metavar="N",
        help="the projection kernel at N rows of x (a prompt) instead of the decode's blocks",
    )
    parser.add_argument(
        "--position",
        type=int,
        default=0,
        metavar="P",
        help="the decoded token's position: its attention reads P + 1 cached keys and values",
    )
    args = parse_round_arguments(parser, argv)
    if args.rows is not None and args.rows < 1:
        parser.error("--rows must be at least 1")
    if not 0 <= args.position < CONTEXT:
        parser.error(f"--position must be from 0 to {CONTEXT - 1}")
    return args


def runs(args: argparse.Namespace, kernels: Path):
    """(what is measured, its result) for each of the run's measurements."""
    versions = (args.against, kernels)
    for dtype_name in args.dtypes:
        if args.rows is None:
            blocks = f"{args.blocks} block{'s' if args.blocks != 1 else ''}"
            counts = (args.blocks, args.rounds, args.calls)
            result = measure(*versions, dtype_name, *counts, args.way, args.position)
            yield f"{blocks} at position {args.position}, {WAYS[args.way]}", result
            continue
        for name, shape in PROJECTIONS.items():
            rows = f"{args.rows} row{'s' if args.rows != 1 else ''}"
            result = measure_rows(*versions, dtype_name, shape, args.rows, args.rounds, args.calls)
            yield f"{name} ({shape[0]} x {shape[1]}) at {rows}", result


def main(argv: list[str] | None = None) -> int:
    def run() -> None:
        args = parse_args(argv)
        git("rev-parse", "--verify", f"{args.against}^{{commit}}")  # before any build
        max_runtime.prepare()
        print(f"Machine: {machine_line()}.", flush=True)
        with tempfile.TemporaryDirectory() as directory:  # one copy for every dtype
            kernels = kernels_at(args.against, Path(directory))
            for what, result in runs(args, kernels):
                print(format_result(result, args.against, what), flush=True)

    return exit_status(run)


if __name__ == "__main__":
    sys.exit(main())
