"""Running the checks in a child process, so the learner's code cannot take the
checker down with it.

The worker (tests/checker/child.py) imports MAX once and runs whole steps
on request; this side never imports MAX. It watches the worker while a check
runs: a crash of native code (segfault, abort), a hang where Python's own
time limit cannot reach (inside MAX or a C library), or a runaway use of
memory ends that worker and becomes a failed check with a message. The next
step gets a fresh worker.

    with CheckProcess() as worker:
        title, outcomes = worker.run_step(14, Path("steps/step_14.py"))
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from common import max_runtime
from common.cli import Failure
from common.steps import REPO

from .engine import Outcome

# How long past a check's own time limit the worker may stay silent before it
# is stopped from here (the worker stops a Python loop itself, at the limit).
GRACE_FACTOR = 0.25
GRACE_FLOOR = 5.0
STARTUP_LIMIT = 600.0  # importing MAX on a busy machine
COMPILE_LIMIT = 600.0  # one kernel compiled on a busy machine
POLL = 0.1  # seconds between looks at the worker's memory


class CheckProcessError(Failure):
    """The worker could not be started or stopped answering before any step."""


def memory_limit() -> int:
    """Bytes the worker may hold: CHECK_MEMORY_LIMIT_GB, else half the machine's."""
    if os.environ.get("CHECK_MEMORY_LIMIT_GB"):
        return int(float(os.environ["CHECK_MEMORY_LIMIT_GB"]) * 2**30)
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError):  # no sysconf: 8 GiB
        return 8 * 2**30


