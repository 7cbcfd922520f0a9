"""`watch`: check a step on every save of its file, and move on when it passes."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from common import max_runtime, steps
from common.cli import UsageError
from common.steps import REPO, display_path

from .progress import first_unfinished

CLEAR_SCREEN = "\033[2J\033[3J\033[H"

Signature = tuple[int, int] | None


def signature(path: Path) -> Signature:
    """What changes when a file is saved: its modification time and size."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def wait_for_change(path: Path, since: Signature, interval: float) -> Signature:
    """Poll until the file differs from `since` (and exists); return its signature."""
    current = signature(path)
    while current is None or current == since:
        time.sleep(interval)
        current = signature(path)
    return current


def run_check_process(number: int) -> int:
    """`python -m tests.check NN` in a fresh process, so edited modules reload.

    Its own session keeps Ctrl-C from reaching it: we stop it ourselves, quietly.
    """
    command = [sys.executable, "-m", "tests.check", f"{number:02d}"]
    child = subprocess.Popen(command, cwd=REPO, env=max_runtime.child_env(), start_new_session=True)
    try:
        return child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def clear_screen() -> None:
    if sys.stdout.isatty():
        sys.stdout.write(CLEAR_SCREEN)
        sys.stdout.flush()


def following_step(number: int) -> int | None:
    later = [n for n in steps.numbers() if n > number]
    return later[0] if later else None


def watch(number: int, *, interval: float = 0.5, max_runs: int | None = None) -> int:
    """Check `number` now and on every save; move on when it passes.

    Returns after `max_runs` checks (never, if None) or once the last step passes:
    0 if the last check passed, 1 if it failed.
    """
    runs = 0
    while True:
        path = steps.step(number).skeleton
        before = signature(path)  # taken before the check: a save during it counts
        clear_screen()
        ok = run_check_process(number) == 0
        runs += 1
        if ok:
            nxt = following_step(number)
            if nxt is None:
                print("\nEvery step passes: nothing left to watch.")
                return 0
            number, path = nxt, steps.step(nxt).skeleton
            before = signature(path)
            print(
                f"\nNow watching {display_path(path)}: save it to check it (Ctrl-C to stop).",
                flush=True,
            )
        else:
            print(
                f"\nWatching {display_path(path)}: save it to check again (Ctrl-C to stop).",
                flush=True,
            )
        if max_runs is not None and runs >= max_runs:
            return 0 if ok else 1
        wait_for_change(path, before, interval)


def cmd_watch(args: argparse.Namespace) -> int:
    if args.interval <= 0 or (args.max_runs is not None and args.max_runs < 1):
        raise UsageError("--interval must be positive and --max-runs at least 1.")
    number = steps.parse_step(args.step) if args.step else first_unfinished()
    if number is None:
        print("Every step passes: nothing left to watch.")
        return 0
    return watch(number, interval=args.interval, max_runs=args.max_runs)
