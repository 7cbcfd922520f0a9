"""The code is ruff-clean and ruff-formatted (configuration in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

from common.steps import REPO

RUFF = Path(sys.executable).parent / "ruff"


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(RUFF), *args], cwd=REPO, capture_output=True, text=True)


def test_ruff_check() -> None:
    result = ruff("check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format() -> None:
    result = ruff("format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr
