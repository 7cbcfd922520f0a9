"""Every checker passes its solution, fails its untouched skeleton, and
catches (and names) the plausible mistakes listed as MISTAKES in each
tests/specs/step_NN/mistakes.py."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest

from common import max_runtime, steps
from common.steps import REPO
from tests.checker import Outcome, load_spec, run_step
from tests.checker.learner_code import MAX_CAUSE_LINES
from tests.fixtures import stand_in_device
from tests.mistakes import Mutant, apply, mistakes

STEPS = steps.numbers()
max_runtime.prepare()


def failures(outcomes: list[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.status == "fail"]


def mutate(number: int, mutant: Mutant, directory: Path) -> Path:
    path = directory / steps.step(number).solution.name
    path.write_text(apply(mutant, steps.step(number).solution.read_text()))
    return path


@pytest.mark.parametrize("number", STEPS)
def test_solution_passes(number: int) -> None:
    outcomes = run_step(load_spec(number), steps.step(number).solution)
    assert not failures(outcomes), failures(outcomes)


@pytest.mark.parametrize("number", STEPS)
def test_skeleton_fails_with_a_hint(number: int) -> None:
    outcomes = run_step(load_spec(number), steps.step(number).skeleton)
    failed = failures(outcomes)
    assert failed and failed[0].hint, outcomes


@pytest.mark.parametrize("number", STEPS)
def test_at_least_five_mutants(number: int) -> None:
    assert len(mistakes(number)) >= 5


@pytest.mark.parametrize(
    ("number", "mutant"),
    [(n, mut) for n in STEPS for mut in mistakes(n)],
    ids=lambda value: (
        value.name.replace(" ", "-") if isinstance(value, Mutant) else f"s{value:02d}"
    ),
)
def test_mutant_is_caught_and_named(number: int, mutant: Mutant, tmp_path: Path) -> None:
    outcomes = run_step(load_spec(number), mutate(number, mutant, tmp_path))
    failed = failures(outcomes)
    assert failed, f"mutant {mutant.name!r} of step {number:02d} passed the checker"
    said = " ".join(f"{o.name} {o.message} {o.hint or ''}" for o in failed)
    assert mutant.expect.lower() in said.lower(), said


def run_cli(*args: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    env = max_runtime.child_env(NO_COLOR="1", **env_vars)
    return subprocess.run(
        [sys.executable, "-m", "tests.check", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize("number", STEPS)
def test_cli_exit_codes(number: int) -> None:
    solved = run_cli(f"{number:02d}", "--solutions")
    assert solved.returncode == 0, solved.stdout + solved.stderr
    assert f"Step {number:02d} passes" in solved.stdout
    skeleton = run_cli(f"s{number:02d}")
    assert skeleton.returncode == 1, skeleton.stdout + skeleton.stderr
    assert "Hint:" in skeleton.stdout
    for result in (solved, skeleton):
        assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize("argument", ["42", "abc", "s1O"])
def test_unknown_step_is_a_usage_error(argument: str) -> None:
    result = run_cli(argument)
    assert result.returncode == 2
    assert "unknown step" in result.stderr and "Traceback" not in result.stderr


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("03", "--file", str(tmp_path / "nope.py"))
    assert result.returncode == 2 and "does not exist" in result.stderr


def test_no_compile_notice_when_nothing_compiles() -> None:
    """The notice that MAX is compiling comes only with a compile: where the
    warm-up has run, a check that needs no new kernel says nothing of it."""
    if not max_runtime.kernel_cache_is_warm():
        pytest.skip("MAX's kernels are not warmed up here: a check may compile")
    result = run_cli("02", "--solutions", CHECK_COLD_CACHE="1")
    assert result.returncode == 0 and "compiling a kernel" not in result.stdout, result.stdout


@pytest.mark.parametrize("what", ["kernel", "graph"])
def test_a_compile_is_announced_and_off_the_checks_clock(
    what: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker tells the parent when MAX takes long to get an eager kernel
    or a graph (a compile, not a load from its disk cache), and the compile's
    time does not count against the check's time limit."""
    from max._interpreter_ops import gc_compile
    from max.engine import InferenceSession

    from tests.checker import compiles

    seen: dict[str, float] = {}

    def compile_target(family, key, seconds):
        seen["timer during the compile"] = signal.getitimer(signal.ITIMER_REAL)[0]
        time.sleep(seconds)
        return f"model for {key}"

    def load(session, graph, seconds):
        return compile_target(None, graph.name, seconds)

    def key(what: str, name: str):
        """What the compile is asked for: a kernel's key, or a graph of that name."""
        return name if what == "kernel" else SimpleNamespace(name=name)

    # Each replaced here, so that what compiles.watch wraps and sets is undone after.
    monkeypatch.setattr(gc_compile, "compile_single_target", compile_target)
    monkeypatch.setattr(InferenceSession, "load", load)
    monkeypatch.setattr(compiles, "COMPILE_NOTICE_AFTER", 0.2)
    monkeypatch.setattr(compiles, "_watching", False)
    monkeypatch.setattr(compiles, "_tell", compiles._tell)
    sent: list[dict] = []
    compiles.watch(sent.append)
    if what == "kernel":
        family = SimpleNamespace(name="matmul")
        get = partial(gc_compile.compile_single_target, family)
    else:
        get = partial(InferenceSession.load, None)  # a session: unused by the stand-in
    said = {"kernel": "matmul", "graph": "graph main"}[what]
    signal.setitimer(signal.ITIMER_REAL, 30)
    try:
        assert get(key(what, "cached"), 0.0) == "model for cached"
        assert sent == []  # loaded from MAX's disk cache in a blink: nothing to say
        assert get(key(what, "main"), 1.0) == "model for main"
        left = signal.getitimer(signal.ITIMER_REAL)[0]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    assert sent == [{"compiling": said}]
    assert seen["timer during the compile"] == 0 and 25 < left <= 30


