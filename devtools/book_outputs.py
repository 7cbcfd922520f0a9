"""Put the checker's real output in the book: `python -m devtools.book_outputs`.

For every step with a page docs/src/step_NN.md, run the checker on the
untouched skeleton (steps/step_NN.py) and on the reference solution
(solutions/solution_NN.py), and write what it prints to
docs/src/outputs/step_NN-skeleton.txt and step_NN-solution.txt. The page
includes both files, so the book never shows output the checker no longer
prints; tests/test_book_outputs.py fails when a committed file is stale.

The checker runs in this process, with CHECK_PLAIN=1 (no colour, no timings, no
kernel-cache notice), so the output is the same on every run and machine.

    python -m devtools.book_outputs              rewrite docs/src/outputs/
    python -m devtools.book_outputs --dest DIR   write into DIR instead (for the test)
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from common import max_runtime, steps
from common.cli import ArgumentParser, Failure, exit_status
from common.steps import REPO

PAGES = REPO / "docs" / "src"
OUTPUTS = PAGES / "outputs"
COMMAND = "python -m devtools.book_outputs"
KINDS = {"skeleton": 1, "solution": 0}  # the checker's expected exit status for each
OUTPUT_FILE = re.compile(r"(?:step_\d\d-(?:skeleton|solution)|example-mistake)\.txt")
# The failing check the introduction shows: a learner's likely mistake from
# tests/mistakes.py, run through the real checker.
EXAMPLE_MISTAKE = (2, "mask inverted (exclude=False)")


class OutputError(Failure):
    """The outputs cannot be generated as they are meant to be."""


def file_name(number: int, kind: str) -> str:
    return steps.step(number).output(kind).name


@contextlib.contextmanager
def plain_checker() -> Iterator[None]:
    """CHECK_PLAIN=1 for the checker while inside; the old value afterwards."""
    before = os.environ.get("CHECK_PLAIN")
    os.environ["CHECK_PLAIN"] = "1"
    # MAX logs the first eager op a process compiles on the fly, with its
    # timing: whether it does depends on the machine's kernel cache, not on
    # the checker (step 18's index ops, for one, were compiled that way).
    eager_log = logging.getLogger("max._eager_policy")
    level = eager_log.level
    eager_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        eager_log.setLevel(level)
        if before is None:
            del os.environ["CHECK_PLAIN"]
        else:
            os.environ["CHECK_PLAIN"] = before


def checker_output(number: int, kind: str) -> str:
    """What `python -m tests.check NN [--solutions]` prints, with CHECK_PLAIN=1."""
    from tests import check
    from tools.learn.skeletons import every_block_blank

    record = steps.step(number)
    if kind == "skeleton" and not every_block_blank(record.skeleton):
        raise OutputError(
            f"{record.skeleton.relative_to(REPO)} is not an untouched skeleton (a TODO block has no "
            f"None left): `python -m tools.learn reset {record.id}` restores it."
        )
    argv = [f"{number:02d}"] + (["--solutions"] if kind == "solution" else [])
    buffer = io.StringIO()
    with plain_checker(), contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        status = check.main(argv)
    text = buffer.getvalue()
    if status != KINDS[kind]:
        raise OutputError(
            f"the checker exited {status} on the {kind} of step {number:02d}, "
            f"expected {KINDS[kind]}:\n{text}"
        )
    return text


def example_mistake_output() -> str:
    """The checker's output on the solution with EXAMPLE_MISTAKE made, as if it
    were the learner's steps/step_NN.py."""
    from tests import check
    from tests.mistakes import apply, mistakes

    number, name = EXAMPLE_MISTAKE
    mutant = next(m for m in mistakes(number) if m.name == name)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / steps.step(number).skeleton.name
        path.write_text(apply(mutant, steps.step(number).solution.read_text()))
        buffer = io.StringIO()
        with plain_checker(), contextlib.redirect_stdout(buffer):
            check.main([f"{number:02d}", "--file", str(path)])
    return buffer.getvalue().replace(
        str(path.resolve()), str(steps.step(number).skeleton.relative_to(REPO))
    )


def generate(numbers: list[int] | None = None) -> dict[str, str]:
    """File name -> content, for every output file the book includes."""
    files = {}
    for number in steps.numbers() if numbers is None else numbers:
        for kind in KINDS:
            files[file_name(number, kind)] = checker_output(number, kind)
    if numbers is None:
        files["example-mistake.txt"] = example_mistake_output()
    return files


def write(files: dict[str, str], dest: Path) -> None:
    """Write the files into dest, removing output files nothing generates any more."""
    dest.mkdir(parents=True, exist_ok=True)
    for stale in dest.iterdir():
        if OUTPUT_FILE.fullmatch(stale.name) and stale.name not in files:
            stale.unlink()
    for name, text in files.items():
        path = dest / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8", newline="\n")


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=OUTPUTS, help="folder to write into")

    def run() -> None:
        args = parser.parse_args(argv)
        max_runtime.prepare()
        files = generate()
        write(files, args.dest)
        shown = args.dest.resolve()
        with contextlib.suppress(ValueError):
            shown = shown.relative_to(REPO)
        print(f"Wrote {len(files)} checker outputs to {shown}/.")

    return exit_status(run)


if __name__ == "__main__":
    sys.exit(main())
