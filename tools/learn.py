"""Your way through the tutorial: progress, the next step, hints, a file watcher.

    python -m tools.learn status        every step: not started, in progress or done
    python -m tools.learn next          check the first step that does not pass yet
    python -m tools.learn watch [NN]    re-check a step each time you save its file
    python -m tools.learn hint NN       one more hint for a step (--solution: the answer)
    python -m tools.learn reset NN      back to the skeleton (your file is saved first)
    python -m tools.learn doctor        is this machine ready for the tutorial?
    python -m tools.learn warm          compile MAX's kernels once (about 5 minutes)

Exit status: 0 ok, 1 a check fails (or doctor found a problem), 2 usage error.

Where the untouched skeleton of a step comes from: git. No copy is stored next
to the steps (it could drift from them); the skeleton is the file as committed.
Not necessarily at HEAD: a learner who commits their work moves HEAD, so we walk
back through the file's history to the newest version that still looks like a
skeleton (every TODO block holds a `None` placeholder, which
tests/test_skeletons.py guarantees of the real ones). Without git (a zip
download), "not started" falls back to that same test on the file itself, and
`reset` says that it needs a git checkout.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import importlib.metadata
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

from common import max_runtime, steps
from common.cli import ArgumentParser, Failure, UsageError, exit_status
from common.steps import REPO

if TYPE_CHECKING:
    from tests.checker.source import Placeholder

STATE_FILE = REPO / ".learn_state.json"
BACKUPS = REPO / ".backups"
HISTORY_DEPTH = 50  # commits of a step file searched for its skeleton
PROG = "python -m tools.learn"

NOT_STARTED, IN_PROGRESS, DONE, MISSING = "not started", "in progress", "done", "missing"
STATE_ICONS = {NOT_STARTED: "⬜", IN_PROGRESS: "🚧", DONE: "✅", MISSING: "❓"}
CLEAR_SCREEN = "\033[2J\033[3J\033[H"

T = TypeVar("T")


# -- the checker, imported on demand (doctor must run without NumPy) ---------


def checker() -> ModuleType:
    """tests.check: the checker's command line, whose helpers we reuse."""
    try:
        import tests.check as check
    except ImportError as error:
        raise Failure(
            f"cannot load the checker ({error}); {learn_command('doctor')} says what is missing."
        ) from None
    return check


def source() -> ModuleType:
    """tests.checker.source: TODO blocks and placeholders."""
    checker()
    import tests.checker.source as source

    return source


def parse_step(text: str) -> int:
    try:
        return steps.parse_step(text)
    except ValueError as error:
        raise UsageError(f"{error}.") from None


def step_path(number: int) -> Path:
    return steps.step(number).skeleton


def rel(path: Path) -> str:
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def read_source(path: Path) -> str:
    """The file's text with newlines normalized (undecodable bytes replaced)."""
    return path.read_bytes().decode("utf-8", errors="replace").replace("\r\n", "\n")


def step_command(number: int) -> str:
    return f"`pixi run s{number:02d}` (pip: `python -m tests.check {number:02d}`)"


def learn_command(*words: str) -> str:
    """One of this tool's commands, as pixi users and pip users type it."""
    said = " ".join(words)
    return f"`pixi run {said}` (pip: `{PROG} {said}`)"


# -- skeletons: placeholders and the committed original ----------------------


def blanks_in_file(path: Path) -> list[Placeholder] | None:
    """The file's placeholders, or None when it does not parse."""
    static = source()
    try:
        tree = static.parse(path)
    except static.LearnerSyntaxError:
        return None
    return static.placeholders(path, tree)


def every_block_blank(path: Path) -> bool:
    """Whether every TODO block still holds a placeholder: true of every skeleton."""
    blanks = blanks_in_file(path)
    regions = source().todo_regions(read_source(path))
    if not blanks or not regions:
        return False
    return {start for start, _, _ in regions} <= {blank.todo_line for blank in blanks}


def looks_like_skeleton(text: str) -> bool:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "step.py"
        path.write_text(text, encoding="utf-8")
        return every_block_blank(path)


