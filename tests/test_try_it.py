"""The book's "Try it" experiments (steps/try_it/) run, print something, and
are shown in the book through an include, never pasted. Each one is also a
notebook (jupytext's percent format), and runs as one in a Jupyter kernel the
way a learner opens it: from steps/try_it, with the repository on PYTHONPATH,
offline, on a tiny local checkpoint where it wants trained weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from common import max_runtime, steps
from common.steps import REPO
from tests.fixtures import run_code, run_tool

EXPERIMENTS = [script for record in steps.STEPS for script in record.try_it]
KERNEL = "try-it"  # the kernel the notebooks run in: this interpreter's ipykernel
CELL_TIMEOUT = 600  # seconds: a cold MAX cache compiles kernels on the first run


@pytest.mark.parametrize("record", steps.STEPS, ids=lambda record: f"step_{record.id}")
def test_every_step_has_an_experiment(record: steps.StepRecord) -> None:
    """Every page's Try it runs at least one experiment (steps/try_it/step_NN_*.py)."""
    assert record.try_it, f"no steps/try_it/step_{record.id}_*.py for {record.page.name}'s Try it"


@pytest.mark.parametrize("script", EXPERIMENTS, ids=lambda path: path.stem)
def test_experiment_runs_and_prints(script: Path) -> None:
    result = run_tool(f"steps.try_it.{script.stem}", timeout=600, NO_COLOR="1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stdout.strip().splitlines()) >= 3, result.stdout


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
