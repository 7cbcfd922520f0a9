"""The book's "Try it" experiments (steps/try_it/) run, print something, and
are shown in the book through an include, never pasted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from common import max_runtime, steps
from common.steps import REPO

EXPERIMENTS = [script for record in steps.STEPS for script in record.try_it]


def test_there_are_experiments() -> None:
    assert EXPERIMENTS


@pytest.mark.parametrize("script", EXPERIMENTS, ids=lambda path: path.stem)
def test_experiment_runs_and_prints(script: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", f"steps.try_it.{script.stem}"],
        cwd=REPO,
        env=max_runtime.child_env(NO_COLOR="1"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stdout.strip().splitlines()) >= 3, result.stdout


@pytest.mark.parametrize("script", EXPERIMENTS, ids=lambda path: path.stem)
def test_experiment_is_in_its_page(script: Path) -> None:
    page = steps.step(int(script.stem.split("_")[1])).page.read_text(encoding="utf-8")
    assert f"{{{{#include ../../steps/try_it/{script.name}}}}}" in page
