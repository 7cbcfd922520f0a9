"""Skeletons: their placeholders, and the untouched original of each step.

Where the untouched skeleton of a step comes from: git. No copy is stored next
to the steps (it could drift from them); the skeleton is the file as committed.
Not necessarily at HEAD: a learner who commits their work moves HEAD, so we walk
back through the file's history to the newest version that still looks like a
skeleton (every TODO block holds a `None` placeholder, which
tests/test_skeletons.py guarantees of the real ones). Without git (a zip
download), "not started" falls back to that same test on the file itself, and
`reset` says that it needs a git checkout.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from common import max_runtime, steps
from common.steps import REPO, display_path

from .checker import checker
from .files import read_source

if TYPE_CHECKING:
    from tests.checker import Placeholder

HISTORY_DEPTH = 50  # commits of a step file searched for its skeleton


def blanks_in_file(path: Path) -> list[Placeholder] | None:
    """The file's placeholders, or None when it does not parse."""
    return checker().placeholders_in(path)


def every_block_blank(path: Path) -> bool:
    """Whether every TODO block still holds a placeholder: true of every skeleton."""
    blanks = blanks_in_file(path)
    regions = checker().todo_regions(read_source(path))
    if not blanks or not regions:
        return False
    return {start for start, _, _ in regions} <= {blank.todo_line for blank in blanks}


def looks_like_skeleton(text: str, suffix: str = ".py") -> bool:
    """Whether `text`, a step file of the language `suffix` names, is a skeleton."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"step{suffix}"
        path.write_text(text, encoding="utf-8")
        return every_block_blank(path)


def git(*args: str) -> str | None:
    """Run a read-only git command in the repository; None if it fails."""
    try:
        result = subprocess.run(
            ["git", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=max_runtime.child_env(GIT_OPTIONAL_LOCKS="0"),
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def pristine_skeleton(number: int) -> str | None:
    """The newest committed version of the step file that is still a skeleton."""
    relative = display_path(steps.step(number).skeleton)
    commits = git("rev-list", f"--max-count={HISTORY_DEPTH}", "HEAD", "--", relative)
    for commit in (commits or "").split():
        text = git("show", f"{commit}:./{relative}")
        if text is not None and looks_like_skeleton(text, steps.step(number).suffix):
            return text.replace("\r\n", "\n")
    return None


def tracks_steps() -> bool:
    """Whether git knows the step files (a git checkout of the tutorial)."""
    return bool((git("ls-files", "--", "steps") or "").strip())


def untouched(number: int) -> bool:
    """Whether the step file is its skeleton (without git: no TODO block finished)."""
    path = steps.step(number).skeleton
    skeleton = pristine_skeleton(number)
    if skeleton is not None:
        return read_source(path) == skeleton
    return every_block_blank(path)
