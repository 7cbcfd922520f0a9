"""common.max_runtime.import_mojo_extensions: processes that start together
take turns at MAX's first import, which builds a Mojo extension in place."""

from __future__ import annotations

import fcntl
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from common import max_runtime
from common.steps import REPO

IMPORT = "from common import max_runtime; max_runtime.import_mojo_extensions(); print('imported')"


def test_every_extension_named_is_in_this_max() -> None:
    # Named but missing (a MAX that renamed it), the guard would guard nothing.
    for name in max_runtime.MOJO_EXTENSIONS:
        assert importlib.util.find_spec(name.rpartition(".")[0]) is not None, name


def test_a_process_waits_while_another_holds_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    env = max_runtime.child_env(TMPDIR=str(tmp_path))
    with open(max_runtime.mojo_extensions_lock(), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        child = subprocess.Popen(
            [sys.executable, "-c", IMPORT], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
        )
        time.sleep(3)
        waited = child.poll() is None
    try:
        out, _ = child.communicate(timeout=120)
    finally:
        child.kill()
    assert waited, "the second process imported MAX while the lock was held"
    assert child.returncode == 0 and out.strip() == "imported"
