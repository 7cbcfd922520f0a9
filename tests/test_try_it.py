"""The book's "Try it" experiments (steps/try_it/) run, print something, and
are shown in the book through an include, never pasted. Each one is also a
notebook (jupytext's percent format), and runs as one in a Jupyter kernel the
way a learner opens it: from steps/try_it, with the repository on PYTHONPATH,
offline, on a tiny local checkpoint where it wants trained weights."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from common import max_runtime, steps
from common.steps import REPO
from tests.fixtures import copy_tutorial, run_code, run_python, run_tool
from tools.learn.skeletons import pristine_skeleton

EXPERIMENTS = [script for record in steps.STEPS for script in record.try_it]
KERNEL = "try-it"  # the kernel the notebooks run in: this interpreter's ipykernel
CELL_TIMEOUT = 600  # seconds: a cold MAX cache compiles kernels on the first run


@pytest.mark.parametrize("record", steps.STEPS, ids=lambda record: f"step_{record.id}")
def test_every_step_has_an_experiment(record: steps.StepRecord) -> None:
    """Every page's Try it runs at least one experiment (steps/try_it/step_NN_*.py)."""
    assert record.try_it, f"no steps/try_it/step_{record.id}_*.py for {record.page.name}'s Try it"


@pytest.mark.parametrize("script", EXPERIMENTS, ids=lambda path: path.stem)
def test_experiment_runs_and_prints(script: Path) -> None:
    """It completes; its first line says whose code of its step runs; its
    figures go to the repository's ignored folder."""
    result = run_tool(f"steps.try_it.{script.stem}", timeout=600, NO_COLOR="1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) >= 3, result.stdout
    if runs_step_code(script):
        which = WHICH.fullmatch(lines[0])
        assert which and script.stem[5:7] in which.groups(), lines[0]
    for saved in re.findall(r"\(figure saved as (.+)\)", result.stdout):
        assert saved.startswith("steps/try_it/figures_out/") and (REPO / saved).is_file()


def test_experiments_run_on_the_cpu_where_max_would_use_a_gpu() -> None:
    """Importing the package makes the CPU MAX's default device (on a GPU
    machine MAX would make new tensors there, beside the experiments' CPU ones)."""
    probe = (
        "import steps.try_it\n"
        "from max.experimental.tensor import defaults\n"
        "from max.experimental.sharding.mesh import get_default_mesh\n"
        "print(get_default_mesh() is not None, defaults()[1].devices[0])"
    )
    result = run_code(probe, timeout=120)
    assert result.returncode == 0, result.stderr
    pinned, device = result.stdout.split(maxsplit=1)
    assert pinned == "True" and "type=cpu" in device, result.stdout


@pytest.mark.parametrize("script", EXPERIMENTS, ids=lambda path: path.stem)
def test_experiment_is_in_its_page(script: Path) -> None:
    page = steps.step(int(script.stem.split("_")[1])).page.read_text(encoding="utf-8")
    assert f"{{{{#include ../../steps/try_it/{script.name}}}}}" in page


# Notebooks


@pytest.mark.parametrize("script", EXPERIMENTS, ids=lambda path: path.stem)
def test_experiment_is_a_percent_notebook(script: Path) -> None:
    """A title in a markdown cell, then cells; saving the notebook from Jupyter
    writes the file back unchanged (the file is jupytext's own rendering)."""
    import jupytext

    text = script.read_text(encoding="utf-8")
    notebook = jupytext.read(script)
    assert text.startswith("# %% [markdown]\n# # Step "), "the first cell is the title"
    assert notebook.metadata["jupytext"]["text_representation"]["format_name"] == "percent"
    assert sum(cell.cell_type == "code" for cell in notebook.cells) >= 2
    assert jupytext.writes(notebook, fmt="py:percent") == text


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kernel spec for this interpreter's ipykernel, whatever else Jupyter has registered."""
    from ipykernel.kernelspec import write_kernel_spec

    folder = tmp_path_factory.mktemp("kernels")
    write_kernel_spec(folder / KERNEL)
    return folder


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small GPT-2 checkpoint (save_pretrained's files) in place of a real one."""
    from tests.fixtures import write_checkpoint

    return write_checkpoint(tmp_path_factory.mktemp("gpt2"))


@pytest.mark.parametrize("script", EXPERIMENTS, ids=lambda path: path.stem)
def test_experiment_runs_as_a_notebook(
    script: Path, kernels: Path, request: pytest.FixtureRequest
) -> None:
    """Every cell runs without an error (nbclient raises on the first one), and
    an experiment that draws shows its figures in the notebook."""
    import jupytext
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    notebook = jupytext.read(script)
    env = max_runtime.child_env(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", NO_COLOR="1")
    if "gpt2_directory" in script.read_text(encoding="utf-8"):
        env["GPT2_WEIGHTS"] = str(request.getfixturevalue("tiny_gpt2"))
    manager = KernelManager(
        kernel_name=KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)])
    )
    client = NotebookClient(
        notebook,
        km=manager,
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(script.parent)}},  # the kernel's working directory
    )
    try:
        client.execute(env=env)
    finally:  # nbclient leaves a kernel it did not start running: each holds MAX
        if manager.has_kernel:
            manager.shutdown_kernel(now=True)

    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    printed = "".join(
        output.get("text", "") for output in outputs if output.output_type == "stream"
    )
    images = [output for output in outputs if "image/png" in output.get("data", {})]
    assert len(printed.strip().splitlines()) >= 3, printed
    if "show(" in script.read_text(encoding="utf-8"):
        assert images, "the experiment draws, but the notebook shows no figure"
    assert "figure saved" not in printed, "a notebook shows its figures; it does not save them"


