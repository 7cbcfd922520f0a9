"""`reset`: a step back to its skeleton, the learner's version saved first."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from common import steps
from common.cli import Failure
from common.steps import REPO, display_path

from .files import read_source, write_atomically
from .skeletons import pristine_skeleton

BACKUPS = REPO / ".backups"


def backup(path: Path) -> Path:
    """Copy `path` to .backups/step_NN-YYYYmmdd-HHMMSS.py and check the copy."""
    BACKUPS.mkdir(exist_ok=True)
    content = path.read_bytes()
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for attempt in range(1, 1000):
        suffix = "" if attempt == 1 else f"-{attempt}"
        target = BACKUPS / f"{path.stem}-{stamp}{suffix}{path.suffix}"
        try:
            with open(target, "xb") as file:  # "x": never overwrite an older backup
                file.write(content)
        except FileExistsError:
            continue
        if target.read_bytes() != content:
            raise OSError(f"the copy in {display_path(target)} does not match the original")
        return target
    raise OSError("too many backups with the same time stamp")


def cmd_reset(args: argparse.Namespace) -> int:
    number = steps.parse_step(args.step)
    path = steps.step(number).skeleton
    skeleton = pristine_skeleton(number)
    if skeleton is None:
        raise Failure(
            f"cannot find the original skeleton of {display_path(path)}: reset takes it from git, "
            "and this is not a git checkout of the tutorial (or the file is not committed)."
        )
    if path.is_file() and read_source(path) == skeleton:
        print(f"{display_path(path)} is already the untouched skeleton: nothing to do.")
        return 0
    if path.exists():
        try:
            saved = backup(path)
        except OSError as error:
            raise Failure(
                f"could not back up {display_path(path)} ({error}); it is unchanged."
            ) from None
        print(f"Saved your version to {display_path(saved)}.")
    write_atomically(path, skeleton)
    print(f"Restored {display_path(path)} to its skeleton.")
    return 0
