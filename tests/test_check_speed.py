"""devtools/check_speed.py: the learner's wait, measured step by step."""

from __future__ import annotations

import pytest

from devtools import check_speed


def test_the_machine_is_named() -> None:
    assert "cores" in check_speed.machine()


def test_an_unknown_step_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert check_speed.main(["--steps", "99", "--repeats", "0"]) == 2
    assert "unknown step" in capsys.readouterr().err


def test_a_first_check_is_timed_with_the_kernels_it_compiled() -> None:
    """Step 01 checks a dataclass: it passes and compiles no MAX kernel."""
    [(number, seconds, passed, compiled)] = check_speed.first_checks([1], reading=0)
    assert (number, passed, dict(compiled)) == (1, True, {}) and seconds > 0
