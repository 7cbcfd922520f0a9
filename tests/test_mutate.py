"""devtools/mutate/: it mutates only what the learner writes, with every kind of
change the issue asks for, its equivalents file is current, and a fixed
sample of mutants is killed (the full run: `python -m devtools.mutate`)."""

from __future__ import annotations

import difflib
import subprocess
import sys

import pytest

from common import max_runtime, steps
from common.steps import REPO
from devtools.mutate.operators import learner_lines, mutants
from devtools.mutate.running import load_equivalents

STEPS = [n for n in steps.numbers() if steps.step(n).skeleton.is_file()]
SAMPLE = 3  # mutants per step in this test, the same ones every run


@pytest.mark.parametrize("number", STEPS)
def test_mutants_change_only_learner_lines(number: int) -> None:
    lines = learner_lines(number)
    solution = steps.step(number).solution.read_text().splitlines()
    found = mutants(number)
    assert found, f"no mutant for step {number:02d}"
    for mutant in found:
        changed = difflib.SequenceMatcher(
            a=solution, b=mutant.source.splitlines(), autojunk=False
        ).get_opcodes()
        for tag, i1, i2, _, _ in changed:
            if tag != "equal":
                touched = range(i1 + 1, max(i2, i1 + 1) + 1)
                assert all(n in lines for n in touched), mutant.describe()


def test_learner_lines_are_the_todo_blocks() -> None:
    solution = steps.step(14).solution.read_text().splitlines()
    lines = learner_lines(14)

    def line_of(text: str) -> int:
        return next(i for i, line in enumerate(solution, 1) if text in line)

    assert line_of("np.partition(logits, -top_k)[-top_k]") in lines
    assert line_of("token_ids.append(next_id)") in lines
    assert line_of("rng = np.random.default_rng(seed)") not in lines  # given
    assert line_of("def sample_next_token(") not in lines


def test_every_kind_of_change_is_made() -> None:
    kinds = {m.operator for n in STEPS for m in mutants(n)}
    assert kinds >= {
        "arithmetic",
        "comparison",
        "constant",
        "sign",
        "boolean",
        "keyword dropped",
        "call unwrapped",
        "statement dropped",
        "swap",
    }, kinds


def test_mutant_keys_are_unique() -> None:
    for number in STEPS:
        keys = [m.key for m in mutants(number)]
        assert len(keys) == len(set(keys)), number


def test_equivalents_name_existing_mutants_with_a_reason() -> None:
    keys = {(n, m.key) for n in STEPS for m in mutants(n)}
    for (number, key), reason in load_equivalents().items():
        assert (number, key) in keys or number not in STEPS, f"stale entry: step {number}: {key}"
        assert len(reason.split()) >= 4, f"give the reason: step {number}: {key}"


def test_a_fixed_sample_of_mutants_is_killed() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "devtools.mutate", "--sample", str(SAMPLE)],
        cwd=REPO,
        env=max_runtime.child_env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{SAMPLE * len(STEPS)} mutants" in result.stdout, result.stdout
