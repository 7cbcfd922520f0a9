"""The repository's rooms and the one record per step.

Imports between the top-level packages run one way, down this list: a room
may import the rooms before it, never one after it (so there is no cycle).
Test modules (tests/test_*.py) are leaves: they may import anything, and no
other module imports them.
"""

from __future__ import annotations

import ast
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from common import steps
from common.cli import UsageError
from common.steps import REPO

ROOMS = [
    "common",  # shared set-up
    "solutions",  # the reference the learner's steps mirror
    "tests",  # the checker (tests/test_*.py aside)
    "steps",  # the learner's exercises and experiments
    "fast",  # the fast model
    "gpt2_serving",  # the served architecture
    "llama_serving",  # a GGUF file served through the fast path
    "tools",  # the learner's commands
    "devtools",  # the maintainers' tools
]
# A module much longer than 400 lines holds more than one idea, in Python or in
# Mojo (fast/kernels/ is a package of modules, one concern each). A spec's data
# (its hints and mistakes) lives beside its checks, so specs get no exemption.
MAX_LINES = 450


def is_test_module(path: Path) -> bool:
    return path.parent.name == "tests" and path.name.startswith(("test_", "conftest"))


def modules(suffix: str = ".py") -> list[Path]:
    return sorted(
        p for room in ROOMS for p in (REPO / room).rglob(f"*{suffix}") if ".venv" not in p.parts
    )


