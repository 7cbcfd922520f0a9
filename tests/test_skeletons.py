"""Skeletons and solutions cannot drift apart: a skeleton is its solution with
only the `# TODO` ... `# END TODO` blocks (and the module docstring) changed.
Neither a skeleton nor a page's main text says, with its arguments, a MAX call
the learner writes."""

from __future__ import annotations

import ast
import difflib
import re
from pathlib import Path

import pytest

from common import steps
from common.steps import REPO
from tests.checker import source
from tests.test_pages_teach import code_lines, unfolded

STEPS = steps.numbers()


def mojo_docstring(text: str) -> tuple[str, int]:
    """A Mojo file's module docstring (the triple-quoted string it opens
    with) and the line it ends on; ("", 0) without one."""
    match = re.match(r'\s*"""(.*?)"""', text, re.DOTALL)
    return (match.group(1), text[: match.end()].count("\n") + 1) if match else ("", 0)


def docstring(path: Path) -> str:
    text = path.read_text()
    if path.suffix == ".mojo":
        return mojo_docstring(text)[0]
    return ast.get_docstring(ast.parse(text)) or ""


def body_lines(path: Path) -> tuple[list[str], int]:
    """The file's lines after its module docstring, and how many were cut."""
    text = path.read_text()
    if path.suffix == ".mojo":
        skip = mojo_docstring(text)[1]
        return text.splitlines()[skip:], skip
    tree = ast.parse(text)
    first = tree.body[0]
    skip = (
        first.end_lineno
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
        else 0
    )
    return text.splitlines()[skip:], skip


