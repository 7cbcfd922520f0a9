"""Running the learner's code: importing it, time limits, readable errors."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import re
import signal
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import FrameType, ModuleType

from common.steps import REPO, display_path

_counter = itertools.count()


class CheckTimeout(BaseException):
    """BaseException, so that library code catching Exception cannot swallow it."""

    pass


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise CheckTimeout in the main thread after `seconds` (None: no limit)."""
    if not seconds:
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise CheckTimeout(f"still running after {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def first_line(message: str, limit: int = 240) -> str:
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


# In MAX's multi-line errors, the operands ("indices = TensorValue(dtype=...)")
# and the closing paragraph (what the op requires) name the cause.
OPERAND = re.compile(r"^\s*\w+ = Tensor(?:Value|Type)\(")
MAX_CAUSE_LINES = 6


def without_examples(lines: list[str]) -> list[str]:
    """The lines outside MAX's code examples ("Ex: ```" ... "```"): an example
    of how to reshape in general says nothing about the learner's reshape."""
    kept, inside = [], False
    for line in lines:
        fence = line.strip().endswith("```")
        if fence and (inside or line.strip().startswith("Ex:")):
            inside = not inside
        elif not inside:
            kept.append(line)
    return kept


def is_advice(line: str) -> bool:
    """MAX's advice on debugging MAX (MODULAR_DEBUG) or on overriding its shape
    checks (a rebind): nothing about the learner's mistake, and a bad idea for it."""
    return "MODULAR_DEBUG" in line or line.startswith("If you are confident")


def explanation(message: str, limit: int = 240) -> list[str]:
    """The lines of an error message that name its cause: the first line, then,
    for MAX's multi-line errors, the operands and the closing paragraph."""
    lines = without_examples([line.rstrip() for line in str(message).splitlines()])
    first = first_line(message, limit)
    rest = [line.strip() for line in lines[1:] if line.strip()]
    if not rest:
        return [first] if first else []
    operands = [line for line in rest if OPERAND.match(line)]
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", "\n".join(lines[1:])) if p.strip()]
    closing = [line.strip() for line in paragraphs[-1].splitlines()] if paragraphs else []
    cause = [
        line
        for line in closing
        if line not in operands and not line.endswith(":") and not is_advice(line)
    ]
    picked = operands + cause
    shortened = [line if len(line) <= limit else line[: limit - 3] + "..." for line in picked]
    return [first] + shortened[-MAX_CAUSE_LINES:]


def summarize(error: BaseException, learner_file: Path) -> str:
    """What was raised (with the lines of a long message that name the cause),
    and where in the learner's own code."""
    kind = type(error).__name__
    lines = explanation(str(error))
    head = f"{kind}: {lines[0]}" if lines else kind
    if len(lines) > 1:
        head += "\n" + "\n".join(f"   {line}" for line in lines[1:])
    frames = traceback.extract_tb(error.__traceback__)
    learner = Path(learner_file).resolve()
    # Prefer the learner's file; else the deepest frame in the tutorial's code.
    mine = [f for f in frames if Path(f.filename).resolve() == learner]
    ours = [f for f in frames if Path(f.filename).resolve().parent.name in ("steps", "solutions")]
    frame = (mine or ours or [None])[-1]
    if frame is None:
        return head
    where = f"{display_path(frame.filename)}:{frame.lineno}"
    code = (frame.line or "").strip()
    return f"{head}\n   at {where}" + (f": {code}" if code else "")


class LearnerImportError(Exception):
    pass


def import_file(path: Path) -> ModuleType:
    """Import a step file under a fresh module name (a file can be re-checked)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    name = f"_learner_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[name]
        raise LearnerImportError(summarize(error, path)) from error
    return module