def imported_rooms(path: Path) -> set[str]:
    """The top-level rooms `path` imports (relative imports stay in its room)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.update(name.split(".")[0] for name in names if name.split(".")[0] in ROOMS)
    return found


def imports_test_module(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("tests.test_")
        ):
            return True
    return False


def test_imports_run_one_way() -> None:
    wrong = []
    for path in modules():
        if is_test_module(path):
            continue
        room = path.relative_to(REPO).parts[0]
        later = {other for other in imported_rooms(path) if ROOMS.index(other) > ROOMS.index(room)}
        if later:
            wrong.append(f"{path.relative_to(REPO)} ({room}) imports {sorted(later)}")
    assert not wrong, "imports against the rooms' order:\n" + "\n".join(wrong)


def test_only_tests_import_tests() -> None:
    wrong = [
        str(p.relative_to(REPO))
        for p in modules()
        if not is_test_module(p) and imports_test_module(p)
    ]
    assert not wrong, f"modules that import a test module: {wrong}"


def imports_from_tests(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for each `from tests... import name`, (module, None) for
    each `import tests...`, in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.module, alias.name) for alias in node.names]
    return [(module, name) for module, name in found if module.split(".")[0] == "tests"]


# What of tests/ each audience may import: the learner's commands reach the
# checker through its interface only (what tests/checker/__init__.py exports);
# the learner's exercises and experiments import nothing from tests/, except the
# experiments' helper that reads whether a step passed its check.
MAY_IMPORT_FROM_TESTS = {"tools": {"tests.checker"}, "steps": set()}
CHECKER_READERS_IN_STEPS = {"steps/try_it/learner.py"}


def reaches_into_tests(path: Path, allowed: set[str]) -> list[str]:
    import tests.checker

    wrong = []
    for module, name in imports_from_tests(path):
        if module not in allowed:
            wrong.append(module if name is None else f"{module}.{name}")
        elif name is not None and name not in tests.checker.__all__:
            wrong.append(f"{module}.{name}")
    return sorted(set(wrong))


def test_learner_code_uses_only_the_checkers_interface() -> None:
    wrong = []
    for room, allowed in MAY_IMPORT_FROM_TESTS.items():
        for path in sorted((REPO / room).rglob("*.py")):
            if path.relative_to(REPO).as_posix() in CHECKER_READERS_IN_STEPS:
                bad = reaches_into_tests(path, MAY_IMPORT_FROM_TESTS["tools"])
            else:
                bad = reaches_into_tests(path, allowed)
            if bad:
                wrong.append(f"{path.relative_to(REPO)}: {bad}")
    assert not wrong, "imports past the checker's interface:\n" + "\n".join(wrong)


def test_the_interface_rule_catches_a_reach_inside(tmp_path: Path) -> None:
    allowed = MAY_IMPORT_FROM_TESTS["tools"]
    assert reaches_into_tests(REPO / "tools" / "learn" / "checker.py", allowed) == []
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from tests.checker import check_step\n"
        "from tests.checker import source\n"
        "from tests.checker.engine import run_step\n"
        "import tests.fixtures\n"
    )
    assert reaches_into_tests(probe, allowed) == [
        "tests.checker.engine.run_step",
        "tests.checker.source",
        "tests.fixtures",
    ]


# Whom each part of tests/ serves (tests/__init__.py says it in words). The
# learner's checker never imports the maintainers' code: a learner without torch
# or transformers can always run it.
TESTS_AUDIENCE = {
    "__init__.py": "learner",
    "check.py": "learner",
    "checker/*": "learner",
    "specs/*/mistakes.py": "maintainers",
    "specs/*": "learner",
    "reference_gpt2.py": "learner",
    "reference_llama.py": "learner",
    "reference_mla.py": "learner",
    "reference_backward.py": "learner",
    "reference_quant.py": "learner",
    "reference_gguf.py": "learner",
    "fixtures.py": "maintainers",
    "mistakes.py": "maintainers",
    "mutation_equivalents.toml": "maintainers",
    "test_*.py": "maintainers",
    "conftest.py": "maintainers",
}


def audience(path: Path) -> str | None:
    relative = path.relative_to(REPO / "tests").as_posix()
    return next(
        (who for pattern, who in TESTS_AUDIENCE.items() if fnmatch(relative, pattern)), None
    )


def test_every_part_of_tests_has_an_audience() -> None:
    parts = [
        p
        for p in (REPO / "tests").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")
    ]
    unclaimed = [str(p.relative_to(REPO)) for p in parts if audience(p) is None]
    assert not unclaimed, f"say whom these serve in TESTS_AUDIENCE: {unclaimed}"


def test_the_learners_checker_imports_no_maintainer_code() -> None:
    wrong = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if audience(path) != "learner":
            continue
        for module, name in imports_from_tests(path):
            target = module.replace(".", "/")
            candidates = [REPO / f"{target}.py", REPO / target / "__init__.py"]
            if name is not None:
                candidates.append(REPO / target / f"{name}.py")
            if any(c.is_file() and audience(c) == "maintainers" for c in candidates):
                wrong.append(f"{path.relative_to(REPO)} imports {module}")
    assert not wrong, "the checker imports maintainers' code:\n" + "\n".join(wrong)


def test_every_room_says_who_it_is_for() -> None:
    for room in ROOMS:
        init = REPO / room / "__init__.py"
        assert init.is_file() and ast.get_docstring(ast.parse(init.read_text())), room


@pytest.mark.parametrize(
    "path", modules() + modules(".mojo"), ids=lambda p: str(p.relative_to(REPO))
)
def test_module_holds_one_idea(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{lines} lines: cut it along its seams"


def test_every_step_has_its_files() -> None:
    tasks = tomllib.loads((REPO / "pixi.toml").read_text(encoding="utf-8"))["tasks"]
    for record in steps.STEPS:
        spec = record.spec / "__init__.py"
        mistakes = record.spec / "mistakes.py"
        for path in (record.skeleton, record.solution, spec, record.hints, mistakes, record.page):
            assert path.is_file(), f"step {record.id}: {path.relative_to(REPO)} is missing"
        for kind in ("skeleton", "solution"):
            assert record.output(kind).is_file(), record.output(kind)
        assert tasks[record.task]["cmd"] == f"python -m tests.check {record.id}"


def test_no_spec_name_hides_its_mistakes_module() -> None:
    """Importing tests.specs.step_NN.mistakes sets the package's `mistakes`
    attribute: a check function of that name would be replaced by the module."""
    for record in steps.STEPS:
        tree = ast.parse((record.spec / "__init__.py").read_text(encoding="utf-8"))
        names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        names |= {
            t.id
            for n in tree.body
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        assert "mistakes" not in names, f"{record.spec_module} defines `mistakes`: rename it"


def test_no_step_file_without_a_record() -> None:
    """A new spec, skeleton or page is added to common/steps.py too."""
    numbered = {
        "tests/specs": "step_[0-9][0-9]",
        "steps": "step_[0-9][0-9].*",  # .py, or .mojo for a Mojo step
        "solutions": "solution_[0-9][0-9].*",
        "docs/src": "step_[0-9][0-9].md",
    }
    for folder, pattern in numbered.items():
        found = {int(p.stem[-2:]) for p in (REPO / folder).glob(pattern)}
        assert found == set(steps.numbers()), f"{folder}: {sorted(found ^ set(steps.numbers()))}"


def test_parse_step_accepts_what_a_learner_types() -> None:
    assert [steps.parse_step(t) for t in ("9", "09", "s09", "step_09", " S9 ")] == [9] * 5
    last = max(steps.numbers())
    for bad in ("0", str(last + 1), "x", ""):
        with pytest.raises(UsageError, match=f"steps are 01-{last:02d}"):
            steps.parse_step(bad)
