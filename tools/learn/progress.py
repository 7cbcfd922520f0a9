"""Where the learner stands: each step's check, run in this process, and the
`status` and `next` commands that report it."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import io
import sys
from collections.abc import Callable
from typing import TypeVar

from common import max_runtime, steps
from common.steps import display_path, learn_command

from .checker import checker
from .files import step_missing
from .skeletons import blanks_in_file, tracks_steps, untouched

NOT_STARTED, IN_PROGRESS, DONE, MISSING = "not started", "in progress", "done", "missing"
STATE_ICONS = {NOT_STARTED: "⬜", IN_PROGRESS: "🚧", DONE: "✅", MISSING: "❓"}

T = TypeVar("T")


def transient(message: str = "") -> None:
    """A progress line on a terminal that the next one replaces (nothing otherwise).

    transient() with no message erases it, before printing a line for good.
    """
    if sys.stdout.isatty():
        sys.stdout.write(f"\r\033[K{message}")
        sys.stdout.flush()


# -- running checks in this process ------------------------------------------


@functools.cache
def prepare_max() -> None:
    """Before the first in-process check: MAX's set-up."""
    transient()
    max_runtime.prepare()


class _Capture(io.StringIO):
    """Captured stdout that still answers isatty() like the real one (colour)."""

    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def captured(run: Callable[[], T]) -> tuple[T, str]:
    """What `run` returns, and what it printed instead of printing it."""
    buffer = _Capture(sys.stdout.isatty())
    with contextlib.redirect_stdout(buffer):
        result = run()
    return result, buffer.getvalue()


@functools.cache
def shared_worker():  # -> tests.checker.CheckProcess
    """One checker worker process for every check this command runs: MAX loads once."""
    worker = checker().CheckProcess(quiet=True)
    atexit.register(worker.stop)
    return worker


def passes(number: int) -> bool:
    """Run the step's check in a worker, its output (and the learner's) hidden;
    not again if the file passed before and nothing it depends on changed."""
    check = checker()
    path = steps.step(number).skeleton
    if check.passed_unchanged(number, path):
        return True
    prepare_max()
    try:
        ok, _ = captured(
            lambda: check.check_step(
                number, path, quiet=True, worker=shared_worker(), on_compile=compiling(number)
            )
        )
    except SystemExit:  # the learner's file called sys.exit()
        return False
    return ok


def step_state(number: int) -> str:
    """NOT_STARTED, IN_PROGRESS, DONE or MISSING: the check runs only when no
    placeholder is left (with one left, it fails at once)."""
    path = steps.step(number).skeleton
    if not path.is_file():
        return MISSING
    blanks = blanks_in_file(path)
    if blanks is None:  # a SyntaxError: the check fails at once
        return IN_PROGRESS
    if blanks:
        return NOT_STARTED if untouched(number) else IN_PROGRESS
    return DONE if passes(number) else IN_PROGRESS


def checked_state(number: int) -> str:
    """step_state(), with a progress line on a terminal while it runs."""
    transient(f"checking step {number:02d}…")
    state = step_state(number)
    transient()
    return state


def first_unfinished() -> int | None:
    return next((n for n in steps.numbers() if checked_state(n) != DONE), None)


def compiling(number: int) -> Callable[[str], None]:
    """What a quiet check shows while MAX compiles a kernel for it."""
    return lambda family: transient(
        f"checking step {number:02d}… (MAX compiles a kernel it meets for the first time: "
        "tens of seconds, once)"
    )


# -- status ------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    numbers = steps.numbers()
    titles = {n: steps.step(n).title for n in numbers}
    width = max(len(t) for t in titles.values())
    if not tracks_steps():
        print(
            "(Not a git checkout: a step counts as not started while each TODO block has a None.)"
        )
    states: dict[int, str] = {}
    for number in numbers:
        states[number] = checked_state(number)
        icon = STATE_ICONS[states[number]]
        print(f"{icon} {number:02d}  {titles[number]:<{width}}  {states[number]}", flush=True)
    print_progress(states, titles)
    return 0


def print_progress(states: dict[int, str], titles: dict[int, str]) -> None:
    """The progress bar, and what to do next."""
    report = checker().report
    done = sum(state == DONE for state in states.values())
    print(f"\nProgress {report.progress_bar(done, len(states))}")
    todo = [n for n, state in states.items() if state != DONE]
    if not todo:
        print(f"All {len(states)} steps pass: you have built GPT-2 from scratch.")
        return
    number = todo[0]
    if states[number] == MISSING:
        restore = learn_command("reset", f"{number:02d}")
        print(f"Next: step {number:02d} is missing; {restore} restores it.")
        return
    record = steps.step(number)
    print(f"Next: step {number:02d}, {titles[number]}, in {display_path(record.skeleton)}.")
    print(f"Check it with {record.check_command()},")
    print(f"or on every save with {learn_command('watch')}.")


# -- next --------------------------------------------------------------------


def cmd_next(args: argparse.Namespace) -> int:
    check = checker()
    report = check.report
    for number in steps.numbers():
        path = steps.step(number).skeleton
        if not path.is_file():
            raise step_missing(number)
        if check.passed_unchanged(number, path):
            print(
                f"{report.ICONS['pass']} step {number:02d} passes (unchanged since its last check)",
                flush=True,
            )
            continue
        prepare_max()
        transient(f"checking step {number:02d}…")
        ok, output = captured(
            lambda n=number, p=path: check.check_step(n, p, worker=shared_worker())
        )
        transient()
        if not ok:
            sys.stdout.write(output)
            return 1
        print(f"{report.ICONS['pass']} step {number:02d} passes", flush=True)
    print(f"\nAll {len(steps.numbers())} steps pass: you have built GPT-2 from scratch.")
    return 0
