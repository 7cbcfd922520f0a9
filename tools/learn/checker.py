"""The checker (tests/checker), loaded when a command first needs it.

The checker needs NumPy and MAX; `doctor` must run without them, so nothing
imports it before a command asks. Every learner command reaches the checker
through its interface only: what tests/checker/__init__.py exports.
"""

from __future__ import annotations

from types import ModuleType

from common.cli import Failure
from common.steps import learn_command


def checker() -> ModuleType:
    """tests.checker: check a step, recall its last result, find placeholders."""
    try:
        import tests.checker as interface
    except ImportError as error:
        raise Failure(
            f"cannot load the checker ({error}); {learn_command('doctor')} says what is missing."
        ) from None
    return interface
