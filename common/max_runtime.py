"""Process-wide set-up every entry point runs before MAX does any work.

Keep this the one place for workarounds about the MAX runtime itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from types import FrameType
from typing import TypeVar

T = TypeVar("T")

_prepared = False


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def prepare() -> None:
    """Install our own SIGINT handler before MAX runs (idempotent).

    On Python 3.11 and 3.12, ``asyncio.run`` in the main thread installs a
    SIGINT handler only while Python's default one is in place, and on the way
    out ``signal.getsignal`` builds an error message that formats the finished
    task's result. MAX's eager tensors run through ``asyncio.run``, and a
    Tensor's repr renders every element with more eager ops: a small matmul
    took 64 s instead of 10 ms. With a handler of our own installed, asyncio
    leaves SIGINT alone. Python 3.13 is not affected; the handler is harmless
    there and still turns Ctrl-C into a KeyboardInterrupt our CLIs catch.
    """
    global _prepared
    if _prepared:
        return
    signal.signal(signal.SIGINT, _interrupt)
    _no_compile_workers()
    _prepared = True


# MAX 26.7's name for its interpret-first executor that compiles a graph the
# interpreter refuses in this process, instead of in a pool of workers.
_IN_PROCESS_EXECUTOR = "fallback-internal"


def _no_compile_workers() -> None:
    """Run MAX's eager ops without its background compile processes.

    By default MAX interprets an eager op and meanwhile compiles its graph in
    a pool of worker processes (one per core). Once started, each of those
    workers keeps a core busy for as long as this process lives, idle or not,
    so on a small machine nearly all the CPU goes to idle workers, and every
    benchmark and check shares what is left with them.
    MAX's in-process executor interprets the same ops and compiles, here and
    synchronously, only a graph the interpreter refuses. MAX reads the
    variable when it is imported (so does every subprocess we start); only
    where it was imported before this runs is the executor replaced here,
    so that an entry point that never uses MAX does not pay for its import.
    """
    os.environ.setdefault("MAX_EAGER_EXECUTOR", _IN_PROCESS_EXECUTOR)
    executor = sys.modules.get("max.experimental.executor")
    if executor is None:
        return
    make = getattr(executor, "_EXECUTORS", {}).get(os.environ["MAX_EAGER_EXECUTOR"])
    if make is not None:
        executor.set_default_executor(make())


def on_the_cpu() -> contextlib.AbstractContextManager:
    """A context in which new MAX tensors are made on the CPU, in float32.

    Where MAX sees an accelerator it makes every tensor created without a
    device there, and in bfloat16 (its default dtype follows the device), so
    the tutorial's model would get bfloat16 parameters that a float32
    checkpoint cannot be loaded into. The checks, the Try it experiments and
    the tools that run the tutorial's model (steps 13-23) run it on the CPU,
    where the references' numbers and the tolerances hold; fast/gpt2.py is
    the model that runs on a GPU. (A learner's tensor made on the wrong
    device is still caught in the checks: tests/specs/devices.py.)
    """
    from max.driver import CPU
    from max.experimental.tensor import default_device

    return default_device(CPU())


@contextlib.contextmanager
def stdout_for_text_only():
    """Keep the process's standard output for what Python prints through
    `sys.stdout`; whatever native code writes to file descriptor 1 goes to
    standard error instead.

    MAX's runtime prints notices such as "compiled ... on the fly" straight to
    descriptor 1 while a graph compiles or runs, which put them in the middle
    of a generated text (and of anything a pipe reads from it). Inside this
    context descriptor 1 is standard error, and `sys.stdout` writes to a copy
    of the real standard output.
    """
    sys.stdout.flush()
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    saved = sys.stdout
    encoding, errors = getattr(saved, "encoding", None), getattr(saved, "errors", None)
    text = open(real_stdout, "w", encoding=encoding, errors=errors, closefd=False)
    sys.stdout = text
    try:
        yield
    finally:
        text.flush()
        sys.stdout = saved
        os.dup2(real_stdout, 1)
        text.close()
        os.close(real_stdout)


def kernel_cache_is_warm() -> bool:
    """Whether `max warm-interpreter-cache` has provisioned this machine.

    When it has not, each eager op family compiles on first use (16-34 s
    each), which makes a first check look frozen.
    """
    try:
        from max._interpreter_ops import gc_compile
    except Exception:  # a MAX without this module: assume nothing to warm
        return True
    try:
        return bool(gc_compile.provisioned())
    except Exception:
        return False


def precompiled(package: Path) -> Path:
    """A Mojo source package (a folder with __init__.mojo) as the .mojoc file
    MAX builds of it, built once for each content of its sources.

    Handed a source folder, MAX runs `mojo precompile` on it for every graph
    that names it: seconds each time, and every load of the fast model, every
    test and every profile builds several such graphs. The copy kept here is
    named by a hash of the sources and of the compiler's version, so an edited
    kernel is built anew. A path that is not a source package is returned as
    it is, for MAX to load.
    """
    try:
        from mojo.paths import _build_mojo_source_package, is_mojo_source_package_path
    except ImportError:  # a MAX without them: let MAX build the package itself
        return package
    if not is_mojo_source_package_path(package):
        return package
    digest = hashlib.sha256()
    for distribution in ("max", "mojo-compiler"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            digest.update(importlib.metadata.version(distribution).encode() + b"\0")
    for source in sorted(package.rglob("*.mojo")):
        digest.update(source.relative_to(package).as_posix().encode() + b"\0")
        digest.update(source.read_bytes())
    folder = Path(tempfile.gettempdir()) / f".modular_{os.getuid()}" / "precompiled"
    folder = folder / f"{package.name}_{digest.hexdigest()[:24]}"
    for built in folder.glob("*.mojoc"):
        return built
    # MAX's build lands at a path named after the folder, rebuilt on every
    # load; a copy under the same file name (the compiler names the module
    # after it) is published with an atomic rename, for concurrent processes.
    fresh = _build_mojo_source_package(package)
    folder.mkdir(parents=True, exist_ok=True)
    staging = folder / f".{os.getpid()}.{fresh.name}"
    shutil.copyfile(fresh, staging)
    built = folder / fresh.name
    os.replace(staging, built)
    return built


# MAX's one Python extension written in Mojo, built from its source on first
# import (into a __mojocache__ folder beside it in site-packages).
MOJO_EXTENSIONS = ("max._kv_cache_ops.kv_cache_ops",)


def mojo_extensions_lock() -> Path:
    """The file processes of this user lock to import MAX's Mojo extensions."""
    folder = Path(tempfile.gettempdir()) / f".modular_{os.getuid()}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "mojo-extensions.lock"


