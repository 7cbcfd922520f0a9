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


def test_the_import_leaves_the_c_environment_as_it_found_it() -> None:
    # MAX's runtime setenv()s PYTHONEXECUTABLE as it starts; left set, pytest's
    # workers (started with the C environment after conftest's import) ran the
    # interpreter found on PATH, and the tools they started could not import numpy.
    code = (
        "import ctypes; libc = ctypes.CDLL(None); libc.getenv.restype = ctypes.c_char_p; "
        + IMPORT.replace("print('imported')", "")
        + "print([libc.getenv(key.encode()) for key in max_runtime.RUNTIME_SETS])"
    )
    env = {k: v for k, v in max_runtime.child_env().items() if k not in max_runtime.RUNTIME_SETS}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[None, None]", out.stdout
