"""Compiling a step's MAX kernels in the background, while the learner reads.

On a machine where `max warm-interpreter-cache` never ran, MAX compiles each
kind of eager operation the first time a check meets it: tens of seconds
each, and a step's first check can meet several. A learner checks a step long
before its code is ready (the untouched skeleton fails at once) and reads its
page for minutes after the previous step passes. So each check of step N
starts, once per machine and step, a background process at the lowest CPU
priority that checks quietly the reference solutions of step N and of every
later step not warmed yet, in order: by the time the learner's own code first
runs, MAX finds the kernels it needs in its cache. Going on past N+1 gives the
slow compiles (a whole model's graph in steps 16, 18 and 23: a minute or more
each) a head start of several steps, not one.

    python -m tests.checker.prewarm 3 4 5   what the background process runs

CHECK_PREWARM=0 turns it off (the test suite does, tests/conftest.py).
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

from common import max_runtime, steps
from common.steps import REPO

from . import report

STAMPS = REPO / ".check_prewarm.json"  # steps already compiled, per MAX cache
LOCK = REPO / ".check_prewarm.lock"


def cache_key() -> str:
    """Which MAX cache the stamps vouch for: its folder and MAX's version."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    try:
        version = importlib.metadata.version("max")
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    return f"{base}|max {version}"


def stamps() -> dict:
    """{cache key: [steps warmed]}, or {} when the file is missing or unreadable."""
    try:
        stored = json.loads(STAMPS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stored if isinstance(stored, dict) else {}


def warmed() -> set[int]:
    return {n for n in stamps().get(cache_key(), []) if isinstance(n, int)}


def mark_warmed(number: int) -> None:
    stored = stamps()
    key = cache_key()
    stored[key] = sorted(set(stored.get(key, [])) | {number})
    try:
        STAMPS.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")
    except OSError:  # a read-only checkout: it warms again next time, harmlessly
        pass


def enabled() -> bool:
    return os.environ.get("CHECK_PREWARM", "1") != "0" and not report.plain()


def start(number: int) -> bool:
    """Warm step `number` and every later one in a background process, those
    not warm already; whether one was started."""
    if not enabled():
        return False
    done = warmed()
    todo = [n for n in steps.numbers() if n >= number and n not in done]
    if not todo:
        return False
    try:
        subprocess.Popen(
            [sys.executable, "-m", "tests.checker.prewarm", *map(str, todo)],
            cwd=REPO,
            env=max_runtime.child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives the check, away from the terminal's Ctrl-C
        )
    except OSError:
        return False
    return True


def warm(numbers: list[int]) -> None:
    """Check each step's solution here, quietly, and stamp the ones that pass.
    One warming process at a time: a second one leaves at once."""
    os.nice(19)  # the learner's own checks come first
    with open(LOCK, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return
        max_runtime.prepare()
        max_runtime.import_mojo_extensions()  # as the learner's next check may
        from .engine import load_spec, run_step

        if max_runtime.kernel_cache_is_warm():  # `max warm-interpreter-cache` compiled them all
            for number in numbers:
                mark_warmed(number)
            return
        for number in numbers:
            if number in warmed():
                continue
            outcomes = run_step(load_spec(number), steps.step(number).solution)
            if report.passed(outcomes):
                mark_warmed(number)


if __name__ == "__main__":
    warm([int(arg) for arg in sys.argv[1:]])
