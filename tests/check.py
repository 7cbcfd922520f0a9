"""Check a step of the tutorial: `python -m tests.check 09` (or `pixi run s09`).

    python -m tests.check 9            check steps/step_09.py
    python -m tests.check 09 --solutions   check solutions/solution_09.py
    python -m tests.check all          check every step, with a progress summary

Exit status: 0 all checks pass, 1 a check fails, 2 usage error.

CHECK_PLAIN=1 prints the same text on every run: no colour, no timings, no
notice about MAX's kernel cache (tools/book_outputs.py puts it in the book).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib
import os
import queue
import re
import sys
import time
from pathlib import Path

from tools import max_runtime

from .checker import memo, report
from .checker.engine import Step
from .checker.isolate import Worker, WorkerError
from .checker.learner import REPO, display_path

USAGE_ERROR = 2


class UsageError(Exception):
    pass


def available_steps() -> list[int]:
    specs = (REPO / "tests" / "specs").glob("step_[0-9][0-9].py")
    return sorted(int(p.stem.removeprefix("step_")) for p in specs)


def parse_step(text: str) -> int:
    match = re.fullmatch(r"s?(?:tep)?[_-]?0*(\d{1,2})", text.strip().lower())
    steps = available_steps()
    if not match or int(match.group(1)) not in steps:
        raise UsageError(
            f"unknown step {text!r}: steps are {steps[0]:02d}-{steps[-1]:02d} "
            f"(write 9, 09 or s09), or 'all'."
        )
    return int(match.group(1))


def load_spec(number: int) -> Step:
    return importlib.import_module(f"tests.specs.step_{number:02d}").STEP


def step_file(number: int, solutions: bool) -> Path:
    if solutions:
        return REPO / "solutions" / f"solution_{number:02d}.py"
    return REPO / "steps" / f"step_{number:02d}.py"


def check_one(
    number: int, path: Path, *, quiet: bool = False, worker: Worker | None = None
) -> bool:
    """Check `path` as step `number` in a worker process (a new one unless
    given), printing the outcomes unless quiet."""
    if not path.is_file():
        raise UsageError(f"{display_path(path)} does not exist.")
    if worker is None:
        with Worker(quiet=quiet) as own:
            return check_one(number, path, quiet=quiet, worker=own)
    step_id = f"{number:02d}"

    def header(title: str) -> None:
        if not quiet and worker.cold and worker.runs_max:
            warn_if_cold(cold=True)
        if not quiet:
            line = report.bold(f"Step {step_id}: {title}") + report.dim(f"  ({display_path(path)})")
            print(line, flush=True)

    started = time.perf_counter()
    _, outcomes = worker.run_step(number, path.resolve(), on_title=header)
    if path.resolve() == step_file(number, solutions=False).resolve():
        memo.remember(number, path.resolve(), outcomes)  # for `tools.learn hint`
    ok = report.passed(outcomes)
    if quiet:
        return ok
    report.print_outcomes(outcomes)
    done = sum(o.status == "pass" for o in outcomes)
    seconds = time.perf_counter() - started
    timing = "" if report.plain() else f" ({seconds:.1f} s)"
    if ok:
        print(report.green(f"\nStep {step_id} passes: {done}/{len(outcomes)} checks{timing}."))
        nxt = [n for n in available_steps() if n > number]
        if nxt:
            print(f"Next: open steps/step_{nxt[0]:02d}.py, then run {both_forms(nxt[0])}.")
    else:
        print(report.red(f"\nStep {step_id}: {done}/{len(outcomes)} checks pass{timing}."))
        print(f"Edit {display_path(path)} and run the check again.")
        if path.resolve() == step_file(number, solutions=False).resolve():
            print(
                f"Stuck? `pixi run hint {step_id}` (pip: `python -m tools.learn hint {step_id}`) "
                "gives a hint for the check that fails."
            )
    return ok


def both_forms(number: int, flag: str = "") -> str:
    """The command that checks step `number`, for pixi and for pip."""
    pixi = f"pixi run s{number:02d}{flag}" if not flag else f"pixi run check {number:02d}{flag}"
    return f"`{pixi}` (pip: `python -m tests.check {number:02d}{flag}`)"


def check_all(solutions: bool, worker: Worker) -> bool:
    """Every step, in CHECK_JOBS worker processes at once (default: one per
    core, at most 2), each step alone in its worker while it runs (a fresh
    worker after a step crashes one); lines print in step order."""
    numbers = available_steps()
    jobs = max(1, int(os.environ.get("CHECK_JOBS", min(2, os.cpu_count() or 1))))
    workers = [worker] + [Worker(quiet=True) for _ in range(jobs - 1)]
    idle: queue.Queue[Worker] = queue.Queue()
    for each in workers:
        idle.put(each)

    def run(number: int) -> bool:
        path = step_file(number, solutions)
        if not path.is_file():
            return False
        mine = idle.get()
        try:
            _, outcomes = mine.run_step(number, path)
        finally:
            idle.put(mine)
        return report.passed(outcomes)

    results = {}
    pool = concurrent.futures.ThreadPoolExecutor(jobs)
    try:
        futures = {number: pool.submit(run, number) for number in numbers}
        for number, future in futures.items():
            results[number] = ok = future.result()
            mark = report.ICONS["pass"] if ok else report.ICONS["fail"]
            print(f"{mark} step {number:02d}  {spec_title(number)}", flush=True)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # Ctrl-C: do not wait for the rest
        for extra in workers[1:]:
            extra.stop()
    done = sum(results.values())
    print(f"\nProgress {report.progress_bar(done, len(results))}")
    failing = [n for n, ok in results.items() if not ok]
    if failing:
        flag = " --solutions" if solutions else ""
        print(f"Next: step {failing[0]:02d}: {both_forms(failing[0], flag)} shows why.")
    return not failing


def spec_title(number: int) -> str:
    """The step's title, read from its spec without importing it (nor MAX)."""
    text = (REPO / "tests" / "specs" / f"step_{number:02d}.py").read_text(encoding="utf-8")
    match = re.search(r"title=(['\"])(.*?)\1", text)
    return match.group(2) if match else ""


