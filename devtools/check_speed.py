"""How long a learner waits for the checker: `python -m devtools.check_speed`.

Two measurements, printed as tables:

1. Each step's first check on a new machine: MAX's caches empty (a fresh
   XDG_CACHE_HOME, no `max warm-interpreter-cache`), the steps checked in
   order as a learner meets them (step 04 reuses what 02 and 03 compiled), each
   in a new checker process, on the reference solution. Beside each time: the
   kinds of MAX kernel that check had to compile (the checker's worker
   announces every compile; see tests/checker/child.py). With `--reading S`,
   as a learner with the background warming (tests/checker/prewarm.py): each
   step's skeleton is checked first, which starts warming the step, and its
   first real check comes S seconds later.
2. `python -m tests.check all --solutions` warm: run once to fill the caches,
   then timed `--repeats` times, alternating `--rerun` (every check runs) and
   the plain command (every step unchanged since it passed: none runs);
   median and range of each.

    python -m devtools.check_speed                 both, every step
    python -m devtools.check_speed --steps 02 04   the first checks of these steps only
    python -m devtools.check_speed --reading 120   ... 2 minutes after the skeleton's check
    python -m devtools.check_speed --warm-only     only `check all`, with this machine's caches
    python -m devtools.check_speed --out docs/src/bench/check_speed.md   ... and the book's tables

The machine's name and core count head the output: these times are only worth
comparing on one machine.
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from common import max_runtime, steps
from common.cli import ArgumentParser, exit_status
from common.steps import REPO
from devtools.bench.machine import cores_line, cpu_name


def machine() -> str:
    return f"{cpu_name()}, {cores_line()}, Python {platform.python_version()}"


def first_checks(numbers: list[int], reading: float) -> list[tuple[int, float, bool, Counter]]:
    """(step, seconds, passed, kernels compiled by kind) for each step's first
    check, in a fresh checker process each, sharing one new empty cache;
    `reading` seconds after the background warming of the step began, if any."""
    from tests.checker import CheckProcess, prewarm, report

    results = []
    for number in numbers:
        if reading:
            os.environ["CHECK_PREWARM"] = "1"
            prewarm.start(number)  # as the check of the untouched skeleton does
            time.sleep(reading)
        compiled: Counter = Counter()
        started = time.perf_counter()
        with CheckProcess(quiet=True) as worker:
            _, outcomes = worker.run_step(
                number,
                steps.step(number).solution,
                on_compile=lambda kind, seen=compiled: seen.update([kind]),
            )
        seconds = time.perf_counter() - started
        results.append((number, seconds, report.passed(outcomes), compiled))
        kinds = ", ".join(f"{kind} x{n}" for kind, n in compiled.most_common()) or "none"
        print(f"  step {number:02d}: {seconds:6.1f} s  compiled: {kinds}", flush=True)
    return results


def check_all_seconds(repeats: int) -> dict[str, list[float]]:
    """Seconds of `check all --solutions`, warm: {"--rerun": [...], "unchanged": [...]},
    the two alternating, `repeats` runs each."""
    command = [sys.executable, "-m", "tests.check", "all", "--solutions"]
    env = max_runtime.child_env()
    subprocess.run([*command, "--rerun"], cwd=REPO, env=env, capture_output=True)  # caches
    times: dict[str, list[float]] = {"--rerun": [], "unchanged": []}
    for _ in range(repeats):
        for kind, extra in (("--rerun", ["--rerun"]), ("unchanged", [])):
            started = time.perf_counter()
            result = subprocess.run(
                [*command, *extra], cwd=REPO, env=env, capture_output=True, text=True
            )
            times[kind].append(time.perf_counter() - started)
            if result.returncode != 0:
                print(result.stdout[-2000:], file=sys.stderr)
    return times


def first_checks_table(results: list[tuple[int, float, bool, Counter]], reading: float) -> str:
    when = f"{reading:.0f} s after the background warming began" if reading else "at once"
    lines = [
        f"| step | first check, empty caches, {when} (s) | passed | MAX kernels compiled |",
        "|---|---|---|---|",
    ]
    for number, seconds, passed, compiled in results:
        kinds = ", ".join(f"{kind} x{n}" for kind, n in compiled.most_common()) or "none"
        lines.append(f"| {number:02d} | {seconds:.1f} | {'yes' if passed else 'NO'} | {kinds} |")
    return "\n".join(lines)


def check_all_table(times: dict[str, list[float]]) -> str:
    lines = [
        "| `check all --solutions`, caches filled | median (s) | min-max (s) | runs |",
        "|---|---|---|---|",
    ]
    for kind, said in (
        ("--rerun", "every check run (`--rerun`)"),
        ("unchanged", "every step unchanged since it passed"),
    ):
        runs = times[kind]
        lines.append(
            f"| {said} | {statistics.median(runs):.1f} | {min(runs):.1f}-{max(runs):.1f} "
            f"| {len(runs)} |"
        )
    return "\n".join(lines)


@contextlib.contextmanager
def restored_environment() -> Iterator[None]:
    """The measurement points MAX at an empty cache (and may turn the background
    warming on) for its own processes; the caller's environment is put back after."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m devtools.check_speed", description=__doc__)
    parser.add_argument("--steps", nargs="*", help="the steps whose first check to time")
    parser.add_argument("--warm-only", action="store_true", help="only time `check all` warm")
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed runs of `check all` (0: none)"
    )
    parser.add_argument(
        "--reading",
        type=float,
        default=0.0,
        metavar="S",
        help="seconds between the background warming's start and each first check",
    )
    parser.add_argument("--out", type=Path, help="also write the tables to this Markdown file")

    def run() -> int:
        args = parser.parse_args(argv)
        numbers = [steps.parse_step(s) for s in args.steps] if args.steps else steps.numbers()
        print(f"Machine: {machine()}", flush=True)
        tables = []
        with (
            tempfile.TemporaryDirectory(prefix="check-speed-") as empty,
            restored_environment(),
        ):
            if not args.warm_only:
                # MAX keeps its compiled kernels and graphs under XDG_CACHE_HOME;
                # the worker processes inherit this environment.
                os.environ["XDG_CACHE_HOME"] = empty
                print("First checks, empty caches, in step order:", flush=True)
                tables.append(first_checks_table(first_checks(numbers, args.reading), args.reading))
                print("\n" + tables[-1], flush=True)
            if args.repeats >= 1:  # --repeats 0: the first checks only
                tables.append(check_all_table(check_all_seconds(args.repeats)))
                print("\n" + tables[-1], flush=True)
        if args.out:
            said = " ".join(["python -m devtools.check_speed", *(argv or sys.argv[1:])])
            args.out.write_text(
                f"Measured on {machine()} with `{said}`.\n\n" + "\n\n".join(tables) + "\n",
                encoding="utf-8",
            )
        return 0

    return exit_status(run)


if __name__ == "__main__":
    sys.exit(main())
