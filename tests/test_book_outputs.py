"""The checker output shown in the book is what the checker prints today.

Step pages include docs/src/outputs/step_NN-{skeleton,solution}.txt, which
devtools/book_outputs.py generates by running the checker. These tests generate
them afresh and fail, naming the command to run, when a committed file is stale.
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys

import pytest

from common import max_runtime, steps
from common.steps import REPO
from devtools import book_outputs
from tests import checker
from tests.test_book import FENCE, INCLUDE, include_target

REGENERATE = f"run `{book_outputs.COMMAND}` and commit docs/src/outputs/"
TIMING = re.compile(r"\(\d+\.\d s\)")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The outputs as generated now: one process runs the checker for every step."""
    dest = tmp_path_factory.mktemp("outputs")
    result = subprocess.run(
        [sys.executable, "-m", "devtools.book_outputs", "--dest", str(dest)],
        cwd=REPO,
        env=max_runtime.child_env(CHECK_PLAIN="1"),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=600,
    )
    assert result.returncode == 0, f"{book_outputs.COMMAND} failed:\n{result.stdout}{result.stderr}"
    return {path.name: path.read_text(encoding="utf-8") for path in dest.iterdir()}


def test_every_book_step_has_both_outputs(fresh: dict[str, str]) -> None:
    numbers = steps.numbers()
    expected = {book_outputs.file_name(n, kind) for n in numbers for kind in book_outputs.KINDS}
    assert set(fresh) == expected | {"example-mistake.txt"}


def test_introduction_shows_a_real_mistake(fresh: dict[str, str]) -> None:
    """The introduction's failing example is the checker's output on a mutant
    from tests/mistakes.py, so it names the mistake as the checker really does."""
    example = fresh["example-mistake.txt"]
    assert "(steps/step_02.py)" in example.splitlines()[0]
    assert "❌" in example and "Hint: The mask is inverted" in example
    introduction = (book_outputs.PAGES / "introduction.md").read_text(encoding="utf-8")
    assert "{{#include outputs/example-mistake.txt}}" in introduction


def test_committed_outputs_are_up_to_date(fresh: dict[str, str]) -> None:
    folder = book_outputs.OUTPUTS
    committed = {
        path.name: path.read_text(encoding="utf-8")
        for path in folder.glob("*.txt")
        if book_outputs.OUTPUT_FILE.fullmatch(path.name)
    }
    missing = sorted(set(fresh) - set(committed))
    extra = sorted(set(committed) - set(fresh))
    stale = sorted(name for name in set(fresh) & set(committed) if fresh[name] != committed[name])
    problems = [f"missing: {name}" for name in missing]
    problems += [f"no step page uses it any more: {name}" for name in extra]
    problems += [f"stale: {name}" for name in stale]
    if stale:
        name = stale[0]
        diff = difflib.unified_diff(
            committed[name].splitlines(),
            fresh[name].splitlines(),
            f"committed/{name}",
            f"checker now/{name}",
            lineterm="",
        )
        problems.append("\n".join(list(diff)[:40]))
    assert not problems, (
        "docs/src/outputs/ differs from what the checker prints: "
        f"{REGENERATE}.\n" + "\n".join(problems)
    )


def test_outputs_are_plain(fresh: dict[str, str]) -> None:
    for name, text in fresh.items():
        assert "\033[" not in text, f"{name} has colour codes: CHECK_PLAIN=1 must turn them off"
        assert not TIMING.search(text), f"{name} has a timing: CHECK_PLAIN=1 must leave it out"
        assert "MAX has not compiled its kernels" not in text, f"{name} has the cold-cache notice"
        assert text.endswith("\n") and text.strip(), f"{name} is empty or unterminated"


def test_skeleton_fails_and_solution_passes(fresh: dict[str, str]) -> None:
    for number in steps.numbers():
        skeleton = fresh[book_outputs.file_name(number, "skeleton")]
        solution = fresh[book_outputs.file_name(number, "solution")]
        record = steps.step(number)  # a Mojo step's files end in .mojo
        assert f"({record.skeleton.relative_to(steps.REPO)})" in skeleton.splitlines()[0]
        assert "❌ no placeholders left" in skeleton
        assert f"({record.solution.relative_to(steps.REPO)})" in solution.splitlines()[0]
        assert f"Step {number:02d} passes:" in solution and "❌" not in solution


@pytest.mark.parametrize("number", steps.numbers(), ids=lambda n: f"step_{n:02d}")
def test_step_page_shows_both_outputs(number: int) -> None:
    page = book_outputs.PAGES / f"step_{number:02d}.md"
    text = page.read_text(encoding="utf-8")
    assert "## What the check prints" in text, f"{page.name} lacks 'What the check prints'"
    included = {
        include_target(page, directive)
        for language, body in FENCE.findall(text)
        if language == "text"
        for directive in INCLUDE.findall(body)
    }
    for kind in book_outputs.KINDS:
        target = (book_outputs.OUTPUTS / book_outputs.file_name(number, kind)).resolve()
        assert target in included, (
            f"{page.name} must include outputs/{target.name} in a ```text fence"
        )


def test_check_plain_switch(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """CHECK_PLAIN=1 drops the timing the summary line otherwise ends with."""
    skeleton = steps.step(1).skeleton  # fails before MAX runs: instant
    monkeypatch.delenv("CHECK_PLAIN", raising=False)
    checker.check_step(1, skeleton)
    assert TIMING.search(capsys.readouterr().out)
    monkeypatch.setenv("CHECK_PLAIN", "1")
    checker.check_step(1, skeleton)
    assert not TIMING.search(capsys.readouterr().out)