_warned_cold = False


def warn_if_cold(cold: bool | None = None, say: bool = True) -> None:
    """Say so (once, unless `say` is false) when MAX's kernel cache is cold
    (`cold`, or asked of MAX here)."""
    global _warned_cold
    if cold is None:
        cold = not max_runtime.kernel_cache_is_warm()
    if cold:
        # Compiling can take minutes: a generous per-check time limit meanwhile.
        os.environ["CHECK_COLD_CACHE"] = "1"
        if report.plain() or not say or _warned_cold:
            return
        _warned_cold = True
        print(
            report.dim(
                "MAX has not compiled its kernels on this machine yet: the first check compiles "
                "each kind of operation it meets (up to a few minutes in all). Run `pixi run warm` "
                "(pip: `max warm-interpreter-cache`) once to compile everything up front, about "
                "5 minutes. Later checks take seconds."
            ),
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.check", description=__doc__.splitlines()[0]
    )
    parser.add_argument("step", help="step number (9, 09, s09) or 'all'")
    parser.add_argument(
        "--solutions", action="store_true", help="check solutions/ instead of steps/"
    )
    parser.add_argument("--file", type=Path, help="check this file instead (for tests and tools)")
    args = parser.parse_args(argv)
    max_runtime.prepare()
    worker = Worker()
    try:
        everything = args.step.strip().lower() == "all"
        if not everything:
            number = parse_step(args.step)
            path = args.file.resolve() if args.file else step_file(number, args.solutions)
            if not path.is_file():
                raise UsageError(f"{display_path(path)} does not exist.")
        worker.start()  # imports MAX: knows whether its kernel cache is cold
        # One step's check says so before its header, when that step runs MAX.
        warn_if_cold(worker.cold, say=everything)
        if everything:
            return 0 if check_all(args.solutions, worker) else 1
        return 0 if check_one(number, path, worker=worker) else 1
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return USAGE_ERROR
    except WorkerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nInterrupted.")
        return 130
    finally:
        worker.stop()


if __name__ == "__main__":
    sys.exit(main())