@pytest.mark.parametrize("number", STEPS)
def test_skeleton_differs_only_inside_todo_blocks(number: int) -> None:
    skeleton_path = steps.step(number).skeleton
    skeleton, offset = body_lines(skeleton_path)
    solution, _ = body_lines(steps.step(number).solution)
    regions = source.todo_regions(skeleton_path.read_text())
    assert regions, "a skeleton needs at least one TODO block"

    def inside(line: int) -> bool:  # 1-based line number in the whole file
        return any(start <= line <= end for start, end, _ in regions)

    matcher = difflib.SequenceMatcher(a=skeleton, b=solution, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        # Changed skeleton lines must all sit in a block; a pure insertion on the
        # solution side must sit right after a block's line.
        lines = range(i1 + 1 + offset, i2 + 1 + offset) if i2 > i1 else [i1 + offset]
        outside = [n for n in lines if not inside(n)]
        assert not outside, (
            f"step_{number:02d}.py differs from solution_{number:02d}.py outside TODO blocks "
            f"at line {outside[0]}:\n" + "\n".join(skeleton[i1:i2] + ["---"] + solution[j1:j2])
        )


@pytest.mark.parametrize("number", STEPS)
def test_every_todo_block_has_a_placeholder(number: int) -> None:
    path = steps.step(number).skeleton
    blanks = {p.todo_line for p in source.placeholders_in(path) or []}
    for start, _, title in source.todo_regions(path.read_text()):
        assert start in blanks, f"{path.name}:{start}: {title!r} has no placeholder"


@pytest.mark.parametrize("number", STEPS)
def test_skeleton_says_how_to_run_its_check(number: int) -> None:
    said = docstring(steps.step(number).skeleton)
    assert f"pixi run s{number:02d}" in said and f"python -m tests.check {number:02d}" in said


def max_names(tree: ast.Module) -> set[str]:
    """The names a module binds by importing from MAX (F, Tensor, Linear, ...)."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "max":
            found.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(
                alias.asname or alias.name for alias in node.names if alias.name.startswith("max")
            )
    return found


def dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := dotted(node.value)):
        return f"{base}.{node.attr}"
    return None


def max_calls_written(number: int) -> list[tuple[str, ast.Call]]:
    """(name, call) for each MAX call with arguments that the solution makes on
    the lines the learner writes (the lines its skeleton lacks)."""
    path = steps.step(number).solution
    if path.suffix == ".mojo":  # no Python: no MAX call of the Python API to write
        return []
    text = path.read_text()
    tree = ast.parse(text)
    ours = max_names(tree)
    written = code_lines(path) - code_lines(steps.step(number).skeleton)
    lines = text.splitlines()
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not (node.args or node.keywords):
            continue
        if lines[node.lineno - 1].strip() not in written:
            continue
        name = dotted(node.func)
        if name and name.split(".")[0] in ours:
            calls.append((name, node))
    return calls


def max_calls_to_write(number: int) -> set[str]:
    """The names of the MAX functions of `max_calls_written`."""
    return {name for name, _ in max_calls_written(number)}


def skeleton_prose(number: int) -> str:
    """What the skeleton says in words: its comments and docstrings."""
    path = steps.step(number).skeleton
    comments = [line.strip() for line in path.read_text().splitlines() if line.strip()[:1] == "#"]
    if path.suffix == ".mojo":
        return "\n".join([*comments, docstring(path)])
    tree = ast.parse(path.read_text())
    docstrings = [
        ast.get_docstring(node) or ""
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
    ]
    return "\n".join(comments + docstrings)


def spelled_out_calls(calls: set[str], prose: str) -> list[str]:
    """Each call of `calls` that `prose` writes with its arguments ("F.x(a, b=...)");
    a bare name ("F.x") or an elided call ("F.x(...)") says which operation, not how."""
    found = []
    for call in sorted(calls):
        pattern = re.escape(call) + r"\(\s*(?!\.\.\.\s*\))(?!\))"
        if re.search(pattern, prose):
            found.append(call)
    return found


@pytest.mark.parametrize("number", STEPS)
def test_skeletons_say_what_to_compute_not_the_call(number: int) -> None:
    found = spelled_out_calls(max_calls_to_write(number), skeleton_prose(number))
    assert not found, (
        f"steps/step_{number:02d}.py spells out {found} with arguments, as its solution calls "
        "them: say what to compute; the call arrives at hint rung 2"
    )


def test_a_spelled_out_call_is_found() -> None:
    calls = {"F.layer_norm", "Tensor.arange"}
    assert spelled_out_calls(calls, "# Hint: F.layer_norm(x, gamma=..., beta=...)") == [
        "F.layer_norm"
    ]
    assert spelled_out_calls(calls, "# normalize with F.layer_norm, over the last axis") == []
    assert spelled_out_calls(calls, "# F.layer_norm(...) and Tensor.arange()") == []


def worked_out_keywords(number: int) -> set[str]:
    """The keyword arguments of the learner's MAX calls whose value the learner
    works out (an expression or a name, not a literal: `num_lower=below`)."""
    return {
        keyword.arg
        for _, call in max_calls_written(number)
        for keyword in call.keywords
        if keyword.arg and not isinstance(keyword.value, ast.Constant)
    }


def stated_arguments(number: int, text: str) -> list[str]:
    """Where `text` gives what goes into the learner's MAX calls in words: a
    worked-out keyword's value ("`num_upper` is `p`"), or a call and what it is
    applied to ("`F.exp` of the pair indices")."""
    found = []
    for keyword in sorted(worked_out_keywords(number)):
        found += re.findall(rf"`{re.escape(keyword)}`\W{{0,2}}\s+is\s+`[^`]*`", text)
    for call in sorted(max_calls_to_write(number)):
        found += re.findall(rf"`{re.escape(call)}`\s+of\s+\w+(?:\s+\w+){{0,3}}", text)
    return found


@pytest.mark.parametrize("number", STEPS)
def test_pages_do_not_state_the_arguments(number: int) -> None:
    page = REPO / "docs" / "src" / f"step_{number:02d}.md"
    found = stated_arguments(number, unfolded(page))
    assert not found, (
        f"{page.name} says in words what goes into the learner's calls, outside a fold: "
        f"{found}; derive it and leave the deciding to the learner (the hint's later rungs "
        "or a <details> fold may say it)"
    )


def test_stated_arguments_are_found() -> None:
    """Step 22's band widths and step 19's speeds, as their pages once put them."""
    widths = "- **`num_upper` is `p`**, as in step 02; `num_lower` is `window - 1 - p`."
    assert stated_arguments(22, widths) == ["`num_lower` is `window - 1 - p`", "`num_upper` is `p`"]
    speeds = "So the speeds are `F.exp` of the pair indices times one constant."
    assert stated_arguments(19, speeds) == ["`F.exp` of the pair indices times"]
    assert stated_arguments(19, "`F.exp(x)`: `e ** x`, element by element.") == []


def test_placeholders_take_the_shape_of_the_code_needed(tmp_path: Path) -> None:
    """A blank can be a value, a condition or an error's message; a None that is
    real code (a default, a keyword argument) is not a blank."""
    path = tmp_path / "step.py"
    path.write_text(
        "def f(x, y=None):\n"
        "    # TODO: fill in\n"
        "    if None:\n"
        "        x = g(x, key=None)\n"
        "    elif None:\n"
        "        raise ValueError(None)\n"
        "    raise ValueError('done')\n"
        "    return None\n"
        "    # END TODO\n"
    )
    found = [blank.line for blank in source.placeholders(path, ast.parse(path.read_text()))]
    assert found == [3, 5, 6, 8]
