"""The last outcome of each step's check on the learner's file, kept so that
`python -m tools.learn hint NN` can answer the check that fails without running
it again while the file is unchanged.

Kept in .check_results.json at the repository's root (ignored by git), keyed
by step, with a fingerprint of the learner's file and of the step's spec: a
change to either makes the stored result stale.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from common import steps
from common.steps import REPO

from .engine import Outcome

RESULTS = REPO / ".check_results.json"


def fingerprint(number: int, path: Path) -> str:
    digest = hashlib.sha256()
    spec = sorted(steps.step(number).spec.glob("*.*"))  # its checks and hints
    for each in (path, *spec):
        try:
            digest.update(each.read_bytes())
        except OSError:
            digest.update(b"<missing>")
    return digest.hexdigest()


def _load() -> dict:
    try:
        stored = json.loads(RESULTS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stored if isinstance(stored, dict) else {}


def remember(number: int, path: Path, outcomes: list[Outcome]) -> None:
    """Store this result (silently skipped where the checkout is read-only)."""
    stored = _load()
    stored[f"{number:02d}"] = {
        "fingerprint": fingerprint(number, path),
        "outcomes": [dataclasses.asdict(outcome) for outcome in outcomes],
    }
    temporary = RESULTS.with_name(f".{RESULTS.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")
        os.replace(temporary, RESULTS)
    except OSError:
        pass
    finally:
        temporary.unlink(missing_ok=True)


def recall(number: int, path: Path) -> list[Outcome] | None:
    """The stored outcomes, if the file and the spec are unchanged since."""
    entry = _load().get(f"{number:02d}")
    if not isinstance(entry, dict) or entry.get("fingerprint") != fingerprint(number, path):
        return None
    try:
        return [Outcome(**outcome) for outcome in entry["outcomes"]]
    except (KeyError, TypeError):
        return None
