"""One Mojo file as a package MAX loads: the form a step's Mojo skeleton takes.

MAX loads custom operations from Mojo packages (a folder with an
__init__.mojo), so a single file is copied into a package of its own, named
after where the file lives, and built by common.max_runtime.precompiled
(once per content of the file, about two seconds). A file the Mojo compiler
refuses raises MojoCompileError, whose message names the file and the line
as the learner knows them, never the copy's.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
from pathlib import Path

from common import max_runtime
from common.steps import display_path

# The compiler's diagnostics: "/path/file.mojo:12:5: error: what".
DIAGNOSTIC = re.compile(
    r"^(?P<file>[^\s:]+\.mojo):(?P<line>\d+):(?P<column>\d+): error: (?P<what>.*)$"
)
MOST_ERRORS = 3  # the first errors name the cause; later ones often follow from it
CONVERSION = (
    "(Mojo converts no number to another type by itself: an Int8 or a Float16 "
    "becomes a Float32 only through Float32(...).)"
)


class MojoCompileError(Exception):
    """The Mojo compiler refused the file; str() is the short message."""


def package_for(mojo_file: Path) -> Path:
    """A Mojo package holding a copy of `mojo_file` (as kernel.mojo), in the
    temporary folder, one per place the file lives."""
    mojo_file = Path(mojo_file).resolve()
    where = hashlib.sha256(str(mojo_file).encode()).hexdigest()[:16]
    root = Path(tempfile.gettempdir()) / f".modular_{os.getuid()}" / "mojo_files" / where
    package = root / mojo_file.stem
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.mojo").touch()
    copy = package / "kernel.mojo"
    text = mojo_file.read_text(encoding="utf-8")
    if not copy.is_file() or copy.read_text(encoding="utf-8") != text:
        copy.write_text(text, encoding="utf-8")
    return package


def compile_message(text: str, copy: Path, mojo_file: Path) -> str:
    """The compiler's errors, pointing at the learner's file: each "file:line:
    error" with its line of code, at most MOST_ERRORS of them."""
    lines = text.splitlines()
    found = []
    for index, line in enumerate(lines):
        match = DIAGNOSTIC.match(line.strip())
        if not match or Path(match["file"]).resolve() != copy.resolve():
            continue
        code = lines[index + 1].strip() if index + 1 < len(lines) else ""
        found.append(
            f"{display_path(mojo_file)}:{match['line']}: {match['what']}"
            + (f"\n    {code}" if code else "")
        )
    if not found:
        last = [line for line in lines if "error" in line.lower()][-1:] or lines[-1:]
        found = [last[0].strip() if last else "the compiler gave no reason"]
    more = len(found) - MOST_ERRORS
    shown = found[:MOST_ERRORS] + ([f"... and {more} more"] if more > 0 else [])
    if any("cannot be converted from" in each for each in shown):
        shown.append(CONVERSION)
    return "the Mojo compiler refused it:\n" + "\n".join(shown)


def library(mojo_file: Path) -> Path:
    """`mojo_file` built into a package MAX loads (cached by content); a
    MojoCompileError when the compiler refuses it."""
    package = package_for(mojo_file)
    # MAX logs the compiler's whole output (warnings and all) on the root
    # logger before it raises: the error raised says it, shortened.
    logged = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        return max_runtime.precompiled(package)
    except Exception as error:
        if type(error).__name__ != "MojoCompilationError":
            raise
        raise MojoCompileError(
            compile_message(str(error), package / "kernel.mojo", Path(mojo_file))
        ) from None
    finally:
        logging.disable(logged)
