"""Check a step of the tutorial: `python -m tests.check 09` (or `pixi run s09`).

    python -m tests.check 9            check steps/step_09.py
    python -m tests.check 09 --solutions   check solutions/solution_09.py
    python -m tests.check all          check every step, with a progress summary

Exit status: 0 all checks pass, 1 a check fails, 2 usage error.

CHECK_PLAIN=1 prints the same text on every run: no colour, no timings, no
notice about MAX's kernel cache (devtools/book_outputs.py puts it in the book).
"""

from __future__ import annotations

import concurrent.futures
import importlib
import os
import queue
import sys
import time
from pathlib import Path

from common import max_runtime, steps
from common.cli import ArgumentParser, UsageError, exit_status
from common.steps import display_path

from .checker import memo, report
from .checker.engine import Step
from .checker.isolate import CheckProcess


def parse_step(text: str) -> int:
    return steps.parse_step(text, also="'all'")


def load_spec(number: int) -> Step:
    return importlib.import_module(steps.step(number).spec_module).STEP


def check_one(
    number: int, path: Path, *, quiet: bool = False, worker: CheckProcess | None = None
) -> bool:
    """Check `path` as step `number` in a worker process (a new one unless
    given), printing the outcomes unless quiet."""
    if not path.is_file():
        raise UsageError(f"{display_path(path)} does not exist.")
    if worker is None:
        with CheckProcess(quiet=quiet) as own:
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
    if path.resolve() == steps.step(number).skeleton.resolve():
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
        later = [n for n in steps.numbers() if n > number]
        if later:
            following = steps.step(later[0])
            print(
                f"Next: open {display_path(following.skeleton)}, then run "
                f"{following.check_command()}."
            )
    else:
        print(report.red(f"\nStep {step_id}: {done}/{len(outcomes)} checks pass{timing}."))
        print(f"Edit {display_path(path)} and run the check again.")
        if path.resolve() == steps.step(number).skeleton.resolve():
            print(
                f"Stuck? `pixi run hint {step_id}` (pip: `python -m tools.learn hint {step_id}`) "
                "gives a hint for the check that fails."
            )
    return ok


def check_all(solutions: bool, worker: CheckProcess) -> bool:
    """Every step, in CHECK_JOBS worker processes at once (default: one per
    core, at most 2), each step alone in its worker while it runs (a fresh
    worker after a step crashes one); lines print in step order."""
    numbers = steps.numbers()
    jobs = max(1, int(os.environ.get("CHECK_JOBS", min(2, os.cpu_count() or 1))))
    workers = [worker] + [CheckProcess(quiet=True) for _ in range(jobs - 1)]
    idle: queue.Queue[CheckProcess] = queue.Queue()
    for each in workers:
        idle.put(each)

    def run(number: int) -> bool:
        path = steps.step(number).file(solutions)
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
            print(f"{mark} step {number:02d}  {steps.step(number).title}", flush=True)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # Ctrl-C: do not wait for the rest
        for extra in workers[1:]:
            extra.stop()
    done = sum(results.values())
    print(f"\nProgress {report.progress_bar(done, len(results))}")
    failing = [n for n, ok in results.items() if not ok]
    if failing:
        flag = " --solutions" if solutions else ""
        first = steps.step(failing[0])
        print(f"Next: step {first.id}: {first.check_command(flag)} shows why.")
    return not failing


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
    parser = ArgumentParser(prog="python -m tests.check", description=__doc__.splitlines()[0])
    parser.add_argument("step", help="step number (9, 09, s09) or 'all'")
    parser.add_argument(
        "--solutions", action="store_true", help="check solutions/ instead of steps/"
    )
    parser.add_argument("--file", type=Path, help="check this file instead (for tests and tools)")
    max_runtime.prepare()
    worker = CheckProcess()

    def run() -> int:
        args = parser.parse_args(argv)
        everything = args.step.strip().lower() == "all"
        if not everything:
            number = parse_step(args.step)
            path = args.file.resolve() if args.file else steps.step(number).file(args.solutions)
            if not path.is_file():
                raise UsageError(f"{display_path(path)} does not exist.")
        worker.start()  # imports MAX: knows whether its kernel cache is cold
        # One step's check says so before its header, when that step runs MAX.
        warn_if_cold(worker.cold, say=everything)
        if everything:
            return 0 if check_all(args.solutions, worker) else 1
        return 0 if check_one(number, path, worker=worker) else 1

    try:
        return exit_status(run)
    finally:
        worker.stop()


if __name__ == "__main__":
    sys.exit(main())
