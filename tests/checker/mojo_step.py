"""A step whose learner writes Mojo: the engine's run for a .mojo file.

Mojo has no Python AST and is not imported: its blanks (the word TODO) and
its names are read from the text, the Mojo compiler builds it
(common/mojo_file.py, whose refusal is named at the learner's line), and the
checks call its operations from graphs, with the module the engine hands
them holding the file's `path` and its built `library`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from common import max_runtime, mojo_file

from . import compiles, engine, source


def run_mojo_step(
    step: engine.Step, path: Path, started: Callable[[str], None], limit: float
) -> list[engine.Outcome]:
    """A Mojo file's checks: its blanks and names read from the text, then
    built by the Mojo compiler (its refusal named at the learner's line),
    then the checks, which call the file's operations from graphs."""
    skipped = [engine.Outcome(c.name, "skip") for c in step.checks]
    blanks = source.mojo_placeholders(path)
    if blanks:
        message = engine.describe_placeholders(path, blanks).replace("still None", "still TODO")
        hint = "Replace each TODO with code; the comment above it says what goes there."
        return [engine.Outcome("no placeholders left", "fail", message, hint)] + skipped
    missing = source.mojo_missing_names(path, step.required)
    if missing:
        hint = "Keep the function and struct names of the skeleton."
        return [
            engine.Outcome(
                "required names defined", "fail", "not defined: " + ", ".join(missing), hint
            )
        ] + skipped
    outcomes = [engine.Outcome("no placeholders left", "pass")]
    compiles.watch()
    started("the file compiles")
    try:
        library = compiles.announced("your Mojo file", lambda: mojo_file.library(path))
    except mojo_file.MojoCompileError as error:
        hint = "Fix the first error the compiler names; the ones after it often follow from it."
        return outcomes + [engine.Outcome("the file compiles", "fail", str(error), hint)] + skipped
    module = SimpleNamespace(path=path, library=library)
    with max_runtime.on_the_cpu(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module=r"max\.")
        return outcomes + engine.run_checks(step, path, module, started, limit)  # type: ignore[arg-type]
