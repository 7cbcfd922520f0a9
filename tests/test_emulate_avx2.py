"""devtools/emulate_avx2.py: the kernels' tests on an emulated CPU without
AVX-512. The emulated run itself takes a quarter of an hour; these test its edges."""

from __future__ import annotations

import pytest

from common.cli import exit_status
from devtools import emulate_avx2


def test_a_missing_emulator_says_how_to_install_it(capsys: pytest.CaptureFixture[str]) -> None:
    status = exit_status(lambda: emulate_avx2.main(["--qemu", "no-such-qemu"]))
    error = capsys.readouterr().err
    assert status == 1
    assert "no-such-qemu not found" in error and "apt-get install qemu-user" in error
    assert "Traceback" not in error


def test_pytest_arguments_pass_through() -> None:
    arguments, pytest_args = emulate_avx2.parse_arguments(["-k", "cached_decode", "-x"])
    assert arguments.qemu == "qemu-x86_64" and pytest_args == ["-k", "cached_decode", "-x"]


def test_the_extensions_to_rebuild_are_max_packages_with_mojo_sources() -> None:
    packages = emulate_avx2.mojo_extension_packages()
    assert packages, "MAX compiles no Mojo on import: the tool has nothing to rebuild"
    for package in packages:
        assert any(package.glob("*.mojo")) and (package / "__init__.py").is_file()


def test_an_emulated_cpu_with_avx512_runs_no_test(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kernels built with 16 lanes or the bfloat16 dot products would run the
    code this machine runs natively: the emulated run refuses them."""
    from fast import kernel_ops

    ran = []
    monkeypatch.setattr(kernel_ops, "kernels_built_for", lambda: (True, 16, False))
    monkeypatch.setattr(pytest, "main", lambda args: ran.append(args) or 0)
    assert emulate_avx2.emulated_main([]) == 1
    assert ran == [] and "not AVX2 without AVX-512" in capsys.readouterr().err


def test_an_avx2_build_runs_the_row_kernels_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    from fast import kernel_ops

    ran = []
    monkeypatch.setattr(kernel_ops, "kernels_built_for", lambda: emulate_avx2.EXPECTED)
    monkeypatch.setattr(pytest, "main", lambda args: ran.append(args) or 0)
    assert emulate_avx2.emulated_main([]) == 0
    assert ran[0][-3:] == ["tests/test_fast.py", "-k", emulate_avx2.DEFAULT_TESTS]
