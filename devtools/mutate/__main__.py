"""`python -m devtools.mutate`: the command line (usage in devtools/mutate/__init__.py)."""

from __future__ import annotations

import sys
import time

import devtools.mutate
from common import max_runtime, steps
from common.cli import ArgumentParser, exit_status
from common.steps import REPO
from devtools.mutate.operators import mutants, sample
from devtools.mutate.running import EQUIVALENTS, StepResult, measure_times, mutate_steps


def argument_parser() -> ArgumentParser:
    summary = devtools.mutate.__doc__.splitlines()[0]
    parser = ArgumentParser(prog="python -m devtools.mutate", description=summary)
    parser.add_argument("steps", nargs="*", help="step numbers (default: every step)")
    parser.add_argument(
        "--sample", type=int, metavar="N", help="N mutants per step, the same ones every run"
    )
    parser.add_argument("--jobs", type=int, default=1, help="checker processes (default 1)")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--times", action="store_true", help="time each solution's slowest check")
    return parser


def list_mutants(numbers: list[int], count: int | None) -> None:
    """Print each step's mutants (`count` of them, or all), one line each."""
    for number in numbers:
        found = mutants(number)
        for mutant in found if count is None else sample(found, count):
            print(mutant.describe())


def main(argv: list[str] | None = None) -> int:

    def run() -> int:
        args = argument_parser().parse_args(argv)
        max_runtime.prepare()
        numbers = [steps.parse_step(s) for s in args.steps] or steps.numbers()
        if args.times:
            measure_times(numbers)
        elif args.list:
            list_mutants(numbers, args.sample)
        else:
            started = time.perf_counter()
            return report(mutate_steps(numbers, args.sample, args.jobs), started)
        return 0

    return exit_status(run)


def report(results: list[StepResult], started: float) -> int:
    """Print the totals; the exit status: 1 if any mutant survived."""
    total = sum(r.total for r in results)
    survivors = sum(len(r.survivors) for r in results)
    print(
        f"\n{total} mutants: {sum(r.killed for r in results)} killed, "
        f"{sum(r.equivalent for r in results)} equivalent, {survivors} survived "
        f"in {time.perf_counter() - started:.0f} s."
    )
    if survivors:
        equivalents_file = EQUIVALENTS.relative_to(REPO)
        print(
            "A survivor is a mistake the checker lets through: make the check stronger, or, if "
            f"it computes the same on every valid input, list it in {equivalents_file} "
            "with the reason."
        )
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
