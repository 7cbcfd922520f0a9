"""tests/checker/prewarm.py: a check starts compiling its step's and the later
steps' kernels in the background, once per MAX cache, and never in the suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.checker import prewarm


@pytest.fixture
def stamps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Stamps and lock in a scratch folder; the processes it would start, recorded."""
    monkeypatch.setattr(prewarm, "STAMPS", tmp_path / "stamps.json")
    monkeypatch.setattr(prewarm, "LOCK", tmp_path / "lock")
    started: list[list[str]] = []
    monkeypatch.setattr(prewarm.subprocess, "Popen", lambda command, **_: started.append(command))
    monkeypatch.setenv("CHECK_PREWARM", "1")
    monkeypatch.delenv("CHECK_PLAIN", raising=False)
    return started


def test_a_check_warms_its_step_and_every_later_one(stamps: list[list[str]]) -> None:
    later = [str(n) for n in prewarm.steps.numbers() if n >= 3]
    assert prewarm.start(3)
    assert stamps[-1][stamps[-1].index("tests.checker.prewarm") + 1 :] == later


def test_warm_steps_are_not_warmed_again(stamps: list[list[str]]) -> None:
    numbers = prewarm.steps.numbers()
    prewarm.mark_warmed(3)
    prewarm.mark_warmed(5)
    assert prewarm.start(3) and "3" not in stamps[-1] and "5" not in stamps[-1]
    assert "4" in stamps[-1]
    for number in numbers:
        prewarm.mark_warmed(number)
    assert not prewarm.start(3)


def test_the_last_step_warms_only_itself(stamps: list[list[str]]) -> None:
    last = max(prewarm.steps.numbers())
    assert prewarm.start(last) and stamps[-1][-1] == str(last)


def test_off_in_the_suite_and_for_the_book(
    stamps: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHECK_PREWARM", "0")
    assert not prewarm.start(3)
    monkeypatch.setenv("CHECK_PREWARM", "1")
    monkeypatch.setenv("CHECK_PLAIN", "1")
    assert not prewarm.start(3) and not stamps


def test_stamps_belong_to_one_cache(stamps: list[list[str]], monkeypatch) -> None:
    prewarm.mark_warmed(5)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere/else")
    assert prewarm.warmed() == set()


def test_warming_checks_the_solution_and_stamps_it(stamps: list[list[str]], monkeypatch) -> None:
    monkeypatch.setattr(prewarm.os, "nice", lambda increment: 0)
    prewarm.warm([1])  # a dataclass: no kernel to compile, so quick either way
    assert prewarm.warmed() == {1}
