"""The learner's files: read with newlines normalized, written whole, or
missing (with the command that restores them)."""

from __future__ import annotations

import os
from pathlib import Path

from common import steps
from common.cli import Failure
from common.steps import display_path, learn_command


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
