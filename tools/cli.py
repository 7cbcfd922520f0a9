"""What the command-line tools (generate, serve, attention_map) share: their
two kinds of error and the exit status each one means."""

from __future__ import annotations

import sys
from collections.abc import Callable


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
