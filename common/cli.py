"""The one error path of the command lines (tests.check; tools' learn,
generate, serve and attention_map; devtools' bench, serve_bench, mutate,
book_outputs and llama_peer; the modules they call, such as common.steps and
tests/checker, raise its errors): two kinds of error, the exit status each one
means, one message style, and progress lines for the long waits (compiling).

    0    done
    1    a Failure: something could not be done (a check fails, a load fails)
    2    a UsageError: the command line or an input is wrong
    130  interrupted (Ctrl-C)

Every message is one line on stderr, `error: ...`. An unexpected exception is
one line too; TRACEBACK=1 shows the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import NoReturn


class UsageError(Exception):
    """Bad input: printed as one message, exit status 2."""


class Failure(Exception):
    """Something we could not do (download, load, start): printed, exit status 1."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, whose errors are UsageErrors: one line, exit status 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def exit_status(run: Callable[[], int | None], *, on_interrupt: int = 130) -> int:
    """Run the tool: its own status (0 when it returns None), 2 for a
    UsageError, 1 for a Failure or an unexpected error, `on_interrupt` for
    Ctrl-C (0 where stopping is the normal way to end)."""
    try:
        status = run()
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Failure as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if on_interrupt:
            print("\nInterrupted.", file=sys.stderr)
        return on_interrupt
    except BrokenPipeError:  # `... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as error:
        if os.environ.get("TRACEBACK"):
            raise
        text = str(error).strip()
        first = text.splitlines()[0] if text else ""
        print(
            f"error: {type(error).__name__}: {first} (TRACEBACK=1 shows the traceback)",
            file=sys.stderr,
        )
        return 1
    return status or 0


@contextlib.contextmanager
def progress(what: str, every: float = 15.0, note: str = "") -> Iterator[None]:
    """Say what is being done, how long it has taken every `every` seconds
    while it runs (a cold compile is otherwise minutes of silence), and when
    it is done. `note` follows the first line (e.g. how long it usually takes)."""
    started = time.perf_counter()
    print(f"{what}..." + (f" ({note})" if note else ""), file=sys.stderr, flush=True)
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(every):
            print(f"  {what}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
        ticker.join()
    print(f"{what}: done in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