def test_the_notice_is_said_once(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    from tests.checker import session

    monkeypatch.delenv("CHECK_PLAIN", raising=False)
    monkeypatch.setattr(session, "_told_compiling", False)
    session.compile_notice("matmul")
    session.compile_notice("softmax")
    assert capsys.readouterr().out.count("MAX is compiling a kernel") == 1


def test_a_graph_compile_is_not_sent_to_the_warm_up(
    capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    """The warm-up compiles eager kernels, not graphs: a graph's compile does
    not point the learner to it."""
    from tests.checker import session

    monkeypatch.delenv("CHECK_PLAIN", raising=False)
    monkeypatch.setattr(session, "_told_compiling", False)
    session.compile_notice("graph main")
    said = capsys.readouterr().out
    assert "MAX is compiling a graph" in said and "warm" not in said


def test_all_solutions_pass_then_are_not_run_again_while_unchanged() -> None:
    result = run_cli("all", "--solutions", "--rerun")
    assert result.returncode == 0, result.stdout
    assert f"{len(STEPS)}/{len(STEPS)}" in result.stdout
    assert "unchanged" not in result.stdout
    again = run_cli("all", "--solutions")
    assert again.returncode == 0, again.stdout
    assert again.stdout.count("(unchanged since it passed)") == len(STEPS)
    assert "python -m tests.check all --solutions --rerun`) runs every check" in again.stdout


def test_rerun_goes_with_all_only() -> None:
    result = run_cli("03", "--solutions", "--rerun")
    assert result.returncode == 2
    assert "--rerun goes with 'all'" in result.stdout + result.stderr


def test_a_remembered_pass_goes_stale_when_what_it_depends_on_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.checker import memo

    (tmp_path / "steps").mkdir()
    earlier = tmp_path / "steps" / "step_04.py"
    earlier.write_text("X = 1\n")
    learners = tmp_path / "steps" / "step_05.py"
    learners.write_text("from steps.step_04 import X\n")
    relative = tmp_path / "steps" / "step_06.py"
    relative.write_text("from . import step_05\nfrom .step_04 import X\n")
    digest = ["checker as it was"]
    monkeypatch.setattr(memo, "REPO", tmp_path)
    monkeypatch.setattr(memo, "RESULTS", tmp_path / ".check_results.json")
    monkeypatch.setattr(memo, "checker_digest", lambda: digest[0])

    assert memo.imported_steps(learners) == [earlier]
    assert memo.imported_steps(relative) == [earlier, learners]
    memo.remember(5, learners, [Outcome("a check", "pass")])
    assert memo.passed_unchanged(5, learners)
    earlier.write_text("X = 2\n")  # a step file it imports
    assert not memo.passed_unchanged(5, learners)
    earlier.write_text("X = 1\n")
    assert memo.passed_unchanged(5, learners)
    digest[0] = "a spec, reference, solution or version changed"
    assert not memo.passed_unchanged(5, learners)
    memo.remember(5, learners, [Outcome("a check", "fail", "wrong")])
    assert memo.recall(5, learners) == [Outcome("a check", "fail", "wrong")]
    assert not memo.passed_unchanged(5, learners)  # only a pass is taken on trust
    learners.write_text("from steps.step_04 import X  # edited\n")
    assert memo.recall(5, learners) is None


def learner_file(directory: Path, number: int, old: str, new: str) -> Path:
    """The solution of step `number` with one edit, as a learner's file."""
    path = directory / f"step_{number:02d}.py"
    source = steps.step(number).solution.read_text()
    assert source.count(old) == 1
    path.write_text(source.replace(old, new))
    return path


def line_number(path: Path, line: str) -> int:
    """The 1-based number of `line` in the file, as a traceback counts."""
    return path.read_text().splitlines().index(line) + 1


def test_checks_run_on_the_cpu_where_max_would_use_a_gpu(tmp_path: Path) -> None:
    """Where MAX sees an accelerator it makes new tensors there by default;
    the checks run the learner's code on the CPU, where the references and
    tolerances hold. A CPU object of its own stands in for the GPU."""
    from max.experimental.tensor import default_device

    record = tmp_path / "device.txt"
    path = tmp_path / "solution_03.py"
    path.write_text(
        steps.step(3).solution.read_text()
        + "\nfrom max.experimental.tensor import defaults\n"
        + f"open({str(record)!r}, 'w').write(type(defaults()[1].devices[0]).__name__)\n"
    )
    with default_device(stand_in_device()):
        assert not failures(run_step(load_spec(3), path))
    assert record.read_text() == "CPU"


def test_syntax_error_shows_the_line(tmp_path: Path) -> None:
    path = learner_file(tmp_path, 1, "n_embd: int = 768", "n_embd: int = = 768")
    (outcome,) = failures(run_step(load_spec(1), path))
    assert "SyntaxError" in outcome.message and "n_embd: int = = 768" in outcome.message
    line = line_number(path, "    n_embd: int = = 768  # width of every hidden state")
    assert f"(line {line})" in outcome.message, outcome.message


def test_exception_points_at_the_learners_line(tmp_path: Path) -> None:
    path = learner_file(
        tmp_path,
        4,
        "hidden_states = self.c_fc(hidden_states)",
        "hidden_states = self.c_fc(hidden_states) @ hidden_states",
    )
    (outcome,) = failures(run_step(load_spec(4), path))
    line = line_number(path, "        hidden_states = self.c_fc(hidden_states) @ hidden_states")
    assert f"{path.name}:{line}" in outcome.message, outcome.message
    assert "Traceback" not in outcome.message
    # What was raised, MAX's lines that name the cause (at most MAX_CAUSE_LINES), where.
    assert len(outcome.message.splitlines()) <= 2 + MAX_CAUSE_LINES, outcome.message


def test_a_forward_run_as_one_graph_still_points_at_the_learners_line(tmp_path: Path) -> None:
    """Step 13's checks run the model's forward as one graph (Context.run_lazily):
    a shape mistake stops where its operation is recorded, on the learner's line."""
    old = "return self.lm_head(self.transformer(input_ids))"
    new = "return self.lm_head(self.transformer(input_ids).transpose(1, 2))"
    path = learner_file(tmp_path, 13, old, new)
    messages = [outcome.message for outcome in failures(run_step(load_spec(13), path))]
    line = line_number(path, f"        {new}")
    assert any(f"{path.name}:{line}" in message for message in messages), messages
    assert not any("Traceback" in message for message in messages)


def test_a_max_error_keeps_its_cause_and_drops_its_advice(tmp_path: Path) -> None:
    """A reshape to the wrong size: MAX's message holds the operand and the
    cause, but also a code example and advice to override its check with a
    rebind. The learner sees the first two only."""
    old = "tensor = tensor.reshape([batch, seq_length, num_heads, attn_head_size])"
    path = learner_file(tmp_path, 9, old, old.replace("attn_head_size", "num_heads"))
    outcome = failures(run_step(load_spec(9), path))[0]
    assert "input and output number of elements must match" in outcome.message
    assert "shape=[Dim(2), Dim(7), Dim(64)]" in outcome.message
    assert "rebind" not in outcome.message and "```" not in outcome.message


def test_a_hanging_check_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHECK_TIME_LIMIT", "2")
    path = learner_file(
        tmp_path,
        1,
        "if self.n_inner is None:",
        "while True:\n            pass\n        if self.n_inner is None:",
    )
    (outcome,) = failures(run_step(load_spec(1), path))
    assert "still running after 2 s" in outcome.message and outcome.hint


# The learner's code runs in a worker process (tests/checker/isolate.py): what
# kills or freezes that process is a failed check, never a dead checker.
BEFORE_N_INNER = "if self.n_inner is None:"


def learner_does(directory: Path, *lines: str) -> Path:
    """Step 01's solution doing `lines` in GPT2Config.__post_init__, which the
    second check (the first after the import) runs."""
    code = "".join(f"{line}\n        " for line in lines)
    return learner_file(directory, 1, BEFORE_N_INNER, code + BEFORE_N_INNER)


def expect_failed_check(result: subprocess.CompletedProcess[str], *phrases: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "❌ GPT2Config is a dataclass" in result.stdout, result.stdout
    for phrase in phrases:
        assert phrase in result.stdout, result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    total = len(load_spec(1).checks) + 1  # and "no placeholders left"
    assert f"Step 01: 1/{total} checks pass" in result.stdout


def test_a_segfault_is_a_failed_check(tmp_path: Path) -> None:
    path = learner_does(tmp_path, "import ctypes", "ctypes.string_at(0)")
    expect_failed_check(run_cli("01", "--file", str(path)), "SIGSEGV", "Hint:")


def test_an_abort_is_a_failed_check(tmp_path: Path) -> None:
    path = learner_does(tmp_path, "import os", "os.abort()")
    expect_failed_check(run_cli("01", "--file", str(path)), "SIGABRT")


def test_a_hang_in_native_code_is_stopped(tmp_path: Path) -> None:
    # SIGALRM blocked, then a C call that waits for a signal: Python's own
    # time limit can never fire, only the process watching from outside helps.
    path = learner_does(
        tmp_path,
        "import ctypes, signal",
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})",
        "ctypes.CDLL(None).pause()",
    )
    started = time.monotonic()
    result = run_cli("01", "--file", str(path), CHECK_TIME_LIMIT="2")
    expect_failed_check(result, "still running after", "native code")
    assert time.monotonic() - started < 60  # 2 s limit + 5 s grace + starting up


def test_memory_runaway_is_stopped(tmp_path: Path) -> None:
    path = learner_does(tmp_path, "hog = []", "while True:", "    hog.append(b'x' * 2**26)")
    result = run_cli("01", "--file", str(path), CHECK_MEMORY_LIMIT_GB="3", CHECK_TIME_LIMIT="60")
    expect_failed_check(result, "more than 3.0 GiB of memory")


def test_check_all_goes_on_after_a_crash(tmp_path: Path) -> None:
    """A crash ends its step's worker; the next step gets a fresh one."""
    from tests.checker import CheckProcess

    crashing = learner_does(tmp_path, "import os", "os.abort()")
    with CheckProcess(quiet=True) as worker:
        _, crashed = worker.run_step(1, crashing)
        _, fine = worker.run_step(2, steps.step(2).solution)
    assert failures(crashed) and "SIGABRT" in failures(crashed)[0].message
    assert not failures(fine), fine