def resident_bytes(pid: int) -> int:
    """The process's resident memory (Linux /proc); 0 where it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        what = {
            "SIGSEGV": "a segmentation fault: native code touched memory it must not",
            "SIGABRT": "an abort: native code gave up on an impossible state",
            "SIGBUS": "a bus error: native code touched memory it must not",
            "SIGFPE": "an arithmetic fault in native code",
            "SIGKILL": "killed from outside, often for lack of memory",
            "SIGTERM": "terminated from outside",
        }.get(name, "")
        return f"{name}" + (f", {what}" if what else "")
    return f"exit status {returncode} (sys.exit() or os._exit() in the code?)"


class CheckProcess:
    """One child process that runs checks; replaced after a crash or a hang."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self._process: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self.stopped_because = ""  # why the last wait ended early: time, memory or exit
        self.durations: dict[str, float] = {}  # seconds each check of the last step took

    # -- process life ------------------------------------------------------
    def start(self) -> None:
        requests_read, requests_write = os.pipe()
        answers_read, answers_write = os.pipe()
        output = subprocess.DEVNULL if self.quiet else None
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.checker.child",
                str(requests_read),
                str(answers_write),
            ],
            cwd=REPO,
            env=max_runtime.child_env(),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            pass_fds=(requests_read, answers_write),
            start_new_session=True,  # its own process group: stopped with its children
        )
        os.close(requests_read)
        os.close(answers_write)
        self._requests = os.fdopen(requests_write, "w", buffering=1, encoding="utf-8")
        self._answers = answers_read
        self._buffer = b""
        hello = self._receive(STARTUP_LIMIT)
        if hello is None:
            code = self.stop()
            raise CheckProcessError(
                f"the checker's worker process did not start ({describe_exit(code)})."
            )

    def ensure_started(self) -> None:
        if self._process is None or self._process.poll() is not None:
            self.start()

    def stop(self) -> int:
        """End the worker and everything it started; its exit status."""
        process, self._process = self._process, None
        if process is None:
            return 0
        try:
            self._requests.close()
        except OSError:
            pass
        try:
            process.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        code = process.wait()
        os.close(self._answers)
        return code

    def __enter__(self) -> CheckProcess:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    # -- talking to it -----------------------------------------------------
    def _receive(
        self, seconds: float | None, watch: Callable[[], str | None] | None = None
    ) -> dict[str, Any] | None:
        """The worker's next message; None if it died or `seconds` passed.
        `watch()` returning a reason stops the wait early (memory)."""
        assert self._process is not None
        deadline = None if seconds is None else time.monotonic() + seconds
        selector = selectors.DefaultSelector()
        selector.register(self._answers, selectors.EVENT_READ)
        try:
            while b"\n" not in self._buffer:
                wait = POLL if deadline is None else min(POLL, deadline - time.monotonic())
                if wait <= 0:
                    self.stopped_because = "time"
                    return None
                if selector.select(wait):
                    chunk = os.read(self._answers, 65536)
                    if not chunk:  # the worker is gone
                        self.stopped_because = "exit"
                        return None
                    self._buffer += chunk
                elif watch is not None and (reason := watch()):
                    self.stopped_because = reason
                    return None
        finally:
            selector.close()
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _over_memory(self) -> str | None:
        assert self._process is not None
        if resident_bytes(self._process.pid) > memory_limit():
            return "memory"
        return None

    def run_step(
        self,
        number: int,
        path: Path,
        on_title: Callable[[str], None] | None = None,
        limit: float | None = None,
        on_compile: Callable[[str], None] | None = None,
    ) -> tuple[str, list[Outcome]]:
        """Run step `number`'s checks on `path` in the worker: (title, outcomes).
        `on_title(title)` is called as soon as the worker has loaded the step;
        `limit` replaces the step's time limit per check; `on_compile(family)`
        is called when MAX starts compiling a kernel no cache holds."""
        self.ensure_started()
        request = {"step": number, "path": str(path), "limit": limit}
        self._requests.write(json.dumps(request) + "\n")
        step = self._receive(STARTUP_LIMIT)
        if step is None:
            raise CheckProcessError(f"the checker's worker stopped ({describe_exit(self.stop())}).")
        title, checks, limit = step["title"], step["checks"], step["limit"]
        if on_title:
            on_title(title)
        grace = limit + max(GRACE_FLOOR, GRACE_FACTOR * limit)
        current, since = None, time.monotonic()
        self.durations = {}
        wait = grace
        while True:
            message = self._receive(wait, self._over_memory)
            wait = grace
            now = time.monotonic()
            if current is not None:
                self.durations[current] = now - since
            if message is None:
                return title, self._stopped(checks, current, now - since)
            if "compiling" in message:
                wait = max(grace, COMPILE_LIMIT)  # MAX compiles; the check's clock waits
                if on_compile:
                    on_compile(message["compiling"])
            elif "check" in message:
                current, since = message["check"], now
            else:
                return title, [Outcome(**outcome) for outcome in message["outcomes"]]

    def _stopped(self, checks: list[str], current: str | None, waited: float) -> list[Outcome]:
        """Outcomes for a worker that crashed, hung or ran out of memory while
        running `current`: the checks before it passed, the rest did not run."""
        why = self.stopped_because
        code = self.stop()
        if why == "time":
            message = (
                f"stopped: still running after {waited:.0f} s, inside native code "
                "(MAX, NumPy or a C library) where Python could not interrupt it."
            )
            hint = "Look for a loop that never ends, or a call that waits forever, in your code."
        elif why == "memory":
            message = (
                f"stopped: it used more than {memory_limit() / 2**30:.1f} GiB of memory "
                "(CHECK_MEMORY_LIMIT_GB sets the limit)."
            )
            hint = (
                "Look for a tensor far larger than it should be (a shape multiplied instead "
                "of added?) or a list that grows forever."
            )
        else:
            message = f"the process running your code crashed: {describe_exit(code)}."
            hint = (
                "A crash inside native code, not a Python error: look for an index out of "
                "range, an impossible shape or a ctypes call in what this check runs."
            )
        outcomes = [Outcome("no placeholders left", "pass")]
        if current is None or current == "the file imports":
            return (
                outcomes
                + [Outcome("the file imports", "fail", message, hint)]
                + [Outcome(name, "skip") for name in checks]
            )
        index = checks.index(current)
        return (
            outcomes
            + [Outcome(name, "pass") for name in checks[:index]]
            + [Outcome(current, "fail", message, hint)]
            + [Outcome(name, "skip") for name in checks[index + 1 :]]
        )
