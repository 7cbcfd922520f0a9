"""What every learner command uses: the checker, loaded on demand; paths and
commands as the learner reads and types them; files written whole."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

from common import steps
from common.cli import Failure
from common.steps import display_path

PROG = "python -m tools.learn"


def learn_command(*words: str) -> str:
    """One of the learner's commands, as pixi users and pip users type it."""
    said = " ".join(words)
    return f"`pixi run {said}` (pip: `{PROG} {said}`)"


# The checker needs NumPy and MAX; `doctor` must run without them, so nothing
# here imports it before a command needs it.


def checker() -> ModuleType:
    """tests.check: the checker's command line, whose helpers we reuse."""
    try:
        import tests.check as check
    except ImportError as error:
        raise Failure(
            f"cannot load the checker ({error}); {learn_command('doctor')} says what is missing."
        ) from None
    return check


def source() -> ModuleType:
    """tests.checker.source: TODO blocks and placeholders."""
    checker()  # the friendly error if the checker cannot load
    import tests.checker.source as source

    return source


def read_source(path: Path) -> str:
    """The file's text with newlines normalized (undecodable bytes replaced)."""
    return path.read_bytes().decode("utf-8", errors="replace").replace("\r\n", "\n")


def write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file and a rename: never a half-written file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def step_missing(number: int) -> Failure:
    """The error for a step file the learner deleted (or moved)."""
    path = steps.step(number).skeleton
    return Failure(
        f"{display_path(path)} is missing: {learn_command('reset', f'{number:02d}')} restores it."
    )
