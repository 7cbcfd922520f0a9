"""The checker's child process: `python -m tests.checker.child REQUESTS ANSWERS`.

Started by tests/checker/isolate.py with two pipe file descriptors. It imports
MAX once, says it is ready, then for each request
({"step": NN, "path": FILE}, one JSON line) runs that step's checks and
answers, one JSON line each: the step's title, check names and time limit;
the name of each check as it begins; {"compiling": NAME} when a kernel or a
graph takes MAX more than compiles.COMPILE_NOTICE_AFTER seconds (a compile, not a load
from its disk cache); the outcomes. The learner's code runs
here, so whatever it does to this process cannot reach the checker.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from common import max_runtime
from tests.checker import compiles

PR_SET_PDEATHSIG = 1  # prctl(2)


def die_with_parent() -> None:
    """Linux: be killed when the checker is (its own session keeps it out of
    the terminal's Ctrl-C, so nothing else would end it)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the checker stops it by PID
        pass


def main(requests_fd: int, answers_fd: int) -> None:
    die_with_parent()
    max_runtime.prepare()
    max_runtime.import_mojo_extensions()  # a background warm-up may import MAX too
    # MAX logs each kernel it compiles on the fly; the checker says so once, in
    # its own words, before the checks (tests/check.py), not amid their results.
    logging.getLogger("max._eager_policy").setLevel(logging.ERROR)
    answers = os.fdopen(answers_fd, "w", buffering=1, encoding="utf-8")

    writing = threading.Lock()  # the compile notice is sent from a timer's thread

    def send(message: dict[str, Any]) -> None:
        with writing:
            sys.stdout.flush()  # what the learner printed comes out before the result
            sys.stderr.flush()
            answers.write(json.dumps(message) + "\n")

    from tests.checker.engine import load_spec, run_step, time_limit_for

    compiles.watch(send)
    send({"ready": True})
    with os.fdopen(requests_fd, encoding="utf-8") as requests:
        for line in requests:
            request = json.loads(line)
            step = load_spec(request["step"])
            limit = request.get("limit") or time_limit_for(step)
            checks = [c.name for c in step.checks]
            send({"title": step.title, "checks": checks, "limit": limit})
            outcomes = run_step(
                step, Path(request["path"]), lambda name: send({"check": name}), limit
            )
            send({"outcomes": [dataclasses.asdict(outcome) for outcome in outcomes]})


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
