"""The pages and the skeletons teach; they do not dictate the learner's lines.

A learner line is a line of a solution that its skeleton lacks (what the
learner writes), or the expression on the right of such a line's `=` when it
is long enough to be an answer on its own. None may appear in a step's page
outside a folded block (`<details>`), nor in the skeleton's comments.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from common import steps
from common.steps import REPO

PAGES = REPO / "docs" / "src"
STEPS = steps.numbers()


MIN_LINE = 12  # shorter lines (`return x`, `x = x + y`) say nothing a page must hide
MIN_EXPRESSION = 16
FOLD = re.compile(r"<details\b.*?</details>", re.DOTALL | re.IGNORECASE)


def squeeze(text: str) -> str:
    """Spacing-insensitive form: no whitespace, no backticks."""
    return re.sub(r"[\s`]+", "", text)


def code_lines(path: Path) -> set[str]:
    """The file's code lines, stripped, comments and docstring text left out."""
    text = path.read_text(encoding="utf-8")
    comment_or_string = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.STRING and token.start[0] != token.end[0]:
            comment_or_string.update(range(token.start[0], token.end[0] + 1))
    lines = set()
    for number, line in enumerate(text.splitlines(), start=1):
        code = (
            line.split("#", 1)[0].strip()
            if "#" in line and "'" not in line and '"' not in line
            else line.strip()
        )
        if number in comment_or_string or not code or code.startswith("#"):
            continue
        lines.add(code)
    return lines


def learner_lines(number: int) -> set[str]:
    """What the learner writes in step `number`: lines and long right-hand sides."""
    written = code_lines(steps.step(number).solution) - code_lines(steps.step(number).skeleton)
    answers = set()
    for line in written:
        if len(line) >= MIN_LINE:
            answers.add(line)
        _, equals, right = line.partition(" = ")
        if equals and len(right) >= MIN_EXPRESSION:
            answers.add(right)
    return answers


INCLUDE = re.compile(r"\{\{#include\s+([^}\s:]+)(?::([^}\s]+))?\s*\}\}")


def included(page: Path, match: re.Match[str]) -> str:
    """What an mdBook include puts in the page: the file, or one `ANCHOR` of it."""
    text = (page.parent / match.group(1)).read_text(encoding="utf-8")
    anchor = match.group(2)
    if anchor and not anchor[0].isdigit():
        found = re.search(
            rf"ANCHOR: {re.escape(anchor)}\n(.*?)ANCHOR_END: {re.escape(anchor)}", text, re.DOTALL
        )
        text = found.group(1) if found else ""
    return text


def unfolded(page: Path) -> str:
    """The page as a reader sees it before opening any fold, includes expanded."""
    text = FOLD.sub("", page.read_text(encoding="utf-8"))
    return INCLUDE.sub(lambda match: included(page, match), text)


def skeleton_comments(number: int) -> str:
    text = steps.step(number).skeleton.read_text(encoding="utf-8")
    comments = [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT
    ]
    return "\n".join(comments)


def leaks(answers: set[str], text: str) -> list[str]:
    squeezed = squeeze(text)
    return sorted(answer for answer in answers if squeeze(answer) in squeezed)


@pytest.mark.parametrize("number", STEPS)
def test_page_folds_the_learner_lines(number: int) -> None:
    page = PAGES / f"step_{number:02d}.md"
    found = leaks(learner_lines(number), unfolded(page))
    assert not found, f"{page.name} shows the learner's lines outside a <details> fold: {found}"


@pytest.mark.parametrize("number", STEPS)
def test_skeleton_comments_do_not_give_the_lines(number: int) -> None:
    found = leaks(learner_lines(number), skeleton_comments(number))
    assert not found, f"steps/step_{number:02d}.py's comments give the learner's lines: {found}"


# How a page writes the learner's expressions in its own notation, for the steps
# whose pages do math with the code's tensors: each solution name as the page's
# symbol. A giveaway in that notation is the learner's line all the same.
NOTATION: dict[int, dict[str, str]] = {
    25: {},
    26: {
        "probs": "P",
        "grad_probs": "dP",
        "grad_scores": "dS",
        "grad_output": "dO",
        "grad_value": "dV",
        "grad_query": "dQ",
        "grad_key": "dK",
        "query": "Q",
        "key": "K",
        "value": "V",
        "inner": "rowsum(dP * P)",
        "grad_x": "dx",
        "grad_weight": "dW",
        "grad_y": "dy",
        "flat_grad": "dy",
        "flat_x": "x",
        "weight": "W",
    },
}
MIN_WRITTEN = 3  # "dSK": short, but nothing else in a page squeezes to it


def written(expression: str, names: dict[str, str], *, words: bool) -> str:
    """`expression` as a page writes it: in math ("probs.T @ grad_output" as
    "Pᵀ dO") or in words ("context @ value_half.transpose(-1, -2)" as "context
    times value_half transposed"), squeezed."""
    text = re.sub(r"\b[A-Za-z_]\w*\b", lambda name: names.get(name[0], name[0]), expression)
    text = re.sub(r"\.transpose\(-1,\s*-2\)|\.T\b", " transposed" if words else "ᵀ", text)
    return squeeze(text.replace("@", " times " if words else " ").replace("×", "*"))


def written_leaks(number: int, text: str) -> list[str]:
    names = NOTATION.get(number)
    if names is None:
        return []
    page = squeeze(text.replace("×", "*"))
    found = set()
    for answer in learner_lines(number):
        for words in (False, True):
            form = written(answer, names, words=words)
            if len(form) >= MIN_WRITTEN and form != squeeze(answer) and form in page:
                found.add(f"{answer} (as {form})")
    return sorted(found)


@pytest.mark.parametrize("number", sorted(NOTATION))
def test_page_folds_the_learner_lines_in_its_notation(number: int) -> None:
    page = PAGES / f"step_{number:02d}.md"
    found = written_leaks(number, unfolded(page)) + written_leaks(number, skeleton_comments(number))
    assert not found, f"{page.name} or its skeleton writes the learner's lines as math: {found}"


def test_a_line_written_as_math_or_words_is_found() -> None:
    names = NOTATION[26]
    assert written("probs.T @ grad_output", names, words=False) == "PᵀdO"
    assert written("grad_scores.T @ query", names, words=False) in squeeze("dK = dSᵀ Q × scale")
    assert written("context @ value_half.transpose(-1, -2)", {}, words=True) in squeeze(
        "`context` times `value_half` transposed"
    )


@pytest.mark.parametrize("number", STEPS)
def test_page_ends_with_questions_to_try(number: int) -> None:
    text = (PAGES / f"step_{number:02d}.md").read_text(encoding="utf-8")
    assert re.search(r"^## Try it", text, re.MULTILINE), "no `## Try it` section"
    section = text.split("## Try it", 1)[1]
    assert "<details" in section, "the Try it answers are not folded"


def test_learner_lines_are_found() -> None:
    """The test above has something to look for in every step."""
    for number in STEPS:
        assert learner_lines(number), number
