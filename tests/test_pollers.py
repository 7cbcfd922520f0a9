"""common.max_runtime's setting aside of threads that poll (MAX's logger):
docs/src/performance.md, "The runtime's logger polls". The canaries that MAX
still polls sit beside the models that set it aside: test_fast.py (the fast
generator) and test_serve.py (`max serve`'s model worker)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

import pytest

from common import max_runtime

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux's SCHED_IDLE")


@contextlib.contextmanager
def running(*sleeps_s: float) -> Iterator[list[threading.Thread]]:
    """Threads that each sleep the given seconds at a time, until the block ends."""
    stop = threading.Event()

    def sleep_until_stopped(seconds: float) -> None:
        while not stop.is_set():
            time.sleep(seconds)

    threads = [threading.Thread(target=sleep_until_stopped, args=(s,)) for s in sleeps_s]
    for thread in threads:
        thread.start()
    try:
        yield threads
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def is_set_aside(thread: threading.Thread) -> bool:
    return os.sched_getscheduler(thread.native_id) == os.SCHED_IDLE


def test_a_thread_that_polls_while_the_process_is_idle_is_set_aside() -> None:
    """A thread that sleeps 100 microseconds at a time (as MAX's logger does)
    is set aside; one that sleeps 10 milliseconds at a time is left as it was."""
    with running(0.0001, 0.01) as (polling, resting):
        time.sleep(0.01)
        set_aside = max_runtime.demote_idle_pollers()
        assert polling.native_id in set_aside and is_set_aside(polling)
        assert resting.native_id not in set_aside and not is_set_aside(resting)


def test_only_the_polling_threads_a_call_started_are_set_aside() -> None:
    """`max serve`'s model worker wraps its first execute: of the threads
    that call started, the one that polls is set aside, and no thread that
    was there before it, polling or not (a server's own threads)."""
    with running(0.0001) as (earlier,), contextlib.ExitStack() as stack:
        started: list[threading.Thread] = []

        def call() -> str:
            started.extend(stack.enter_context(running(0.0001, 0.01)))
            return "the call's result"

        result, set_aside = max_runtime.set_aside_pollers_started_by(call)
        polling, resting = started
        assert result == "the call's result"
        assert set_aside == [polling.native_id] and is_set_aside(polling)
        assert not is_set_aside(resting)
        assert not is_set_aside(earlier)
