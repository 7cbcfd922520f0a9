"""`doctor`: is this machine ready for the tutorial? And `warm`, which
compiles MAX's kernels up front instead of as the checks first need them.

Nothing here imports NumPy or MAX: doctor must say they are missing, not crash.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from common import max_runtime
from common.cli import Failure
from common.steps import REPO, learn_command

from .skeletons import tracks_steps


@dataclass(frozen=True)
class Finding:
    level: str  # "ok", "note" or "problem"
    text: str
    fix: str = ""


FINDING_ICONS = {"ok": "✅", "note": "⚠️ ", "problem": "❌"}


# -- Python and packages ---------------------------------------------------------


def python_finding() -> Finding:
    version = ".".join(map(str, sys.version_info[:3]))
    where = f"Python {version} ({sys.executable})"
    if sys.version_info < (3, 11):  # noqa: UP036 (doctor must explain, not crash)
        return Finding(
            "problem",
            f"{where}: MAX needs Python 3.11 or newer.",
            "Use Python 3.13: `pixi run` brings it, or `python3.13 -m venv .venv`.",
        )
    if sys.version_info < (3, 13):
        return Finding(
            "note",
            f"{where}: the tutorial is made for 3.13, but 3.11 and 3.12 work too: "
            "common/max_runtime.py installs its own Ctrl-C handler, which spares MAX's eager "
            "tensors a slowdown asyncio causes there.",
        )
    if sys.version_info >= (3, 14):
        return Finding(
            "note", f"{where}: newer than the tutorial supports (3.11 to 3.13).", "Use 3.13."
        )
    return Finding("ok", where)


def pinned(package: str) -> str | None:
    """The version pyproject.toml pins `package` to (`name==X`), if any."""
    try:
        import tomllib  # Python 3.11+

        with open(REPO / "pyproject.toml", "rb") as file:
            dependencies = tomllib.load(file)["project"]["dependencies"]
    except (ImportError, OSError, KeyError, ValueError):  # TOMLDecodeError is a ValueError
        return None
    for requirement in dependencies:
        name, _, version = requirement.partition("==")
        if name.strip() == package and version:
            return version.strip()
    return None


def installed(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_finding(package: str, label: str) -> Finding:
    version, pin = installed(package), pinned(package)
    install = "Install the tutorial's dependencies: `pixi install` (pip: `pip install -e .`)."
    if version is None:
        return Finding("problem", f"{label} is not installed in this Python.", install)
    if pin and version != pin:
        return Finding("note", f"{label} {version}: the tutorial pins {pin}.", install)
    return Finding("ok", f"{label} {version}")


def kernel_cache_finding() -> Finding:
    if installed("max") is None:
        return Finding("note", "MAX kernel cache: unknown until MAX is installed.")
    if max_runtime.kernel_cache_is_warm():
        return Finding(
            "ok", "MAX kernel cache: warmed up (every kernel compiled; checks take seconds)"
        )
    # Not a problem: each kernel compiles the first time a check needs it, and
    # that check says so while it waits; later checks reuse it.
    return Finding(
        "note",
        "MAX kernel cache: not warmed up. A check that meets a kind of operation for the "
        "first time compiles its kernel (tens of seconds, once) and says so.",
        "To compile them all up front: `pixi run warm` (pip: `max warm-interpreter-cache`), "
        "a few minutes, fewer with more cores.",
    )


def torch_finding() -> Finding:
    if importlib.util.find_spec("torch") is None:
        return Finding("ok", "torch not installed: fine, only the maintainers' tests need it")
    return Finding("ok", f"torch {installed('torch')} (only the maintainers' tests need it)")


# -- the machine and the checkout ------------------------------------------------


def cpu_count() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def memory_gib() -> tuple[float | None, float | None]:
    """Total and available memory in GiB (available: Linux only)."""
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        kib = {key: int(value.split()[0]) for key, value in fields.items() if value.split()}
        return kib["MemTotal"] / 2**20, kib.get("MemAvailable", 0) / 2**20 or None
    except (OSError, ValueError, KeyError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, None
    except (OSError, ValueError, AttributeError):
        return None, None


def machine_finding() -> Finding:
    cores = cpu_count()
    total, available = memory_gib()
    memory = "memory unknown" if total is None else f"{total:.1f} GiB memory"
    if available is not None:
        memory += f" ({available:.1f} GiB available)"
    text = f"{cores} CPU core{'s' if cores != 1 else ''}, {memory}"
    if cores < 2 or (total is not None and total < 4):
        return Finding("note", text + ": compiling MAX's kernels will be slow.")
    return Finding("ok", text)


def git_finding() -> Finding:
    if tracks_steps():
        return Finding("ok", "git checkout: `reset` can restore the skeletons")
    return Finding(
        "note",
        "not a git checkout: `reset` cannot restore a skeleton, and `status` guesses "
        "'not started' from the placeholders.",
        "Clone the tutorial with git to get both.",
    )


# -- the commands ----------------------------------------------------------------


def cmd_doctor(args: argparse.Namespace) -> int:
    findings = [
        python_finding(),
        package_finding("max", "MAX"),
        package_finding("numpy", "NumPy"),
        kernel_cache_finding(),
        machine_finding(),
        torch_finding(),
        git_finding(),
    ]
    for finding in findings:
        print(f"{FINDING_ICONS[finding.level]} {finding.text}")
        if finding.level == "note" and finding.fix:
            print(f"   {finding.fix}")
    problems = [f for f in findings if f.level == "problem"]
    if not problems:
        print(f"\nNo problems found. Start with {learn_command('next')}.")
        return 0
    print(f"\n{len(problems)} problem{'s' if len(problems) > 1 else ''} to fix:")
    for problem in problems:
        print(f"- {problem.text} {problem.fix}")
    return 1


def max_command() -> str:
    """The `max` script of the MAX installed next to this Python."""
    beside = Path(sys.executable).parent / "max"
    if beside.is_file():
        return str(beside)
    found = shutil.which("max")
    if found is None:
        raise Failure(
            "MAX's `max` command is not installed: `pixi install` (pip: `pip install -e .`)."
        )
    return found


def cmd_warm(args: argparse.Namespace) -> int:
    command = [max_command(), "warm-interpreter-cache"]
    env = max_runtime.child_env()
    if subprocess.run([*command, "--check"], capture_output=True, env=env).returncode == 0:
        print("MAX's kernel cache is already warm: nothing to do.")
        return 0
    if args.check:
        print(
            "MAX's kernels are not warmed up: "
            f"{learn_command('warm')} compiles them all (a few minutes)."
        )
        return 1
    print(
        "Compiling MAX's kernels once (`max warm-interpreter-cache`), so that later checks "
        "take seconds.\nThis takes a few minutes, fewer with more cores; Ctrl-C stops it.",
        flush=True,
    )
    if subprocess.run(command, env=env).returncode != 0:
        raise Failure("`max warm-interpreter-cache` failed (its output is above).")
    print("Done: MAX's kernel cache is warm.")
    return 0
