"""devtools/check_speed.py: the learner's wait, measured step by step."""

from __future__ import annotations

import os

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


def test_the_tables_are_written_for_the_book(tmp_path) -> None:
    out = tmp_path / "check_speed.md"
    before = os.environ.get("XDG_CACHE_HOME")
    assert check_speed.main(["--steps", "01", "--repeats", "0", "--out", str(out)]) == 0
    written = out.read_text()
    assert written.startswith(f"Measured on {check_speed.machine()} with `python -m devtools")
    assert "\n| 01 | " in written and "| yes | none |" in written
    assert os.environ.get("XDG_CACHE_HOME") == before  # MAX's cache is the caller's again


def test_the_check_all_table_gives_both_ways() -> None:
    table = check_speed.check_all_table({"--rerun": [10.0, 12.0, 11.0], "unchanged": [0.5]})
    assert "| every check run (`--rerun`) | 11.0 | 10.0-12.0 | 3 |" in table
    assert "| every step unchanged since it passed | 0.5 | 0.5-0.5 | 1 |" in table