# Which code an experiment runs: the learner's step once it passes its check


WHICH = re.compile(
    r"Using (your steps/step_(\d\d)\.(?:py|mojo) \(it passes its check\)\."
    r"|the reference solution: steps/step_(\d\d)\.(?:py|mojo) .+)"
)


def runs_step_code(script: Path) -> bool:
    return "learner_or_reference(" in script.read_text(encoding="utf-8")


NO_STEP_CODE = {
    "step_25_cost",  # arithmetic on the shapes alone, no model
    "step_23_bfloat16",  # bit patterns, and the shared reader in common/checkpoint.py
}


def test_experiments_that_run_step_code_ask_which() -> None:
    """Every experiment that runs its page's step picks it through the helper:
    none imports that step's reference directly."""
    for script in EXPERIMENTS:
        own = f"solutions.solution_{script.stem[5:7]}"
        assert own not in script.read_text(encoding="utf-8"), script.name
        assert runs_step_code(script) == (script.stem not in NO_STEP_CODE), script.name


CHOICES = """
import json, sys
from pathlib import Path
from tests.checker import Outcome, memo
from common import steps
from steps.try_it import learner

memo.RESULTS = Path(sys.argv[1])  # the test's own, not the checkout's
seen = {}
for record in steps.STEPS:
    said = []
    for verdict in (None, "fail", "pass"):
        if verdict:
            memo.remember(record.number, record.skeleton, [Outcome("a check", verdict)])
        module, line = learner.choose(record.number)
        said.append([module.__name__, line])
    seen[record.id] = said
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def choices(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[list[str]]]:
    """What the helper chooses and says for every step with no verdict on record,
    a failing one, then a pass of the unchanged file (one process: MAX loads once)."""
    results = tmp_path_factory.mktemp("verdicts") / ".check_results.json"
    result = run_python(["-c", CHOICES, str(results)], timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("number", steps.numbers())
def test_the_helper_runs_a_passing_step_and_else_the_reference(
    number: int, choices: dict[str, list[list[str]]]
) -> None:
    """The reference until the unchanged file passed, then the learner's
    module, each said in one line that names the step's check."""
    record = steps.step(number)
    (unchecked, unchecked_line), (failing, failing_line), (passing, passing_line) = choices[
        record.id
    ]
    command = f"python -m tests.check {record.id}"
    assert unchecked == failing == f"solutions.solution_{record.id}"
    shown = f"steps/{record.skeleton.name}"
    assert unchecked_line.startswith(
        f"Using the reference solution: {shown} has no check on record"
    )
    assert f"{shown} does not pass its check yet" in failing_line
    assert command in unchecked_line and command in failing_line
    assert passing == f"steps.step_{record.id}"
    assert passing_line == f"Using your {shown} (it passes its check)."
    assert all(WHICH.fullmatch(line) for line in (unchecked_line, failing_line, passing_line))


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """The tutorial's code with untouched skeletons, where a learner's steps
    and the checker's verdicts can change without touching this checkout."""
    return copy_tutorial(
        tmp_path / "tutorial",
        ("common", "solutions", "steps", "tests", "pyproject.toml"),
        pristine_skeleton,
    )


