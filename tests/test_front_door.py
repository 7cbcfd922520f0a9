"""The README is the front door, and what it and the book say of the house is true.

Its first screen sets up (pixi and pip), checks step 01, generates text and runs
the tests, with the commands pixi.toml runs; CI (.ci/run) runs the README's pip
commands. Every range of step files ("step_01.py ... step_26.py") ends at the
last step in common/steps.py, the book's introduction has a row per step, the
README's Layout and each room's docstring list the modules that room holds, and
every `python -m MODULE` and `pixi run TASK` the README, CONTRIBUTING.md and the
book name exists. (tests/test_titles.py holds the README's step tables, and
tests/test_layout.py that every room's __init__.py says whom it is for.)
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from common import steps
from common.steps import REPO

README = REPO / "README.md"
CONTRIBUTING = REPO / "CONTRIBUTING.md"
BOOK = REPO / "docs" / "src"
FIRST_SCREEN = 50  # lines: what a newcomer sees before scrolling
LAST = max(steps.numbers())

# "step_01.py ... step_26.py", "s01 ... s26", "`pixi run s01` through `pixi run s26`":
# each names the last step in its group.
RANGE_WORD = r"\W+(?:\.\.\.|…|to|through)\W+"
RANGES = [
    # A Mojo step's files end in .mojo (common.steps.MOJO_STEPS).
    re.compile(rf"\bstep_01\.py{RANGE_WORD}step_(\d+)\.(?:py|mojo)"),
    re.compile(rf"\bsolution_01\.py{RANGE_WORD}solution_(\d+)\.(?:py|mojo)"),
    re.compile(rf"\bs01\b{RANGE_WORD}(?:pixi run )?s(\d+)\b"),
    re.compile(r"\b(?:the|all|every one of the) (\d+) steps\b"),
]
PYTHON_M = re.compile(r"python -m ([A-Za-z_][\w.]*)")
PIXI_RUN = re.compile(r"pixi run (?:-e [\w-]+ )?([a-z][a-z0-9-]*)\b")
# The rooms the README's Layout lists module by module, as `name` or `name.py`.
LISTED_ROOMS = ("common", "tools", "devtools")


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def documents() -> list[Path]:
    """What a reader or a contributor reads: the two top-level files and the book's pages."""
    return [README, CONTRIBUTING, *sorted(BOOK.glob("*.md"))]


def pixi_tasks() -> dict[str, str]:
    """Every pixi task, in any feature: name -> command."""
    manifest = tomllib.loads(read(REPO / "pixi.toml"))
    tables = [manifest.get("tasks", {})]
    tables += [body.get("tasks", {}) for body in manifest.get("feature", {}).values()]
    return {
        name: task if isinstance(task, str) else task["cmd"]
        for table in tables
        for name, task in table.items()
    }


def fenced_commands(text: str) -> list[str]:
    """The command lines of the text's ```bash blocks, comments and blanks left out."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        for line in block.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command and not command.startswith("#"):
                commands.append(command)
    return commands


# The first screen


def first_screen() -> str:
    return "\n".join(read(README).splitlines()[:FIRST_SCREEN])


def test_the_first_screen_sets_up_checks_generates_and_tests() -> None:
    tasks = pixi_tasks()
    check = steps.step(1)
    wanted = {
        "pixi's set-up": "pixi run warm",
        "pip's set-up": "pip install -e .",
        "the kernels' warm-up": tasks["warm"],
        "step 01's check with pixi": f"pixi run {check.task}",
        "step 01's check with pip": tasks[check.task],
        "generating text with pixi": "pixi run generate --prompt",
        "generating text with pip": f"{tasks['generate']} --prompt",
        "the tests with pixi": "pixi run test",
        "the tests with pip": tasks["test"],
        "the test extras": 'pip install -e ".[test]"',
        "Chromium, for the book's browser test": "apt-get install -y chromium",
    }
    screen = first_screen()
    missing = {what: command for what, command in wanted.items() if command not in screen}
    assert not missing, f"the README's first {FIRST_SCREEN} lines lack {missing}"


def ci_commands() -> str:
    """.ci/run's text without its comments."""
    lines = read(REPO / ".ci" / "run").splitlines()
    return "\n".join(re.sub(r"(^|\s)#.*$", "", line) for line in lines)


LEARNER_MODULES = ("tests.check", "tools.generate")  # CI runs the suite, not these


def learner_action(command: str) -> bool:
    """A command of the first screen that CI does not run: pixi's, a step's check,
    the generation (it downloads a checkpoint)."""
    module = PYTHON_M.search(command)
    return command.startswith("pixi ") or bool(module and module.group(1) in LEARNER_MODULES)


def test_ci_runs_the_readmes_commands() -> None:
    ci = ci_commands()
    readme = [c for c in fenced_commands(first_screen()) if not learner_action(c)]
    assert readme, "no pip command on the README's first screen"
    missing = [command for command in readme if command not in ci]
    assert not missing, f".ci/run does not run these commands of the README: {missing}"


