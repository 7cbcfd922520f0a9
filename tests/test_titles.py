"""A step has one title, in common/steps.py: the checker's header and
`status` read it there, and the book's heading and table of contents, pixi's
task description and the README's table say the same words."""

from __future__ import annotations

import re
import tomllib

import pytest

from common import steps
from common.steps import REPO

STEPS = steps.numbers()


def plain(text: str) -> str:
    return text.replace("`", "").strip()


def heading(number: int) -> str:
    first = (REPO / "docs" / "src" / f"step_{number:02d}.md").read_text(encoding="utf-8")
    match = re.match(rf"# Step {number:02d}: (.+)", first)
    assert match, f"step_{number:02d}.md does not open with '# Step {number:02d}: TITLE'"
    return plain(match.group(1))


def contents_entry(number: int) -> str:
    summary = (REPO / "docs" / "src" / "SUMMARY.md").read_text(encoding="utf-8")
    match = re.search(rf"\[Step {number:02d}: ([^\]]+)\]\(step_{number:02d}\.md\)", summary)
    assert match, f"SUMMARY.md has no entry for step {number:02d}"
    return plain(match.group(1))


def pixi_description(number: int) -> str:
    tasks = tomllib.loads((REPO / "pixi.toml").read_text(encoding="utf-8"))["tasks"]
    description = tasks[f"s{number:02d}"]["description"]
    prefix = f"Check steps/{steps.step(number).skeleton.name}: "
    assert description.startswith(prefix), description
    return plain(description.removeprefix(prefix))


def readme_row(number: int) -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"^\| {number:02d} \| ([^|]+) \|", readme, re.MULTILINE)
    assert match, f"the README's table has no row for step {number:02d}"
    return plain(match.group(1))


@pytest.mark.parametrize("number", STEPS)
def test_one_title_everywhere(number: int) -> None:
    title = steps.step(number).title
    said = {
        "the book's heading": heading(number),
        "the book's contents": contents_entry(number),
        "pixi's task": pixi_description(number),
        "the README": readme_row(number),
    }
    differ = {where: text for where, text in said.items() if text != title}
    assert not differ, f"step {number:02d} is titled {title!r} in common/steps.py, but {differ}"
