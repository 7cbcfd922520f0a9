"""Printing outcomes: one line per check, a summary, colour on a terminal."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from .engine import Outcome

ICONS = {"pass": "✅", "fail": "❌", "skip": "⏭️ "}


def plain() -> bool:
    """CHECK_PLAIN=1: the same text on every run (no colour, no timings), for the book."""
    return os.environ.get("CHECK_PLAIN", "") not in ("", "0")


def _colour_enabled() -> bool:
    return (
        sys.stdout.isatty()
        and not plain()
        and "NO_COLOR" not in os.environ
        and os.environ.get("TERM") != "dumb"
    )


def paint(text: str, code: str) -> str:
    return f"\033[{code}m{text}\033[0m" if _colour_enabled() else text


def green(text: str) -> str:
    return paint(text, "32")


def red(text: str) -> str:
    return paint(text, "31")


def dim(text: str) -> str:
    return paint(text, "2")


def bold(text: str) -> str:
    return paint(text, "1")


def indent(text: str, prefix: str = "   ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def print_outcomes(outcomes: Sequence[Outcome]) -> None:
    for outcome in outcomes:
        if outcome.status == "pass":
            print(f"{ICONS['pass']} {outcome.name}")
        elif outcome.status == "skip":
            print(dim(f"{ICONS['skip']} {outcome.name} (skipped: fix the check above first)"))
        else:
            print(f"{ICONS['fail']} {red(outcome.name)}")
            if outcome.message:
                print(indent(outcome.message))
            if outcome.hint:
                print(indent(f"Hint: {outcome.hint}"))


def passed(outcomes: Sequence[Outcome]) -> bool:
    return all(o.status == "pass" for o in outcomes)


def progress_bar(done: int, total: int, width: int = 30) -> str:
    filled = round(width * done / total) if total else width
    return "[" + "#" * filled + "-" * (width - filled) + f"] {done}/{total}"