# Counts and lists


def stale_ranges(text: str, last: int) -> list[str]:
    """Each range or count of steps in `text` that does not end at `last`, with its line."""
    found = []
    for pattern in RANGES:
        for match in pattern.finditer(text):
            if int(match.group(1)) != last:
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"line {line}: {match.group(0)!r}")
    return found


def test_every_range_of_steps_ends_at_the_last_step() -> None:
    stale = {
        str(path.relative_to(REPO)): found
        for path in documents()
        if (found := stale_ranges(read(path), LAST))
    }
    assert not stale, f"common/steps.py's last step is {LAST:02d}, but {stale}"


def test_a_stale_range_is_found() -> None:
    """The README holds ranges, and a count one short would be named."""
    readme = read(README)
    assert any(pattern.search(readme) for pattern in RANGES[:2]), "no step range in the README"
    assert stale_ranges(readme, LAST + 1), "the ranges' pattern finds nothing to check"
    said = f"steps/ step_01.py ... step_{LAST - 1:02d}.py, s01 through s{LAST:02d}"
    assert stale_ranges(said, LAST) == [f"line 1: 'step_01.py ... step_{LAST - 1:02d}.py'"]


def differences(found: set[str], listed: set[str], where: str) -> str:
    """What `where` lacks of `found`, and what it lists beyond it, in words."""
    said = []
    if missing := sorted(found - listed):
        said.append(f"{where} lacks {missing}")
    if extra := sorted(listed - found):
        said.append(f"{where} lists {extra}, which are not there")
    return "; ".join(said)


def test_the_introduction_has_a_row_per_step() -> None:
    rows = re.findall(r"^\| \[(\d\d)\]\(step_\1\.md\) \|", read(BOOK / "introduction.md"), re.M)
    expected = [record.id for record in steps.STEPS]
    assert rows == expected, (
        differences(set(expected), set(rows), "introduction.md's tables of steps")
        or f"introduction.md's tables list the steps out of order: {rows}"
    )


def room_modules(room: str) -> set[str]:
    """The room's modules and packages, by name."""
    folder = REPO / room
    files = {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}
    return files | {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}


def layout_entry(room: str) -> str:
    """The README Layout's lines for `room/`, continuation lines joined."""
    layout = read(README).split("## Layout", 1)[1]
    match = re.search(rf"^{room}/ +(.*(?:\n {{6,}}.*)*)", layout, re.MULTILINE)
    assert match, f"the README's Layout has no entry for {room}/"
    return " ".join(match.group(1).split())


def layout_names(room: str) -> set[str]:
    """The modules the Layout lists for `room/`: after the colon, comma-separated,
    each `name` or `name.py` and what it holds in parentheses."""
    listed = re.sub(r"\([^)]*\)", "", layout_entry(room).split(":", 1)[1])
    return {name.strip().removesuffix(".py") for name in listed.split(",") if name.strip()}


@pytest.mark.parametrize("room", LISTED_ROOMS)
def test_the_layout_lists_every_module_of_the_room(room: str) -> None:
    problem = differences(room_modules(room), layout_names(room), f"the README's Layout of {room}/")
    assert not problem, problem


def docstring_names(room: str) -> set[str]:
    """The names a room's docstring quotes (`name`)."""
    docstring = ast.get_docstring(ast.parse(read(REPO / room / "__init__.py"))) or ""
    return set(re.findall(r"`(\w+)`", docstring))


@pytest.mark.parametrize("room", LISTED_ROOMS)
def test_the_rooms_docstring_names_every_module(room: str) -> None:
    missing = room_modules(room) - docstring_names(room)
    assert not missing, f"{room}/__init__.py's docstring does not name {sorted(missing)}"


# Commands


def runs(module: str) -> bool:
    """Whether `python -m module` finds a module of this repository."""
    path = REPO.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()


def named_commands(pattern: re.Pattern[str]) -> dict[str, set[str]]:
    """Every name `pattern` captures in the documents: name -> where."""
    found: dict[str, set[str]] = {}
    for path in documents():
        for name in pattern.findall(read(path)):
            found.setdefault(name.rstrip("."), set()).add(path.name)
    return found


def test_every_module_named_runs() -> None:
    rooms = {path.parent.name for path in REPO.glob("*/__init__.py")}
    named = {
        module: where
        for module, where in named_commands(PYTHON_M).items()
        if module.split(".")[0] in rooms and module == module.lower()  # NAME: a placeholder
    }
    assert "tests.check" in named and "devtools.mutate" in named
    missing = {module: sorted(where) for module, where in named.items() if not runs(module)}
    assert not missing, f"`python -m` names modules that do not exist: {missing}"


def test_every_pixi_task_named_exists() -> None:
    tasks = pixi_tasks()
    named = named_commands(PIXI_RUN)
    assert "s01" in named and "test" in named
    missing = {task: sorted(where) for task, where in named.items() if task not in tasks}
    assert not missing, f"`pixi run` names tasks pixi.toml lacks: {missing}"
