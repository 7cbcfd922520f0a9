"""What the command-line tools (generate, serve, attention_map, bench) share:
their two kinds of error, the exit status each one means, and progress lines
for the long waits (compiling)."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator


class UsageError(Exception):
    """Bad input: printed as one message, exit status 2."""


class Failure(Exception):
    """Something we could not do (download, load, start): printed, exit status 1."""


def exit_status(run: Callable[[], object], *, on_interrupt: int = 130) -> int:
    """Run the tool: 0 when it finishes, 2 for a UsageError, 1 for a Failure,
    `on_interrupt` for Ctrl-C (0 where stopping is the normal way to end)."""
    try:
        run()
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
    return 0


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