def git(*args: str) -> str | None:
    """Run a read-only git command in the repository; None if it fails."""
    try:
        result = subprocess.run(
            ["git", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=max_runtime.child_env(GIT_OPTIONAL_LOCKS="0"),
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def pristine_skeleton(number: int) -> str | None:
    """The newest committed version of the step file that is still a skeleton."""
    relative = rel(step_path(number))
    commits = git("rev-list", f"--max-count={HISTORY_DEPTH}", "HEAD", "--", relative)
    for commit in (commits or "").split():
        text = git("show", f"{commit}:./{relative}")
        if text is not None and looks_like_skeleton(text):
            return text.replace("\r\n", "\n")
    return None


def tracks_steps() -> bool:
    """Whether git knows the step files (a git checkout of the tutorial)."""
    return bool((git("ls-files", "--", "steps") or "").strip())


def untouched(number: int) -> bool:
    """Whether the step file is its skeleton (without git: no TODO block finished)."""
    skeleton = pristine_skeleton(number)
    if skeleton is not None:
        return read_source(step_path(number)) == skeleton
    return every_block_blank(step_path(number))


# -- running checks in this process ------------------------------------------


@functools.cache
def prepare_max() -> None:
    """Before the first in-process check: MAX's set-up and the cold-cache note."""
    transient()
    max_runtime.prepare()
    checker().warn_if_cold()


class _Capture(io.StringIO):
    """Captured stdout that still answers isatty() like the real one (colour)."""

    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def captured(run: Callable[[], T]) -> tuple[T, str]:
    buffer = _Capture(sys.stdout.isatty())
    with contextlib.redirect_stdout(buffer):
        result = run()
    return result, buffer.getvalue()


@functools.cache
def shared_worker():  # -> tests.checker.isolate.CheckProcess
    """One checker worker process for every check this command runs: MAX loads once."""
    worker = checker().CheckProcess(quiet=True)
    atexit.register(worker.stop)
    return worker


def passes(number: int) -> bool:
    """Run the step's check in this process, its output (and the learner's) hidden."""
    prepare_max()
    check = checker()
    path = step_path(number)
    try:
        ok, _ = captured(lambda: check.check_one(number, path, quiet=True, worker=shared_worker()))
    except SystemExit:  # the learner's file called sys.exit()
        return False
    return ok


def step_state(number: int) -> str:
    path = step_path(number)
    if not path.is_file():
        return MISSING
    blanks = blanks_in_file(path)
    if blanks is None:  # a SyntaxError: the check fails at once
        return IN_PROGRESS
    if blanks:  # placeholders left: the check fails at once
        return NOT_STARTED if untouched(number) else IN_PROGRESS
    return DONE if passes(number) else IN_PROGRESS


def transient(message: str = "") -> None:
    """A progress line on a terminal that the next one replaces (nothing otherwise).

    transient() with no message erases it, before printing a line for good.
    """
    if sys.stdout.isatty():
        sys.stdout.write(f"\r\033[K{message}")
        sys.stdout.flush()


def first_unfinished() -> int | None:
    for number in steps.numbers():
        transient(f"checking step {number:02d}…")
        state = step_state(number)
        transient()
        if state != DONE:
            return number
    return None


# -- status ------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    numbers = steps.numbers()
    titles = {n: steps.step(n).title for n in numbers}
    width = max(len(t) for t in titles.values())
    if not tracks_steps():
        print(
            "(Not a git checkout: a step counts as not started while each TODO block has a None.)"
        )
    states: dict[int, str] = {}
    for number in numbers:
        transient(f"checking step {number:02d}…")
        states[number] = step_state(number)
        transient()
        icon = STATE_ICONS[states[number]]
        print(f"{icon} {number:02d}  {titles[number]:<{width}}  {states[number]}", flush=True)
    print_progress(states, titles)
    return 0


def print_progress(states: dict[int, str], titles: dict[int, str]) -> None:
    report = checker().report
    done = sum(state == DONE for state in states.values())
    print(f"\nProgress {report.progress_bar(done, len(states))}")
    todo = [n for n, state in states.items() if state != DONE]
    if not todo:
        print(f"All {len(states)} steps pass: you have built GPT-2 from scratch.")
        return
    number = todo[0]
    if states[number] == MISSING:
        print(
            f"Next: step {number:02d} is missing; {learn_command('reset', f'{number:02d}')} restores it."
        )
        return
    print(f"Next: step {number:02d}, {titles[number]}, in {rel(step_path(number))}.")
    print(f"Check it with {step_command(number)},")
    print(f"or on every save with {learn_command('watch')}.")


# -- next --------------------------------------------------------------------


def cmd_next(args: argparse.Namespace) -> int:
    check = checker()
    report = check.report
    for number in steps.numbers():
        path = step_path(number)
        if not path.is_file():
            raise Failure(
                f"{rel(path)} is missing: {learn_command('reset', f'{number:02d}')} restores it."
            )
        prepare_max()
        transient(f"checking step {number:02d}…")
        ok, output = captured(
            lambda n=number, p=path: check.check_one(n, p, worker=shared_worker())
        )
        transient()
        if not ok:
            sys.stdout.write(output)
            return 1
        print(f"{report.ICONS['pass']} step {number:02d} passes", flush=True)
    print(f"\nAll {len(steps.numbers())} steps pass: you have built GPT-2 from scratch.")
    return 0


# -- watch -------------------------------------------------------------------


Signature = tuple[int, int] | None


def signature(path: Path) -> Signature:
    """What changes when a file is saved: its modification time and size."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def wait_for_change(path: Path, since: Signature, interval: float) -> Signature:
    """Poll until the file differs from `since` (and exists); return its signature."""
    current = signature(path)
    while current is None or current == since:
        time.sleep(interval)
        current = signature(path)
    return current


def run_check_process(number: int) -> int:
    """`python -m tests.check NN` in a fresh process, so edited modules reload.

    Its own session keeps Ctrl-C from reaching it: we stop it ourselves, quietly.
    """
    command = [sys.executable, "-m", "tests.check", f"{number:02d}"]
    child = subprocess.Popen(command, cwd=REPO, env=max_runtime.child_env(), start_new_session=True)
    try:
        return child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def clear_screen() -> None:
    if sys.stdout.isatty():
        sys.stdout.write(CLEAR_SCREEN)
        sys.stdout.flush()


def following_step(number: int) -> int | None:
    later = [n for n in steps.numbers() if n > number]
    return later[0] if later else None


def watch(number: int, *, interval: float = 0.5, max_runs: int | None = None) -> int:
    """Check `number` now and on every save; move on when it passes.

    Returns after `max_runs` checks (never, if None) or once the last step passes:
    0 if the last check passed, 1 if it failed.
    """
    runs = 0
    while True:
        path = step_path(number)
        before = signature(path)  # taken before the check: a save during it counts
        clear_screen()
        ok = run_check_process(number) == 0
        runs += 1
        if ok:
            nxt = following_step(number)
            if nxt is None:
                print("\nEvery step passes: nothing left to watch.")
                return 0
            number, path = nxt, step_path(nxt)
            before = signature(path)
            print(f"\nNow watching {rel(path)}: save it to check it (Ctrl-C to stop).", flush=True)
        else:
            print(f"\nWatching {rel(path)}: save it to check again (Ctrl-C to stop).", flush=True)
        if max_runs is not None and runs >= max_runs:
            return 0 if ok else 1
        wait_for_change(path, before, interval)


def cmd_watch(args: argparse.Namespace) -> int:
    if args.interval <= 0 or (args.max_runs is not None and args.max_runs < 1):
        raise UsageError("--interval must be positive and --max-runs at least 1.")
    number = parse_step(args.step) if args.step else first_unfinished()
    if number is None:
        print("Every step passes: nothing left to watch.")
        return 0
    return watch(number, interval=args.interval, max_runs=args.max_runs)


# -- hints ---------------------------------------------------------------------


def hint_path(number: int) -> Path:
    return steps.step(number).hints


def load_hints(number: int) -> list[str]:
    """The step's hint tiers: its markdown file split at lines that are `---`."""
    path = hint_path(number)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        raise Failure(f"no hints for step {number:02d}: {rel(path)} is missing.") from None
    tiers = [tier.strip() for tier in re.split(r"^---[ \t]*$", text, flags=re.MULTILINE)]
    return [tier for tier in tiers if tier]


def load_state() -> dict:
    try:
        state = json.loads(STATE_FILE.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        print(f"(ignoring {rel(STATE_FILE)}: it is not readable JSON)", file=sys.stderr)
        return {}
    return state if isinstance(state, dict) else {}


def write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file and a rename: never a half-written file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def hint_counts(state: dict) -> dict:
    """{"NN": how many of step NN's hints were shown}, from the state file."""
    counts = state.get("hints_shown")
    return counts if isinstance(counts, dict) else {}


def hints_shown(state: dict, number: int) -> int:
    count = hint_counts(state).get(f"{number:02d}", 0)
    return count if isinstance(count, int) and count >= 0 else 0


def record_hints_shown(state: dict, number: int, count: int) -> None:
    state["hints_shown"] = {**hint_counts(state), f"{number:02d}": count}
    write_atomically(STATE_FILE, json.dumps(state, indent=2, sort_keys=True) + "\n")


def print_hints(number: int, tiers: list[str], shown: int) -> None:
    report = checker().report
    print(
        report.bold(f"Step {number:02d}, {steps.step(number).title}: hint {shown} of {len(tiers)}")
    )
    for index, tier in enumerate(tiers[:shown], start=1):
        print(f"\n{report.bold(f'Hint {index}')}\n{tier}")


def print_solution(number: int) -> None:
    path = steps.step(number).solution
    print(checker().report.bold(f"The reference solution, {rel(path)}:") + "\n")
    print(read_source(path).rstrip())


def show_next_hint(number: int, tiers: list[str], state: dict, shown: int) -> None:
    print_hints(number, tiers, shown + 1)
    try:
        record_hints_shown(state, number, shown + 1)
    except OSError as error:  # a read-only checkout: the hint is shown all the same
        print(f"(could not save your hint count to {rel(STATE_FILE)}: {error})", file=sys.stderr)
    more = "one more hint" if shown + 1 < len(tiers) else "the solution, once the step passes"
    print(f"\nStill stuck? {learn_command('hint', f'{number:02d}')} again shows {more}.")


def show_solution_if_passing(number: int, tiers: list[str]) -> None:
    print_hints(number, tiers, len(tiers))
    print()
    if passes(number):
        print(f"Step {number:02d} passes: compare your code with the reference.\n")
        print_solution(number)
        return
    print(
        f"That was the last hint. The solution is shown once step {number:02d} passes, "
        f"or now with {learn_command('hint', f'{number:02d}', '--solution')}."
    )


# -- hints for the check that fails ---------------------------------------------


def current_outcomes(number: int):  # -> list[tests.checker.Outcome]
    """The step's outcomes now: the last check's if the file is unchanged since,
    else from running the check (quietly)."""
    checker()
    memo = importlib.import_module("tests.checker.memo")
    path = step_path(number)
    outcomes = memo.recall(number, path)
    if outcomes is None:
        prepare_max()
        transient(f"checking step {number:02d}…")
        passes(number)  # check_one stores the outcomes for the learner's file
        transient()
        outcomes = memo.recall(number, path)
    return outcomes or []


def check_hint_counts(state: dict, number: int) -> dict:
    """{"check|topic": rungs shown} for step `number`, from the state file."""
    by_step = state.get("check_hints")
    counts = by_step.get(f"{number:02d}") if isinstance(by_step, dict) else None
    return counts if isinstance(counts, dict) else {}


def record_check_hints(state: dict, number: int, key: str, count: int) -> None:
    by_step = state.get("check_hints") if isinstance(state.get("check_hints"), dict) else {}
    by_step[f"{number:02d}"] = {**check_hint_counts(state, number), key: count}
    state["check_hints"] = by_step
    write_atomically(STATE_FILE, json.dumps(state, indent=2, sort_keys=True) + "\n")


def print_failure(number: int, failure) -> None:
    report = checker().report
    print(report.bold(f"Step {number:02d}, {steps.step(number).title}: the check that fails"))
    report.print_outcomes([failure])


def show_check_hint(number: int, failure, state: dict) -> None:
    """The next rung of the failing check's ladder, and the rungs before it."""
    report = checker().report
    key = f"{failure.name}|{failure.topic}"
    shown = check_hint_counts(state, number).get(key, 0)
    shown = min(shown if isinstance(shown, int) and shown >= 0 else 0, len(failure.ladder))
    now = min(shown + 1, len(failure.ladder))
    print_failure(number, failure)
    about = f" ({failure.topic})" if failure.topic else ""
    for index, rung in enumerate(failure.ladder[:now], start=1):
        heading = f"Hint {index} of {len(failure.ladder)} for this check{about}"
        print(f"\n{report.bold(heading)}\n{rung}")
    try:
        record_check_hints(state, number, key, now)
    except OSError as error:  # a read-only checkout: the hint is shown all the same
        print(f"(could not save your hint count to {rel(STATE_FILE)}: {error})", file=sys.stderr)
    if now < len(failure.ladder):
        print(
            f"\nStill stuck? {learn_command('hint', f'{number:02d}')} again shows one more hint for this check."
        )
    else:
        print(
            f"\nThat was the last hint for this check. Fix it and run "
            f"{step_command(number)}; the reference solution is shown once the step passes, "
            f"or now with {learn_command('hint', f'{number:02d}', '--solution')}."
        )


def show_step_hint(number: int) -> None:
    """The step's own ladder (steps/hints/step_NN.md), one tier more each ask."""
    tiers = load_hints(number)
    state = load_state()
    shown = min(hints_shown(state, number), len(tiers))
    if shown < len(tiers):
        show_next_hint(number, tiers, state, shown)
    else:
        show_solution_if_passing(number, tiers)


def cmd_hint(args: argparse.Namespace) -> int:
    number = parse_step(args.step)
    if args.solution:
        print_solution(number)
        return 0
    if not step_path(number).is_file():
        raise Failure(
            f"{rel(step_path(number))} is missing: {learn_command('reset', f'{number:02d}')} restores it."
        )
    failure = next((o for o in current_outcomes(number) if o.status == "fail"), None)
    if failure is not None and failure.ladder:
        show_check_hint(number, failure, load_state())
        return 0
    if failure is not None:  # placeholders, a syntax error, an import: the step's ladder
        print_failure(number, failure)
        print()
    show_step_hint(number)
    return 0


# -- reset ---------------------------------------------------------------------


def backup(path: Path) -> Path:
    """Copy `path` to .backups/step_NN-YYYYmmdd-HHMMSS.py and check the copy."""
    BACKUPS.mkdir(exist_ok=True)
    content = path.read_bytes()
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for attempt in range(1, 1000):
        suffix = "" if attempt == 1 else f"-{attempt}"
        target = BACKUPS / f"{path.stem}-{stamp}{suffix}{path.suffix}"
        try:
            with open(target, "xb") as file:  # "x": never overwrite an older backup
                file.write(content)
        except FileExistsError:
            continue
        if target.read_bytes() != content:
            raise OSError(f"the copy in {rel(target)} does not match the original")
        return target
    raise OSError("too many backups with the same time stamp")


def cmd_reset(args: argparse.Namespace) -> int:
    number = parse_step(args.step)
    path = step_path(number)
    skeleton = pristine_skeleton(number)
    if skeleton is None:
        raise Failure(
            f"cannot find the original skeleton of {rel(path)}: reset takes it from git, "
            "and this is not a git checkout of the tutorial (or the file is not committed)."
        )
    if path.is_file() and read_source(path) == skeleton:
        print(f"{rel(path)} is already the untouched skeleton: nothing to do.")
        return 0
    if path.exists():
        try:
            saved = backup(path)
        except OSError as error:
            raise Failure(f"could not back up {rel(path)} ({error}); it is unchanged.") from None
        print(f"Saved your version to {rel(saved)}.")
    write_atomically(path, skeleton)
    print(f"Restored {rel(path)} to its skeleton.")
    return 0


# -- doctor --------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    level: str  # "ok", "note" or "problem"
    text: str
    fix: str = ""


FINDING_ICONS = {"ok": "✅", "note": "⚠️ ", "problem": "❌"}


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
        return Finding("ok", "MAX kernel cache: warm (checks take seconds)")
    return Finding(
        "problem",
        "MAX kernel cache: cold (the first checks compile kernels, tens of seconds each).",
        "Run `pixi run warm` (pip: `max warm-interpreter-cache`) once: about 5 minutes on 2 cores.",
    )


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


def torch_finding() -> Finding:
    if importlib.util.find_spec("torch") is None:
        return Finding("ok", "torch not installed: fine, only the maintainers' tests need it")
    return Finding("ok", f"torch {installed('torch')} (only the maintainers' tests need it)")


def git_finding() -> Finding:
    if tracks_steps():
        return Finding("ok", "git checkout: `reset` can restore the skeletons")
    return Finding(
        "note",
        "not a git checkout: `reset` cannot restore a skeleton, and `status` guesses "
        "'not started' from the placeholders.",
        "Clone the tutorial with git to get both.",
    )


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


# -- warm ----------------------------------------------------------------------


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
        print(f"MAX's kernel cache is cold: {learn_command('warm')} compiles it (about 5 minutes).")
        return 1
    print(
        "Compiling MAX's kernels once (`max warm-interpreter-cache`), so that later checks "
        "take seconds.\nThis takes about 5 minutes on 2 cores; Ctrl-C stops it.",
        flush=True,
    )
    if subprocess.run(command, env=env).returncode != 0:
        raise Failure("`max warm-interpreter-cache` failed (its output is above).")
    print("Done: MAX's kernel cache is warm.")
    return 0


# -- command line --------------------------------------------------------------


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog=PROG,
        description=__doc__.split("\n\nWhere")[0],  # the commands and exit status
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, run: Callable[[argparse.Namespace], int], text: str) -> ArgumentParser:
        sub = commands.add_parser(name, help=text, description=text)
        sub.set_defaults(run=run)
        return sub

    command("status", cmd_status, "every step: not started, in progress or done")
    command("next", cmd_next, "check the first step that does not pass yet")
    watch_parser = command("watch", cmd_watch, "re-check a step each time you save it")
    watch_parser.add_argument("step", nargs="?", help="step number (default: the first undone)")
    watch_parser.add_argument("--interval", type=float, default=0.5, help=argparse.SUPPRESS)
    watch_parser.add_argument(
        "--max-runs", type=int, metavar="N", help="stop after N checks (for scripts and tests)"
    )
    hint_parser = command("hint", cmd_hint, "one more hint for a step each time you ask")
    hint_parser.add_argument("step", help="step number (9, 09 or s09)")
    hint_parser.add_argument(
        "--solution", action="store_true", help="show the reference solution now"
    )
    reset_parser = command("reset", cmd_reset, "restore a step's skeleton (yours is saved first)")
    reset_parser.add_argument("step", help="step number (9, 09 or s09)")
    command("doctor", cmd_doctor, "check that this machine is ready for the tutorial")
    warm_parser = command("warm", cmd_warm, "compile MAX's kernels once, so checks take seconds")
    warm_parser.add_argument(
        "--check", action="store_true", help="only say whether it is needed (exit 1 if so)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    max_runtime.prepare()  # Ctrl-C becomes a KeyboardInterrupt, before MAX runs

    def run() -> int:
        args = build_parser().parse_args(argv)
        return args.run(args)

    return exit_status(run)


if __name__ == "__main__":
    sys.exit(main())
