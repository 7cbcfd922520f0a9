"""Skeletons and solutions cannot drift apart: a skeleton is its solution with
only the `# TODO` ... `# END TODO` blocks (and the module docstring) changed."""

from __future__ import annotations

import ast
import difflib
from pathlib import Path

import pytest

from common import steps
from tests.checker import source

STEPS = steps.numbers()


def body_lines(path: Path) -> tuple[list[str], int]:
    """The file's lines after its module docstring, and how many were cut."""
    text = path.read_text()
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
    blanks = {p.todo_line for p in source.placeholders(path, ast.parse(path.read_text()))}
    for start, _, title in source.todo_regions(path.read_text()):
        assert start in blanks, f"step_{number:02d}.py:{start}: {title!r} has no None placeholder"


@pytest.mark.parametrize("number", STEPS)
def test_skeleton_says_how_to_run_its_check(number: int) -> None:
    docstring = ast.get_docstring(ast.parse(steps.step(number).skeleton.read_text()))
    assert (
        f"pixi run s{number:02d}" in docstring
        and f"python -m tests.check {number:02d}" in docstring
    )
