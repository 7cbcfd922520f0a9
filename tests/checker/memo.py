"""The last outcome of each checked file, kept so that

- `python -m tools.learn hint NN` can answer the check that fails without
  running it again while the file is unchanged, and
- `check all` (and the learner's `status` and `next`) need not run again the
  checks of a step that passed and has not changed since.

Kept in .check_results.json at the repository's root (ignored by git), one
entry per checked file, with a fingerprint of everything its verdict depends
on: the file, the learner's step files it imports, the checker with every
spec, reference and solution (tests/, solutions/, common/), and the versions
of Python, MAX and NumPy. A change to any of them makes the stored result
stale, and the step is checked again.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import threading
from pathlib import Path

from common.steps import REPO

from .engine import Outcome

RESULTS = REPO / ".check_results.json"
CHECKER_FOLDERS = ("tests", "solutions", "common")  # what a verdict depends on besides the file
VERSIONED = ("max", "numpy")
_writing = threading.Lock()  # `check all` remembers from several threads


@functools.cache
def checker_digest() -> str:
    """One digest of the checker, its specs, references and the solutions the
    skeletons import (the suite's own test files aside), and of the versions
    that run them; computed once per process."""
    digest = hashlib.sha256(f"python {platform.python_version()}".encode())
    for name in VERSIONED:
        try:
            digest.update(f"|{name} {importlib.metadata.version(name)}".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"|{name} -".encode())
    for folder in CHECKER_FOLDERS:
        for path in sorted((REPO / folder).rglob("*")):
            if (
                path.suffix in (".py", ".toml")
                and not path.name.startswith("test_")
                and "__pycache__" not in path.parts
            ):
                digest.update(str(path.relative_to(REPO)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def imported_steps(path: Path) -> list[Path]:
    """The learner's step files (steps/step_NN.py) that `path` imports,
    directly or through one another."""
    found: list[Path] = []
    todo = [path]
    while todo:
        try:
            tree = ast.parse(todo.pop().read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level == 1:  # `from .step_04 import x` inside steps/
                    module = "steps" + (f".{module}" if module else "")
                elif node.level:
                    continue
                names = [module] + [f"{module}.{alias.name}" for alias in node.names]
            for name in names:
                parts = name.split(".")
                if len(parts) == 2 and parts[0] == "steps":
                    step_file = REPO / "steps" / f"{parts[1]}.py"
                    if step_file.is_file() and step_file not in found and step_file != path:
                        found.append(step_file)
                        todo.append(step_file)
    return sorted(found)


def fingerprint(number: int, path: Path) -> str:
    digest = hashlib.sha256(f"step {number}|{checker_digest()}".encode())
    for each in (path, *imported_steps(path)):
        try:
            digest.update(each.read_bytes())
        except OSError:
            digest.update(b"<missing>")
    return digest.hexdigest()


def key(number: int, path: Path) -> str:
    """The entry's name: the step and the file, relative to the repository."""
    path = path.resolve()
    try:
        shown = str(path.relative_to(REPO))
    except ValueError:
        shown = str(path)
    return f"{number:02d} {shown}"


def _load() -> dict:
    try:
        stored = json.loads(RESULTS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stored if isinstance(stored, dict) else {}


def remember(number: int, path: Path, outcomes: list[Outcome]) -> None:
    """Store this result (silently skipped where the checkout is read-only)."""
    entry = {
        "fingerprint": fingerprint(number, path),
        "outcomes": [dataclasses.asdict(outcome) for outcome in outcomes],
    }
    with _writing:
        stored = _load()
        stored[key(number, path)] = entry
        temporary = RESULTS.with_name(f".{RESULTS.name}.{os.getpid()}.tmp")
        try:
            temporary.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")
            os.replace(temporary, RESULTS)
        except OSError:
            pass
        finally:
            temporary.unlink(missing_ok=True)


def recall(number: int, path: Path) -> list[Outcome] | None:
    """The stored outcomes, if nothing the verdict depends on changed since."""
    entry = _load().get(key(number, path))
    if not isinstance(entry, dict) or entry.get("fingerprint") != fingerprint(number, path):
        return None
    try:
        return [Outcome(**outcome) for outcome in entry["outcomes"]]
    except (KeyError, TypeError):
        return None


def passed_unchanged(number: int, path: Path) -> bool:
    """Whether `path` passed every check of step `number` and nothing its
    verdict depends on changed since."""
    outcomes = recall(number, path)
    return bool(outcomes) and all(outcome.status == "pass" for outcome in outcomes)
