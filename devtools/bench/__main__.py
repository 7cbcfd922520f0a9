"""`python -m devtools.bench`: the command line (see the package's docstring)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import devtools.bench
from common import max_runtime
from common.cli import ArgumentParser, UsageError, exit_status
from devtools.bench import standing
from devtools.bench.measuring import LENGTHS, PREFILL_LENGTH, run
from devtools.bench.probe import SUSTAIN_S
from devtools.bench.reporting import format_report, over_ceiling, render

OUT = standing.BENCH  # the book's tables and plots


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(
        prog="python -m devtools.bench", description=devtools.bench.__doc__.splitlines()[0]
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
        help="also time our kernels alone against MAX's and PyTorch's: the head's projection, "
        "the MLP's projections by rows, a prompt's attention by length",
    )
    parser.add_argument("--prefill-length", type=int, default=PREFILL_LENGTH)
    parser.add_argument(
        "--bandwidth-repeats", type=int, default=3, help="sums per size per bandwidth probe"
    )
    parser.add_argument(
        "--sustain-seconds",
        type=float,
        default=SUSTAIN_S,
        help="seconds each reader reads on end in each bandwidth probe (0: none)",
    )
    parser.add_argument(  # tests: small arrays
        "--bandwidth-sizes", type=int, nargs="+", default=[256, 1024], help=argparse.SUPPRESS
    )
    parser.add_argument("--config", type=json.loads, help=argparse.SUPPRESS)  # tests: tiny shapes
    args = parser.parse_args(argv)
    if args.repeats < 1 or min(args.lengths) < 1:
        parser.error("--repeats and --lengths must be at least 1")
    return args


def read_data(path: Path) -> dict:
    """A benchmark's JSON data, written by an earlier run (--json)."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise UsageError(f"cannot read {path}: {error}") from error


def require_transformers() -> None:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as error:
        raise UsageError(
            "the benchmark compares against transformers: install the test extras "
            '(pip install -e ".[test]", or use `pixi run bench`).'
        ) from error


def measure(args: argparse.Namespace) -> dict:
    """The benchmark's data; a ValueError (an input it cannot use) is a usage error."""
    try:
        return run(args)
    except ValueError as error:
        raise UsageError(str(error)) from error


def warn_about(data: dict) -> None:
    """Say when the figures should not be published as they are."""
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


def book(data: dict, out: Path) -> str:
    """render() the run's tables and plot into `out`; where that is the book's
    folder, also redraw the table across machines, this run included."""
    report = render(data, out)
    if out.resolve().is_relative_to(standing.BENCH.resolve()):
        standing.write()
    return report


def benchmark(args: argparse.Namespace) -> None:
    max_runtime.prepare()
    if args.render is not None:
        print(book(read_data(args.render), args.out))
        return
    require_transformers()
    data = measure(args)
    print(book(data, args.out) if not args.no_book else format_report(data))
    warn_about(data)
    if args.json is not None:
        args.json.write_text(json.dumps(data, indent=1) + "\n")
        print(f"Wrote {args.json}")


def main(argv: list[str] | None = None) -> int:
    return exit_status(lambda: benchmark(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
