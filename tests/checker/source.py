"""Static checks on the learner's file, run before any of it is imported."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

TODO_START = "# TODO"
TODO_END = "# END TODO"
# A Mojo skeleton's blank: the word TODO where code goes (`return TODO`, or
# alone on a line for a block of statements). Mojo has no None to leave.
MOJO_BLANK = re.compile(r"\bTODO\b")


@dataclass(frozen=True)
class Placeholder:
    line: int
    code: str
    todo: str  # the first line of the TODO comment the placeholder belongs to
    todo_line: int


class LearnerSyntaxError(Exception):
    def __init__(self, path: Path, error: SyntaxError) -> None:
        self.path, self.error = path, error
        line = (error.text or "").rstrip("\n")
        caret = " " * max((error.offset or 1) - 1, 0) + "^"
        super().__init__(f"{error.msg} (line {error.lineno})\n    {line}\n    {caret}")


def parse(path: Path) -> ast.Module:
    source = path.read_text(encoding="utf-8")
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as error:
        raise LearnerSyntaxError(path, error) from None


def todo_regions(source: str) -> list[tuple[int, int, str]]:
    """(first line, last line, title) of every `# TODO` ... `# END TODO` block."""
    regions, start, title = [], None, ""
    for number, line in enumerate(source.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith(TODO_END):
            if start is not None:
                regions.append((start, number, title))
            start = None
        elif stripped.startswith(TODO_START) and start is None:
            start, title = number, stripped.removeprefix("#").strip()
    return regions


def _is_placeholder(node: ast.AST) -> bool:
    """`x = None`, `x: T = None`, `return None`, `if None:` (and `elif None:`) and
    `raise SomeError(None)` are the skeletons' blanks.

    A None anywhere else (a keyword argument, a default) is real code.
    """
    value = None
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Return)):
        value = node.value
    elif isinstance(node, ast.If):
        value = node.test
    elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
        return len(node.exc.args) == 1 and _is_none(node.exc.args[0])
    if isinstance(value, ast.Tuple):  # `a, b = None, None`
        return bool(value.elts) and all(_is_none(v) for v in value.elts)
    return _is_none(value)


def _is_none(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def placeholders(path: Path, tree: ast.Module) -> list[Placeholder]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = []
    regions = todo_regions(source)
    for node in ast.walk(tree):
        if not _is_placeholder(node):
            continue
        for start, end, title in regions:
            if start <= node.lineno <= end:
                found.append(Placeholder(node.lineno, lines[node.lineno - 1].strip(), title, start))
    return sorted(found, key=lambda p: p.line)


def missing_names(tree: ast.Module, required: dict[str, list[str]]) -> list[str]:
    """Names from `required` ({top-level name: [methods]}) the file lacks."""
    defined: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.ImportFrom)):
            targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
            for target in targets:
                if isinstance(target, ast.Name):
                    defined[target.id] = node
            for alias in getattr(node, "names", []):
                defined[alias.asname or alias.name] = node
    missing = []
    for name, methods in required.items():
        node = defined.get(name)
        if node is None:
            missing.append(name)
            continue
        if isinstance(node, ast.ClassDef):
            own = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            missing += [f"{name}.{m}" for m in methods if m not in own]
    return missing


def mojo_placeholders(path: Path) -> list[Placeholder]:
    """The TODO blanks of a Mojo file: the word TODO in the code (not the
    comments) of a `# TODO` ... `# END TODO` block."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = []
    for start, end, title in todo_regions(source):
        for number in range(start, end + 1):
            code = lines[number - 1].split("#", 1)[0]
            if MOJO_BLANK.search(code):
                found.append(Placeholder(number, lines[number - 1].strip(), title, start))
    return found


def mojo_missing_names(path: Path, required: dict[str, list[str]]) -> list[str]:
    """Names from `required` that the Mojo file does not define at its top
    level (a `def` or a `struct`; a struct's methods are not looked for)."""
    text = path.read_text(encoding="utf-8")
    defined = set(re.findall(r"^(?:def|struct)\s+(\w+)", text, flags=re.MULTILINE))
    return [name for name in required if name not in defined]


def placeholders_in(path: Path) -> list[Placeholder] | None:
    """The file's placeholders, or None when it does not parse."""
    if path.suffix == ".mojo":
        return mojo_placeholders(path)
    try:
        tree = parse(path)
    except LearnerSyntaxError:
        return None
    return placeholders(path, tree)
