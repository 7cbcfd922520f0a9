"""Plausible learner mistakes, written as edits of the reference solutions.

Each mutant replaces text that must occur exactly once in the solution (so a
mutant cannot silently stop applying when a solution is edited) and names a
phrase the checker's message or hint must contain: the checker has to catch
the mistake *and* say what it is.
"""

from dataclasses import dataclass

from common import steps


@dataclass(frozen=True)
class Mutant:
    name: str
    edits: tuple[tuple[str, str], ...]  # (old, new), applied in order
    expect: str  # a phrase the failing check's message or hint contains


def apply(mutant: Mutant, source: str) -> str:
    """The solution's source with the mutant's edits made."""
    for old, new in mutant.edits:
        if source.count(old) != 1:
            raise ValueError(f"mutant {mutant.name!r}: {old!r} must occur exactly once")
        source = source.replace(old, new)
    return source


def m(name: str, old: str, new: str, expect: str) -> Mutant:
    return Mutant(name, ((old, new),), expect)


def mistakes(number: int) -> list[Mutant]:
    """Step `number`'s hand-written mistakes: the MISTAKES list beside its checks,
    in tests/specs/step_NN/mistakes.py."""
    import importlib

    return list(importlib.import_module(steps.step(number).mistakes_module).MISTAKES)
