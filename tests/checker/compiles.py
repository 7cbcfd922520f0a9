"""MAX's compiles during a check: off the check's clock, and announced.

A kernel or a graph MAX finds in its disk cache loads in well under a second;
one that takes longer is being compiled (tens of seconds on a machine's first
run). That time is MAX's, not the learner code's: the check's time limit
(learner_code.time_limit) stops while it runs, whether the check runs in the
checker's worker (tests/checker/child.py, which tells its parent, so that
the learner is told too) or in the process that asked (the test suite).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

COMPILE_NOTICE_AFTER = 2.0

Tell = Callable[[dict[str, Any]], None]
_tell: Tell = lambda message: None  # noqa: E731  whom to tell: the worker's parent
_watching = False


def announced(name: str, work: Callable[[], Any]) -> Any:
    """`work()` with the check's clock stopped, and {"compiling": name} told
    once it has taken longer than COMPILE_NOTICE_AFTER."""
    notice = threading.Timer(COMPILE_NOTICE_AFTER, lambda: _tell({"compiling": name}))
    notice.daemon = True
    remaining, _ = signal.setitimer(signal.ITIMER_REAL, 0)
    notice.start()
    try:
        return work()
    finally:
        notice.cancel()
        if remaining:
            signal.setitimer(signal.ITIMER_REAL, remaining)


def watch(tell: Tell | None = None) -> None:
    """Wrap MAX's compiles of an eager kernel and of a whole graph, once per
    process; `tell`, when given, is whom to tell from now on. Besides the
    graphs the checks compile, MAX compiles one where its eager interpreter
    fails: a lookup past the end of a table, say, whose error the compiled
    graph gives."""
    global _tell, _watching
    if tell is not None:
        _tell = tell
    if _watching:
        return
    try:
        from max._interpreter_ops import gc_compile
        from max.engine import InferenceSession
    except Exception:  # a MAX without lazy kernel compiles: nothing to watch
        return
    _watching = True
    compile_target = gc_compile.compile_single_target
    load = InferenceSession.load

    def compiling(family: Any, *args: Any, **kwargs: Any) -> Any:
        name = str(getattr(family, "name", family))
        return announced(name, lambda: compile_target(family, *args, **kwargs))

    def loading(session: InferenceSession, model: Any, *args: Any, **kwargs: Any) -> Any:
        name = f"graph {getattr(model, 'name', '')}".strip()
        return announced(name, lambda: load(session, model, *args, **kwargs))

    gc_compile.compile_single_target = compiling
    InferenceSession.load = loading
