"""A step's hints, kept as data beside its checks: tests/specs/step_NN/hints.toml.

One file holds every rung `python -m tools.learn hint NN` can show: the step's
own ladder ([step]), for when no check has run yet, and each check's ladders
([checks."NAME"]), keyed by a word looked for in the failure's message and
hint ("" for any other failure). A rung written "@NAME" is the rung
[rungs].NAME, shared by several ladders, so that each hint has one source.
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
from typing import Any

from common import steps


class HintsError(Exception):
    """A hints file that does not fit its step's checks (a maintainer's mistake)."""


@functools.cache
def load_hints(number: int) -> dict[str, Any]:
    """{"step": [rungs], "checks": {check name: {topic: [rungs]}}}, "@NAME" resolved."""
    path = steps.step(number).hints
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise HintsError(f"{steps.display_path(path)}: {error}") from None
    shared = table.get("rungs", {})

    def ladder(rungs: list[str], where: str) -> list[str]:
        for rung in rungs:
            if rung.startswith("@") and rung[1:] not in shared:
                raise HintsError(f"{steps.display_path(path)}, {where}: no [rungs].{rung[1:]}")
        return [shared[rung[1:]] if rung.startswith("@") else rung for rung in rungs]

    checks = {
        name: {topic: ladder(rungs, f"{name!r} {topic!r}") for topic, rungs in topics.items()}
        for name, topics in table.get("checks", {}).items()
    }
    return {"step": ladder(table.get("step", {}).get("ladder", []), "[step]"), "checks": checks}


def step_ladder(number: int) -> list[str]:
    """The step's own ladder: what to look at; the API or the shapes; the lines."""
    return load_hints(number)["step"]


def with_hints(step: Any) -> Any:
    """The spec's Step with each Check's ladders from its hints file."""
    ladders = load_hints(step.number)["checks"]
    names = [check.name for check in step.checks]
    unknown = sorted(set(ladders) - set(names))
    missing = [name for name in names if name not in ladders]
    if unknown or missing:
        raise HintsError(
            f"{steps.display_path(steps.step(step.number).hints)}: "
            + "; ".join(
                part
                for part in (
                    f"no ladder for the checks {missing}" if missing else "",
                    f"ladders for checks the step does not have: {unknown}" if unknown else "",
                )
                if part
            )
        )
    checks = [dataclasses.replace(check, hints=ladders[check.name]) for check in step.checks]
    return dataclasses.replace(step, checks=checks)