def in_scratch(root: Path, *arguments: str, timeout: float = 600):
    return subprocess.run(
        [sys.executable, *arguments],
        cwd=root,
        env=max_runtime.child_env(NO_COLOR="1", CHECK_PLAIN="1"),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def record_a_pass(root: Path, number: int) -> None:
    """The verdict a passing check leaves for the file as it is now."""
    code = (
        "from tests.checker import Outcome, memo\n"
        f"memo.remember({number}, memo.REPO / 'steps' / 'step_{number:02d}.py',"
        " [Outcome('every check', 'pass')])"
    )
    result = in_scratch(root, "-c", code, timeout=120)
    assert result.returncode == 0, result.stderr


def run_experiment(root: Path, name: str) -> tuple[str, list[str]]:
    """The experiment's "which code" line and its other lines, once it completed."""
    result = in_scratch(root, "-m", f"steps.try_it.{name}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    first, *rest = result.stdout.splitlines()
    assert len(rest) >= 3, result.stdout
    return first, rest


# One experiment per part: the learner's passing step, then the untouched skeleton.
REPRESENTATIVE = ["step_03_row_statistics", "step_22_band", "step_25_regrouping"]


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_an_experiment_runs_the_learners_passing_step(name: str, scratch: Path) -> None:
    number = int(name[5:7])
    solution = (scratch / "solutions" / f"solution_{number:02d}.py").read_text()
    (scratch / "steps" / f"step_{number:02d}.py").write_text(solution)
    record_a_pass(scratch, number)
    first, yours = run_experiment(scratch, name)
    assert first == f"Using your steps/step_{number:02d}.py (it passes its check)."

    (scratch / "steps" / f"step_{number:02d}.py").write_text(pristine(number))
    first, reference = run_experiment(scratch, name)
    assert first.startswith(f"Using the reference solution: steps/step_{number:02d}.py ")
    assert yours == reference, "the solution's copy and the reference print the same"


def pristine(number: int) -> str:
    from tools.learn.skeletons import pristine_skeleton

    return pristine_skeleton(number) or steps.step(number).skeleton.read_text()


def test_the_pass_a_check_records_is_what_an_experiment_reads(scratch: Path) -> None:
    """The real check's verdict, then an edit after it: the experiment follows."""
    solution = (scratch / "solutions" / "solution_03.py").read_text()
    (scratch / "steps" / "step_03.py").write_text(solution)
    result = in_scratch(scratch, "-m", "tests.check", "03")
    assert result.returncode == 0, result.stdout + result.stderr
    first, _ = run_experiment(scratch, "step_03_row_statistics")
    assert first == "Using your steps/step_03.py (it passes its check)."

    (scratch / "steps" / "step_03.py").write_text(solution + "\n# an edit since the check\n")
    first, _ = run_experiment(scratch, "step_03_row_statistics")
    assert first.startswith("Using the reference solution: steps/step_03.py has no check on")


def test_a_half_written_step_never_ends_in_a_traceback(scratch: Path) -> None:
    """A file that does not import, even with a pass on record, runs the
    reference; a passing file that raises inside the experiment is named with
    its line, without a traceback."""
    step = scratch / "steps" / "step_03.py"
    step.write_text(pristine(3) + "\ndef half_written(:\n")
    record_a_pass(scratch, 3)
    first, _ = run_experiment(scratch, "step_03_row_statistics")
    assert first.startswith("Using the reference solution: steps/step_03.py passed its check")
    assert "does not import here (SyntaxError" in first

    solution = (scratch / "solutions" / "solution_03.py").read_text()
    marker = "    def forward(self, x: Tensor) -> Tensor:\n"
    assert solution.count(marker) == 1
    step.write_text(solution.replace(marker, marker + "        raise ValueError('not yet')\n"))
    record_a_pass(scratch, 3)
    result = in_scratch(scratch, "-m", "steps.try_it.step_03_row_statistics")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr, result.stderr
    line = solution[: solution.index(marker)].count("\n") + 2
    assert f"steps/step_03.py raised ValueError in forward (line {line})" in result.stderr
    assert "not yet" in result.stderr


# Figures


def test_figures_go_to_a_folder_in_the_repository_that_git_ignores() -> None:
    result = run_code("from steps.try_it.figures import FOLDER; print(FOLDER)", timeout=120)
    assert result.returncode == 0, result.stderr
    folder = Path(result.stdout.strip())
    assert folder.is_relative_to(REPO), folder
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    probe = folder.relative_to(REPO) / "step_00_probe.png"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=REPO)
    assert ignored.returncode == 0, f"git does not ignore {probe}"
