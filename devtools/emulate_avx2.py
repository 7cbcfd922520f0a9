"""`python -m devtools.emulate_avx2`: our kernels' tests as a CPU without
AVX-512 runs them, on a machine that has it.

The kernels take their vector width (`WIDTH`) and their bfloat16 path
(`HAS_BF16_DOT`) from the CPU MAX builds them for: an x86-64 CPU with AVX2
and no AVX-512 gets 8 float32 lanes a vector and widens bfloat16 weights to
float32. When no such CPU is at hand, QEMU's user mode runs this machine's
Python on an emulated one, a Haswell (AVX2 and FMA, no AVX-512), and MAX,
asking that CPU what it is, builds the kernels for it. (QEMU's own `-cpu max`
emulates AVX2 too, but the compiler knows a CPU by its family and model, and
builds for a generic x86-64 there: 4 float32 lanes.) Two things must not come
from this machine's own builds:

- MAX's caches of compiled code: the run gets an empty MODULAR_CACHE_DIR;
- the Mojo extensions MAX compiles when it is imported (`max._kv_cache_ops`):
  Mojo builds them in a process of its own, outside the emulator, for this
  CPU. They are built here for a Haswell (AVX2, no AVX-512) into a copy of
  their packages, in a folder the emulated Python finds first on its path
  (`max` is a namespace package: each folder on the path may add to it).

The emulated run first asks the kernels what they were built with (it fails
unless 8 lanes and no bfloat16 dot products), then runs pytest on
tests/test_fast.py: the row kernels' tests by default, or what `pytest_args`
selects. Emulation is slow (10-30x): the default takes about 15 minutes.

    python -m devtools.emulate_avx2                          the row kernels
    python -m devtools.emulate_avx2 -k cached_decode         other tests of test_fast.py
    python -m devtools.emulate_avx2 -k "(cached_decode and kernels) or bfloat16_logits"
                                     the model against the tutorial's (about an hour)

Only tests that stay in this Python are emulated (a process a test starts
runs natively), and one that reads /proc/cpuinfo reads this machine's.

Needs QEMU's user mode (Debian and Ubuntu: `apt-get install qemu-user`) on
x86-64 Linux.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import max_runtime
from common.cli import ArgumentParser, Failure, exit_status
from common.steps import REPO

EMULATED_CPU = "Haswell-v4"  # QEMU's Haswell: AVX2 and FMA, no AVX-512 (nor TSX)
EXTENSION_CPU = "haswell"  # the Mojo extensions' target: AVX2 and FMA, no AVX-512
DEFAULT_TESTS = "row_kernel or few_rows"
EXPECTED = (False, 8, False)  # (bfloat16 dot products, float32 lanes a vector, AMX)

BOOT = "import sys; from devtools.emulate_avx2 import emulated_main; sys.exit(emulated_main(sys.argv[1:]))"


def parse_arguments(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    parser = ArgumentParser(
        prog="python -m devtools.emulate_avx2",
        description="Run tests/test_fast.py's kernel tests on an emulated CPU without AVX-512.",
        epilog="Other arguments go to pytest, e.g. `-k cached_decode` (default: "
        f"`-k '{DEFAULT_TESTS}'`).",
    )
    parser.add_argument("--qemu", default="qemu-x86_64", help="QEMU's user-mode x86-64 emulator")
    return parser.parse_known_args(argv)


def find_emulator(name: str) -> str:
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        raise Failure(f"this emulates an x86-64 CPU on x86-64 Linux, not {platform.machine()}")
    emulator = shutil.which(name)
    if emulator is None:
        raise Failure(
            f"{name} not found: install QEMU's user mode (`apt-get install qemu-user`) "
            "or give its path with --qemu"
        )
    return emulator


def mojo_extension_packages() -> list[Path]:
    """MAX's packages that Mojo compiles on import: those holding a .mojo file."""
    import max

    packages = set()
    for root in map(Path, max.__path__):
        found = {source.parent for source in root.rglob("*.mojo")}
        nested = [package for package in found if package.parent != root]
        if nested:
            raise Failure(f"{nested[0]} is not a package of max itself: no copy can stand first")
        packages |= found
    return sorted(packages)


def extensions_for(cpu: str, overlay: Path) -> None:
    """Copies each of MAX's Mojo extension packages into `overlay`/max and
    builds it there for `cpu`: imported once natively with `overlay` first on
    the path, which names and places the compiled file as Mojo's importer
    expects, then rebuilt for `cpu` in its place."""
    from mojo.run import subprocess_run_mojo

    for package in mojo_extension_packages():
        copy = overlay / "max" / package.name
        shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__mojocache__"))
        command = [sys.executable, "-c", f"import max.{package.name}"]
        run(command, f"importing max.{package.name}", first_on_path(overlay))
        for built in (copy / "__mojocache__").glob("*.so"):
            source = copy / f"{built.name.split('.')[0]}.mojo"
            arguments = ["build", str(source), "--emit", "shared-lib", "--target-cpu", cpu]
            result = subprocess_run_mojo([*arguments, "-o", str(built)], capture_output=True)
            if result.returncode != 0:
                error = result.stderr.decode(errors="replace")[-800:]
                raise Failure(f"building {source.name} for {cpu} failed: {error}")


def first_on_path(folder: Path, **extra: str) -> dict[str, str]:
    """A child's environment with `folder` first on its Python path."""
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return max_runtime.child_env(PYTHONPATH=path, **extra)


def run(command: list[str], what: str, env: dict[str, str]) -> None:
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True)
    if result.returncode != 0:
        raise Failure(f"{what} failed: {result.stderr.decode(errors='replace')[-800:]}")


def emulated_main(pytest_args: list[str]) -> int:
    """In the emulated Python: check what the kernels were built with, then pytest."""
    max_runtime.prepare()
    import pytest

    from fast.kernel_ops import kernels_built_for

    bf16_dot, width, amx = kernels_built_for()
    print(
        f"kernels built with bfloat16 dot products: {bf16_dot}, float32 lanes: {width}, AMX: {amx}",
        flush=True,
    )
    if (bf16_dot, width, amx) != EXPECTED:
        print("error: the emulated CPU is not AVX2 without AVX-512", file=sys.stderr)
        return 1
    selection = pytest_args or ["-k", DEFAULT_TESTS]
    return pytest.main(["-q", "-p", "no:cacheprovider", "tests/test_fast.py", *selection])


def main(argv: list[str] | None = None) -> int:
    arguments, pytest_args = parse_arguments(argv)
    emulator = find_emulator(arguments.qemu)
    with tempfile.TemporaryDirectory(prefix="emulate_avx2-") as scratch:
        overlay = Path(scratch) / "overlay"
        print(f"Building MAX's Mojo extensions for {EXTENSION_CPU} ...", flush=True)
        extensions_for(EXTENSION_CPU, overlay)
        print(f"Running tests on QEMU's `-cpu {EMULATED_CPU}` (slow) ...", flush=True)
        env = first_on_path(overlay, MODULAR_CACHE_DIR=str(Path(scratch) / "cache"))
        command = [emulator, "-cpu", EMULATED_CPU, sys.executable, "-c", BOOT]
        # QEMU warns of CPU features its emulator lacks on every start: not ours to show.
        result = subprocess.run([*command, *pytest_args], cwd=REPO, env=env, stderr=subprocess.PIPE)
        for line in result.stderr.decode(errors="replace").splitlines():
            if "TCG doesn't support" not in line:
                print(line, file=sys.stderr)
        return result.returncode


if __name__ == "__main__":
    sys.exit(exit_status(main))