def import_mojo_extensions() -> None:
    """Import MAX's Mojo extensions, one process at a time.

    The first import of `max.nn` (or anything that uses it) compiles
    max._kv_cache_ops from its Mojo source and writes the .so in place, where
    the next import finds it. A second process that imports it meanwhile
    loads the half-written file and fails ("file too short"): pytest's
    workers collecting tests side by side on a fresh install did. Processes
    that may start together (the suite's workers, a check and the background
    process compiling the next steps) call this first: the first one builds
    the extension while the others wait on a lock, then find it built.
    """
    with open(mojo_extensions_lock(), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        for name in MOJO_EXTENSIONS:
            with contextlib.suppress(ModuleNotFoundError):  # a MAX without it
                importlib.import_module(name)
    restore_c_environment()


# What MAX's native runtime setenv()s as it starts (see child_env).
RUNTIME_SETS = ("PYTHONEXECUTABLE", "PYTHONPATH")


def restore_c_environment() -> None:
    """Put back the C environment's values that MAX's runtime setenv()s, from
    os.environ (which still holds them as they were).

    A child that inherits the C environment rather than taking child_env()'s
    (pytest's workers, started after the suite's settings import MAX) would
    otherwise run the interpreter MAX found on PATH: outside the virtualenv
    where PATH does not lead into it, and a tool it starts cannot import numpy.
    """
    for key in RUNTIME_SETS:
        if key in os.environ:
            os.putenv(key, os.environ[key])
        else:
            os.unsetenv(key)


def child_env(**extra: str) -> dict[str, str]:
    """The environment to hand a subprocess started after MAX has run.

    MAX's native runtime setenv()s PYTHONEXECUTABLE (to the interpreter it
    found on PATH) and PYTHONPATH behind os.environ's back; a child started
    with the inherited C environment then runs outside the virtualenv and
    cannot import numpy. os.environ still holds the clean values, so pass it
    explicitly.
    """
    return {**os.environ, **extra}


# A thread that goes to sleep this often while the process is idle is polling.
POLLING_SWITCHES_PER_S = 1000
POLL_WINDOW_S = 0.03


def demote_idle_pollers(
    window_s: float = POLL_WINDOW_S, among: Collection[int] | None = None
) -> list[int]:
    """Give threads that poll while the process is idle the CPU only when no
    other thread wants it (Linux's SCHED_IDLE); returns their thread ids.

    From a process's first `execute`, MAX 26.7 keeps a logging thread that
    wakes every 100 microseconds whether or not anything was logged (a
    condition wait with a 100 us deadline, in a loop: about 5,700 wake-ups
    a second, a tenth of a core). On a 2-core machine each wake-up takes a
    core from one of our kernels' two workers, and a kernel whose steps wait
    for both cores waits for the one it took. As SCHED_IDLE it runs only on
    a core nothing else wants (docs/src/performance.md, "The runtime's
    logger polls"). Call it while the process is otherwise idle, after a first
    execute: it watches every thread (or those `among` names) for `window_s`
    and counts how often each went to sleep. Elsewhere than Linux it does
    nothing.
    """
    if not hasattr(os, "SCHED_IDLE"):
        return []
    before = _voluntary_switches()
    time.sleep(window_s)
    after = _voluntary_switches()
    watched = set(after if among is None else among) - {threading.get_native_id()}
    pollers = [
        tid
        for tid, switches in after.items()
        if tid in watched
        and switches - before.get(tid, switches) >= POLLING_SWITCHES_PER_S * window_s
    ]
    demoted = []
    for tid in pollers:
        try:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        except OSError:  # the thread ended, or this process may not change it
            continue
        demoted.append(tid)
    return demoted


def set_aside_pollers_started_by(call: Callable[[], T]) -> tuple[T, list[int]]:
    """Run `call`, then set aside the threads it started that poll; returns
    its result and their ids.

    For a process that is rarely idle, such as `max serve`'s model worker,
    where demote_idle_pollers' watch of every thread could catch a thread
    that waits for requests. MAX starts its logger at a process's first
    execute, and only it: wrap that execute. Its other threads may go on
    working during the watch; the logger polls whether or not they do.
    """
    before = thread_ids()
    result = call()
    started = thread_ids() - before
    return result, demote_idle_pollers(among=started) if started else []


def thread_ids() -> set[int]:
    """The ids of this process's threads (Linux); an empty set elsewhere."""
    try:
        return {int(tid) for tid in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _voluntary_switches() -> dict[int, int]:
    """{thread id: how often it has gone to sleep} for this process's threads."""
    switches = {}
    for tid in thread_ids():
        try:
            with open(f"/proc/self/task/{tid}/status") as file:
                status = file.read()
        except OSError:  # the thread ended while we looked
            continue
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                switches[tid] = int(line.split()[1])
    return switches
