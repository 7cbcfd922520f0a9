"""Every check carries a hint ladder that answers it, and `tools.learn hint NN`
climbs the ladder of the check that fails now, one rung per ask.

Rungs: what to look at; the API or the shapes; the line. The first two never
give a learner line (tests/test_pages_teach.py says what that is), so a hint
shows a line only once the learner has asked twice for that check.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from common import steps
from tests import test_learn
from tests.checker import Check, load_spec
from tests.test_learn import learn_cli, step
from tests.test_pages_teach import leaks, learner_lines
from tools.learn import hints

STEPS = steps.numbers()
# A committed copy of the tutorial per test, as in tests/test_learn.py.
pristine_repo = test_learn.pristine_repo
repo = test_learn.repo


def ladders(check: Check) -> dict[str, Sequence[str]]:
    if isinstance(check.hints, Mapping):
        return dict(check.hints)
    return {"": check.hints}


@pytest.mark.parametrize("number", STEPS)
def test_every_check_has_a_three_rung_ladder(number: int) -> None:
    for check in load_spec(number).checks:
        found = ladders(check)
        assert found, f"step {number:02d}, check {check.name!r} has no hint ladder"
        if isinstance(check.hints, Mapping):
            assert "" in found, f"step {number:02d}, {check.name!r}: no default ladder ('')"
        for topic, ladder in found.items():
            where = f"step {number:02d}, {check.name!r}, ladder {topic!r}"
            assert len(ladder) == 3, f"{where}: {len(ladder)} rungs, expected 3"
            assert all(isinstance(rung, str) and len(rung) > 20 for rung in ladder), where


@pytest.mark.parametrize("number", STEPS)
def test_no_line_before_the_third_ask(number: int) -> None:
    answers = learner_lines(number)
    for check in load_spec(number).checks:
        for topic, ladder in ladders(check).items():
            found = leaks(answers, "\n".join(ladder[:2]))
            assert not found, f"step {number:02d}, {check.name!r} {topic!r}: {found}"
    tiers = hints.load_hints(number)
    found = leaks(answers, "\n".join(tiers[:2]))
    assert not found, f"step {number:02d}'s own ladder gives lines before rung 3: {found}"


def raw_ladders(number: int) -> dict[str, list[str]]:
    """Every ladder of the step's hints file as written ("@NAME" unresolved)."""
    table = tomllib.loads(steps.step(number).hints.read_text(encoding="utf-8"))
    found = {"[step]": table["step"]["ladder"]}
    for name, topics in table.get("checks", {}).items():
        found.update({f"{name!r} {topic!r}": rungs for topic, rungs in topics.items()})
    return found


@pytest.mark.parametrize("number", STEPS)
def test_each_hint_has_one_source(number: int) -> None:
    """A rung that two ladders show is written once, in [rungs], and named by both;
    every rung written there is shown by some ladder."""
    seen: dict[str, str] = {}
    used = set()
    for where, rungs in raw_ladders(number).items():
        for rung in rungs:
            if rung.startswith("@"):
                used.add(rung[1:])
                continue
            text = " ".join(rung.split())
            assert text not in seen, f"step {number:02d}: {where} repeats {seen[text]}: {rung!r}"
            seen[text] = where
    shared = tomllib.loads(steps.step(number).hints.read_text(encoding="utf-8")).get("rungs", {})
    assert set(shared) <= used, f"step {number:02d}: unused [rungs] {sorted(set(shared) - used)}"


def test_a_hints_file_that_misses_a_check_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.checker import hints as hints_data

    step = load_spec(3)
    renamed = dataclasses.replace(step.checks[0], name="a check without a ladder")
    with pytest.raises(hints_data.HintsError, match="no ladder for the checks"):
        hints_data.with_hints(dataclasses.replace(step, checks=[renamed, *step.checks[1:]]))


def test_a_ladder_is_chosen_by_the_diagnosis() -> None:
    check = Check("c", lambda ctx: None, hints={"scale": ("a" * 21,) * 3, "": ("b" * 21,) * 3})
    assert check.ladder_for("x does not match", "The scores are not scaled")[0] == "scale"
    assert check.ladder_for("x does not match", "The mask is inverted")[0] == ""


def ask(repo: Path, number: int) -> str:
    result = learn_cli(repo, "hint", str(number))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return result.stdout


def test_a_dropped_scale_gets_the_scale_ladder(repo: Path) -> None:
    solution = (repo / "solutions" / "solution_08.py").read_text()
    scale = "scores = scores / math.sqrt(int(head_dim))"
    assert solution.count(scale) == 1
    step(repo, 8).write_text(solution.replace(scale, "scores = scores"))
    answers = learner_lines(8)
    first, second, third = (ask(repo, 8) for _ in range(3))
    assert "not scaled" in first and "Hint 1 of 3 for this check (scale)" in first
    assert "Hint 2 of 3" in second and "Hint 3 of 3" not in second
    assert not leaks(answers, first) and not leaks(answers, second)
    assert "sqrt" in third and leaks(answers, third), third
    counts = json.loads((repo / ".learn_state.json").read_text())["check_hints"]["08"]
    assert list(counts.values()) == [3]


def test_an_unchanged_file_is_not_checked_again(repo: Path) -> None:
    """The second ask answers from the stored result of the first."""
    ask(repo, 8)
    stored = json.loads((repo / ".check_results.json").read_text())
    assert stored["08 steps/step_08.py"]["outcomes"][0]["name"] == "no placeholders left"
    stored["08 steps/step_08.py"]["outcomes"][0]["message"] = "a stored result"
    (repo / ".check_results.json").write_text(json.dumps(stored))
    assert "a stored result" in ask(repo, 8)
    step(repo, 8).write_text(step(repo, 8).read_text() + "\n")  # changed: checked again
    assert "a stored result" not in ask(repo, 8)
