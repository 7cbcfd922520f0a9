"""tools/learn/: status, next, watch, hint, reset, doctor and warm.

Commands that read or write the steps run on a copy of the repository in a
temporary directory (a git repository with one commit, like a fresh clone), in
a subprocess, exactly as a learner runs them. The rest (hint tiers with the state
file moved to a temporary directory, doctor, warm, usage errors) call main().
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from common import max_runtime, steps
from tests.checker import memo
from tests.fixtures import copy_tutorial
from tools import learn
from tools.learn import doctor, hints, progress, watch
from tools.learn.skeletons import pristine_skeleton

COPIED = ("common", "steps", "solutions", "tests", "tools", "pyproject.toml")
GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
TIMEOUT = 120


def git(repo: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=Learner", "-c", "user.email=learner@example.com"]
    result = subprocess.run(
        [*command, "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env=max_runtime.child_env(**GIT_ENV),
        check=True,
    )
    return result.stdout


@pytest.fixture(scope="module")
def pristine_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tutorial, committed: what a learner has after cloning it."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = copy_tutorial(
        tmp_path_factory.mktemp("pristine") / "tutorial", COPIED, pristine_skeleton
    )
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "The tutorial")
    return root


@pytest.fixture
def repo(pristine_repo: Path, tmp_path: Path) -> Path:
    """A fresh clone for one test (.git included)."""
    return Path(shutil.copytree(pristine_repo, tmp_path / "tutorial", symlinks=True))


def env() -> dict[str, str]:
    return max_runtime.child_env(NO_COLOR="1", PYTHONUNBUFFERED="1", **GIT_ENV)


def learn_cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.learn", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env=env(),
        timeout=TIMEOUT,
    )


def step(repo: Path, number: int) -> Path:
    return repo / "steps" / f"step_{number:02d}.py"


def solve(repo: Path, number: int) -> None:
    shutil.copy(repo / "solutions" / f"solution_{number:02d}.py", step(repo, number))


def edit(repo: Path, number: int, old: str, new: str) -> None:
    path = step(repo, number)
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def start_step_02(repo: Path) -> None:
    """Fill in one placeholder of step 02 (others remain)."""
    edit(repo, 2, "total_length = None", "total_length = num_tokens + sequence_length")


def states(output: str) -> dict[int, str]:
    """{step: state} from the lines `<icon> NN  <title>  <state>` of `status`."""
    found = {}
    for line in output.splitlines():
        for state in (progress.NOT_STARTED, progress.IN_PROGRESS, progress.DONE, progress.MISSING):
            parts = line.split()
            if line.endswith(state) and len(parts) > 1 and parts[1].isdigit():
                found[int(parts[1])] = state
    return found


# -- status --------------------------------------------------------------------


def test_status_of_a_fresh_clone(repo: Path) -> None:
    result = learn_cli(repo, "status")
    assert result.returncode == 0, result.stderr
    assert set(states(result.stdout).values()) == {progress.NOT_STARTED}
    assert len(states(result.stdout)) == len(steps.numbers())
    assert f"0/{len(steps.numbers())}" in result.stdout and "Next: step 01" in result.stdout


def test_status_tells_done_in_progress_and_not_started_apart(repo: Path) -> None:
    solve(repo, 1)
    start_step_02(repo)
    edit(repo, 3, "self.eps = None", "self.eps = eps")
    step(repo, 5).unlink()
    solve(repo, 10)  # finished, but wrong: no placeholders left and the check fails
    edit(repo, 10, "return x + sublayer(norm(x))", "return norm(x + sublayer(x))")
    result = learn_cli(repo, "status")
    assert result.returncode == 0, result.stderr
    found = states(result.stdout)
    assert found[1] == progress.DONE
    assert found[2] == found[3] == found[10] == progress.IN_PROGRESS
    assert found[4] == progress.NOT_STARTED and found[5] == progress.MISSING
    assert f"1/{len(steps.numbers())}" in result.stdout and "Next: step 02" in result.stdout


def test_committed_work_is_not_taken_for_the_skeleton(repo: Path) -> None:
    start_step_02(repo)
    git(repo, "commit", "-qam", "my work on step 02")
    assert states(learn_cli(repo, "status").stdout)[2] == progress.IN_PROGRESS
    result = learn_cli(repo, "reset", "2")
    assert result.returncode == 0, result.stderr
    assert step(repo, 2).read_text() == git(repo, "show", "HEAD~1:steps/step_02.py")


def test_status_without_git_guesses_from_the_placeholders(repo: Path) -> None:
    shutil.rmtree(repo / ".git")
    start_step_02(repo)  # its first TODO block is complete
    edit(repo, 3, "self.weight = None", "self.weight = Tensor.ones([dim])")  # a block begun
    result = learn_cli(repo, "status")
    assert "Not a git checkout" in result.stdout
    found = states(result.stdout)
    assert found[2] == progress.IN_PROGRESS
    assert found[3] == progress.NOT_STARTED  # without git, an unfinished block cannot tell
    assert found[1] == progress.NOT_STARTED


# -- next ----------------------------------------------------------------------


def test_next_checks_the_first_step_that_does_not_pass(repo: Path) -> None:
    solve(repo, 1)
    result = learn_cli(repo, "next")
    assert result.returncode == 1, result.stderr
    assert "step 01 passes" in result.stdout
    assert "Step 02: Causal masking" in result.stdout
    assert "placeholder(s) still None" in result.stdout
    assert "Step 03" not in result.stdout


# -- reset ---------------------------------------------------------------------


def test_reset_backs_up_the_learners_file_and_restores_the_skeleton(repo: Path) -> None:
    skeleton = step(repo, 3).read_text()
    edit(repo, 3, "self.eps = None", "self.eps = eps  # mine")
    mine = step(repo, 3).read_text()
    result = learn_cli(repo, "reset", "03")
    assert result.returncode == 0, result.stderr
    backups = list((repo / ".backups").glob("step_03-*.py"))
    assert len(backups) == 1 and backups[0].read_text() == mine
    assert f".backups/{backups[0].name}" in result.stdout
    assert step(repo, 3).read_text() == skeleton

    again = learn_cli(repo, "reset", "s03")
    assert again.returncode == 0 and "already the untouched skeleton" in again.stdout
    assert len(list((repo / ".backups").glob("step_03-*.py"))) == 1


def test_reset_restores_a_deleted_step(repo: Path) -> None:
    skeleton = step(repo, 4).read_text()
    step(repo, 4).unlink()
    assert learn_cli(repo, "reset", "4").returncode == 0
    assert step(repo, 4).read_text() == skeleton


def test_reset_never_overwrites_without_a_backup(repo: Path) -> None:
    (repo / ".backups").write_text("a file where the folder should be")
    edit(repo, 3, "self.eps = None", "self.eps = eps")
    mine = step(repo, 3).read_text()
    result = learn_cli(repo, "reset", "3")
    assert result.returncode == 1
    assert result.stderr.startswith("error: could not back up") and "Traceback" not in result.stderr
    assert step(repo, 3).read_text() == mine


def test_reset_without_git_says_why_and_changes_nothing(repo: Path) -> None:
    shutil.rmtree(repo / ".git")
    edit(repo, 3, "self.eps = None", "self.eps = eps")
    mine = step(repo, 3).read_text()
    result = learn_cli(repo, "reset", "3")
    assert result.returncode == 1 and "git" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert step(repo, 3).read_text() == mine


# -- hints ---------------------------------------------------------------------


@pytest.mark.parametrize("number", steps.numbers())
def test_every_step_has_three_tiers_of_hints(number: int) -> None:
    tiers = hints.load_hints(number)
    assert len(tiers) == 3, f"tests/specs/step_{number:02d}/hints.toml: [step] needs 3 rungs"
    assert all(len(tier) > 40 for tier in tiers)


def test_hints_advance_one_tier_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state_file = tmp_path / ".learn_state.json"
    monkeypatch.setattr(hints, "STATE_FILE", state_file)
    monkeypatch.setattr(memo, "RESULTS", tmp_path / ".check_results.json")
    tiers = hints.load_hints(5)
    for shown in (1, 2, 3):
        assert learn.main(["hint", "05"]) == 0
        output = capsys.readouterr().out
        assert f"hint {shown} of 3" in output
        assert all(tier in output for tier in tiers[:shown])
        assert all(tier not in output for tier in tiers[shown:])
    assert json.loads(state_file.read_text())["hints_shown"] == {"05": 3}
    learn.main(["hint", "3"])
    assert "hint 1 of 3" in capsys.readouterr().out  # counted per step


def test_the_solution_waits_for_a_pass_or_an_explicit_request(repo: Path) -> None:
    solution = (repo / "solutions" / "solution_01.py").read_text().strip()
    (repo / ".learn_state.json").write_text('{"hints_shown": {"01": 3}}')  # all hints seen
    exhausted = learn_cli(repo, "hint", "1")
    assert "--solution" in exhausted.stdout and solution not in exhausted.stdout
    assert solution in learn_cli(repo, "hint", "1", "--solution").stdout
    solve(repo, 1)
    assert solution in learn_cli(repo, "hint", "1").stdout


# -- watch ---------------------------------------------------------------------


class Lines:
    """A process's output, line by line, readable with a timeout."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(process,), daemon=True).start()

    def _pump(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if text in line:
                return
        raise AssertionError(f"no {text!r} in:\n" + "".join(self.seen))


@pytest.fixture
def watcher(repo: Path) -> Iterator[tuple[subprocess.Popen[str], Lines]]:
    command = ["watch", "01", "--interval", "0.05", "--max-runs", "2"]
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.learn", *command],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env(),
    )
    try:
        yield process, Lines(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_watch_rechecks_on_save_and_moves_on(
    repo: Path, watcher: tuple[subprocess.Popen[str], Lines]
) -> None:
    process, lines = watcher
    lines.wait_for("Watching steps/step_01.py")
    solve(repo, 1)
    lines.wait_for("Step 01 passes")
    lines.wait_for("Now watching steps/step_02.py")
    assert process.wait(timeout=30) == 0  # --max-runs 2


def test_watch_stops_quietly_on_ctrl_c(repo: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.learn", "watch", "1"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env(),
    )
    lines = Lines(process)
    try:
        lines.wait_for("Watching steps/step_01.py")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130
    finally:
        if process.poll() is None:
            process.kill()
    time.sleep(0.2)  # let the reader thread drain the pipe
    while not lines.lines.empty():
        lines.seen.append(lines.lines.get())
    assert "Traceback" not in "".join(lines.seen)


def test_wait_for_change_sees_a_save(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text("x = None\n")
    before = watch.signature(path)
    timer = threading.Timer(0.2, lambda: path.write_text("x = 1234\n"))
    timer.start()
    after = watch.wait_for_change(path, before, interval=0.02)
    timer.join()
    assert after != before and after == watch.signature(path)


# -- doctor and warm -----------------------------------------------------------


def test_doctor_reports_versions_and_problems(capsys: pytest.CaptureFixture[str]) -> None:
    status = learn.main(["doctor"])
    output = capsys.readouterr().out
    assert f"Python {sys.version_info.major}.{sys.version_info.minor}" in output
    assert f"MAX {doctor.installed('max')}" in output
    assert "torch" in output and "CPU core" in output and "MAX kernel cache" in output
    has_problems = "to fix:" in output
    assert status == (1 if has_problems else 0)


def test_doctor_says_what_an_unwarmed_cache_means(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not warmed up is no problem (a check compiles what it meets, and says
    so): doctor says how to compile everything up front, and does not fail."""
    monkeypatch.setattr(max_runtime, "kernel_cache_is_warm", lambda: False)
    learn.main(["doctor"])
    output = capsys.readouterr().out
    line = next(line for line in output.splitlines() if "MAX kernel cache" in line)
    assert "not warmed up" in line and "cold" not in output
    assert "pixi run warm" in output


def test_doctor_explains_python_3_12(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "version_info", (3, 12, 4, "final", 0))
    finding = doctor.python_finding()
    assert finding.level == "note" and "Ctrl-C handler" in finding.text


def test_warm_runs_max_with_its_output_live(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    fake_max = tmp_path / "max"  # cold for --check, then "compiles"
    fake_max.write_text('#!/bin/sh\n[ "$2" = --check ] && exit 1\necho compiling "$1"\n')
    fake_max.chmod(0o755)
    monkeypatch.setattr(doctor, "max_command", lambda: str(fake_max))
    assert learn.main(["warm", "--check"]) == 1
    assert "not warmed up" in capfd.readouterr().out
    assert learn.main(["warm"]) == 0
    output = capfd.readouterr().out
    assert "a few minutes, fewer with more cores" in output
    assert "compiling warm-interpreter-cache" in output


def test_warm_says_when_there_is_nothing_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    if not max_runtime.kernel_cache_is_warm():
        pytest.skip("the kernel cache is cold here: warming would take minutes")
    assert learn.main(["warm"]) == 0
    assert "already warm" in capsys.readouterr().out


# -- the command line ----------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["hint", "99"],
        ["reset", "fifteen"],
        ["watch", "0"],
        ["frobnicate"],
        [],
        ["reset"],
        ["watch", "1", "--max-runs", "0"],
    ],
)
def test_usage_errors_exit_2_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert learn.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
