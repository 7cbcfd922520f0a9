"""The command line of the one-table benches (llama.py, mla.py): a parser
with --rounds and --out, and a main that prepares MAX, measures, prints the
table and, with --out, writes it and its data beside it."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from common.cli import ArgumentParser, exit_status
from devtools.bench import reporting


def parser(module: str, doc: str, rounds: int) -> ArgumentParser:
    """The bench's parser, its first line of `doc` as the description."""
    parser = ArgumentParser(prog=f"python -m {module}", description=doc.splitlines()[0])
    parser.add_argument(
        "--rounds", type=int, default=rounds, help=f"interleaved rounds (default {rounds})"
    )
    parser.add_argument(
        "--out", type=Path, help="also write the table here (and the data as .json)"
    )
    return parser


def main(
    parse_args: Callable[[Sequence[str] | None], argparse.Namespace],
    measure: Callable[[argparse.Namespace], dict],
    format_report: Callable[[dict], str],
    argv: Sequence[str] | None,
) -> int:
    """Run a bench: its arguments, `measure` of them, the report of the data."""
    from common import max_runtime

    max_runtime.prepare()

    def run() -> None:
        args = parse_args(argv)
        data = measure(args)
        reporting.publish(format_report(data), data, args.out)

    return exit_status(run)
