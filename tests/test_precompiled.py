"""common.max_runtime.precompiled: a Mojo source package is built once for
each content of its sources, not on every graph that names it."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from common import max_runtime

SOURCE = "def answer() -> Int:\n    return {}\n"


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A one-function Mojo package, built into a temporary folder of its own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "__init__.mojo").write_text("")
    (folder / "tiny.mojo").write_text(SOURCE.format(42))
    return folder


def counting_builds(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The packages MAX's own build is asked for from now on."""
    import mojo.paths

    built: list[Path] = []
    build = mojo.paths._build_mojo_source_package

    def counted(path: Path) -> Path:
        built.append(path)
        return build(path)

    monkeypatch.setattr(mojo.paths, "_build_mojo_source_package", counted)
    return built


def test_a_package_is_built_once_and_kept(package: Path, monkeypatch) -> None:
    builds = counting_builds(monkeypatch)
    first = max_runtime.precompiled(package)
    assert first.suffix == ".mojoc" and first.stat().st_size > 0
    assert max_runtime.precompiled(package) == first
    assert builds == [package]


def test_an_edited_source_is_built_anew(package: Path, monkeypatch) -> None:
    before = max_runtime.precompiled(package)
    builds = counting_builds(monkeypatch)
    (package / "tiny.mojo").write_text(SOURCE.format(43))
    after = max_runtime.precompiled(package)
    assert after != before and after.is_file() and before.is_file()
    assert builds == [package]


def test_what_is_not_a_source_package_passes_through(tmp_path: Path) -> None:
    built = tmp_path / "kernels.mojoc"
    assert max_runtime.precompiled(built) == built
    assert max_runtime.precompiled(tmp_path) == tmp_path  # no __init__.mojo
