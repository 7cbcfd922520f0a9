"""Checking a step as the learner sees it: the header, the outcomes, what to do
next; every step at once with a progress bar; the notice, when MAX compiles a
kernel for the first time, that the wait is MAX's.

The checks themselves run in a worker process (isolate.py); this module is
what `python -m tests.check` and the learner's commands (`python -m
tools.learn`) print around them.
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import time
from collections.abc import Callable
from pathlib import Path

from common import steps
from common.cli import UsageError
from common.steps import display_path, learn_command

from . import memo, prewarm, report
from .engine import Outcome
from .isolate import CheckProcess


def check_step(
    number: int,
    path: Path,
    *,
    quiet: bool = False,
    worker: CheckProcess | None = None,
    on_compile: Callable[[str], None] | None = None,
) -> bool:
    """Check `path` as step `number` in a worker process (a new one unless
    given), printing the outcomes unless quiet. The result on the learner's own
    file is remembered for `last_result` (the hint command reads it).
    `on_compile(family)`: what to do when MAX compiles a kernel no cache holds
    (unless quiet: say so, once)."""
    path = path.resolve()
    if not path.is_file():
        raise UsageError(f"{display_path(path)} does not exist.")
    if worker is None:
        with CheckProcess(quiet=quiet) as own:
            return check_step(number, path, quiet=quiet, worker=own, on_compile=on_compile)
    record = steps.step(number)
    learners_file = path == record.skeleton.resolve()

    def header(title: str) -> None:
        if quiet:
            return
        line = report.bold(f"Step {record.id}: {title}") + report.dim(f"  ({display_path(path)})")
        print(line, flush=True)

    started = time.perf_counter()
    if on_compile is None and not quiet:
        on_compile = compile_notice
    _, outcomes = worker.run_step(number, path, on_title=header, on_compile=on_compile)
    if learners_file or path == record.solution.resolve():
        memo.remember(number, path, outcomes)
    if learners_file:
        prewarm.start(number)  # this step's kernels and the later ones', while the learner reads
    ok = report.passed(outcomes)
    if not quiet:
        print_verdict(number, path, outcomes, time.perf_counter() - started, learners_file)
    return ok


def print_verdict(
    number: int, path: Path, outcomes: list[Outcome], seconds: float, learners_file: bool
) -> None:
    """The outcomes, the count that passed, and what to do next."""
    record = steps.step(number)
    report.print_outcomes(outcomes)
    done = sum(o.status == "pass" for o in outcomes)
    timing = "" if report.plain() else f" ({seconds:.1f} s)"
    if report.passed(outcomes):
        print(report.green(f"\nStep {record.id} passes: {done}/{len(outcomes)} checks{timing}."))
        later = [n for n in steps.numbers() if n > number]
        if later:
            following = steps.step(later[0])
            print(
                f"Next: open {display_path(following.skeleton)}, then run "
                f"{following.check_command()}."
            )
        return
    print(report.red(f"\nStep {record.id}: {done}/{len(outcomes)} checks pass{timing}."))
    print(f"Edit {display_path(path)} and run the check again.")
    if learners_file:
        print(f"Stuck? {learn_command('hint', record.id)} gives a hint for the check that fails.")


def check_all(solutions: bool, worker: CheckProcess, rerun: bool = False) -> bool:
    """Every step, in CHECK_JOBS worker processes at once (default: one per
    core, at most 2), each step alone in its worker while it runs (a fresh
    worker after a step crashes one); lines print in step order. A step whose
    file passed before, with nothing its verdict depends on changed since
    (memo.py), is not run again unless `rerun`."""
    numbers = steps.numbers()
    jobs = max(1, int(os.environ.get("CHECK_JOBS", min(2, os.cpu_count() or 1))))
    workers = [worker] + [CheckProcess(quiet=True) for _ in range(jobs - 1)]
    idle: queue.Queue[CheckProcess] = queue.Queue()
    for each in workers:
        idle.put(each)

    def run(number: int) -> str:
        """What became of the step: "pass", "fail", or "unchanged" (passed
        before, not run again)."""
        path = steps.step(number).file(solutions).resolve()
        if not path.is_file():
            return "fail"
        if not rerun and memo.passed_unchanged(number, path):
            return "unchanged"
        mine = idle.get()  # a worker starts on its first step, not before
        try:
            _, outcomes = mine.run_step(number, path, on_compile=compile_notice)
        finally:
            idle.put(mine)
        memo.remember(number, path, outcomes)
        return "pass" if report.passed(outcomes) else "fail"

    results = {}
    pool = concurrent.futures.ThreadPoolExecutor(jobs)
    try:
        futures = {number: pool.submit(run, number) for number in numbers}
        for number, future in futures.items():
            results[number] = verdict = future.result()
            mark = report.ICONS["fail" if verdict == "fail" else "pass"]
            note = report.dim("  (unchanged since it passed)") if verdict == "unchanged" else ""
            print(f"{mark} step {number:02d}  {steps.step(number).title}{note}", flush=True)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # Ctrl-C: do not wait for the rest
        for extra in workers[1:]:
            extra.stop()
    done = sum(verdict != "fail" for verdict in results.values())
    print(f"\nProgress {report.progress_bar(done, len(results))}")
    flag = " --solutions" if solutions else ""
    if "unchanged" in results.values():
        print(
            report.dim(
                "Steps unchanged since they passed were not run again; "
                f"{steps.check_all_command(flag + ' --rerun')} runs every check."
            )
        )
    failing = [n for n, verdict in results.items() if verdict == "fail"]
    if failing:
        first = steps.step(failing[0])
        print(f"Next: step {first.id}: {first.check_command(flag)} shows why.")
    return not failing


_told_compiling = False


def compile_notice(name: str = "") -> None:
    """Once per command, as MAX starts compiling what no cache holds yet: an
    eager kernel (once per kind of operation, which the warm-up compiles up
    front), or a whole graph (`name` "graph ..."), which it compiles for a
    check's graph and where its interpreter fails on an op."""
    global _told_compiling
    if _told_compiling or report.plain():
        return
    _told_compiling = True
    if "mojo" in name.lower():
        said = (
            "Your Mojo file is being compiled: by the Mojo compiler, then by MAX into a graph "
            "(about 30 s on 2 cores the first time after each edit, longer on a busy "
            "machine; later checks of the same file load it from MAX's cache)."
        )
    elif name.startswith("graph"):
        said = (
            "MAX is compiling a graph this check needs, for the first time on this machine "
            "(tens of seconds, once; later checks load it from MAX's cache)."
        )
    else:
        said = (
            "MAX is compiling a kernel this check needs, for the first time on this machine "
            "(tens of seconds, once per kind of operation; later checks reuse it). "
            "`pixi run warm` (pip: `max warm-interpreter-cache`) compiles them all up front."
        )
    print(report.dim(said), flush=True)
