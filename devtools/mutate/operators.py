"""Making mutants: every single change to the code the learner writes in a solution.

The learner writes only the solution's lines that the skeleton leaves as
`# TODO` blocks (learner_lines); a change elsewhere would test nothing a
learner can get wrong. mutants() walks the solution's AST, makes each change
the tables below allow to one node inside those lines, and keeps the mutants
that parse and differ from the solution; sample() picks a fixed few.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

from common import steps
from common.steps import REPO

# What each operator becomes: the plausible slip, not every other operator.
BINARY = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.MatMult: ast.Mult,
}
NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult)
COMPARE = {
    ast.Lt: (ast.LtE, ast.Gt),
    ast.LtE: (ast.Lt, ast.GtE),
    ast.Gt: (ast.GtE, ast.Lt),
    ast.GtE: (ast.Gt, ast.LtE),
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
}
BOOLEAN = {ast.And: ast.Or, ast.Or: ast.And}
AXIS_KEYWORDS = {"axis", "dim", "axes", "dims", "dim0", "dim1", "start_dim", "end_dim"}


@dataclass(frozen=True)
class Mutant:
    """One changed copy of a step's solution, and where and how it differs."""

    step: int
    line: int  # in the solution
    column: int
    operator: str
    key: str  # "function: original -> mutated", stable while the code is
    source: str  # the whole mutated file

    def describe(self) -> str:
        """`solutions/solution_NN.py:LINE: [operator] key`, one line."""
        solution = steps.step(self.step).solution.relative_to(REPO)
        return f"{solution}:{self.line}: [{self.operator}] {self.key}"


# -- where the learner writes ------------------------------------------------


def learner_lines(number: int) -> set[int]:
    """Line numbers of the solution that the skeleton's TODO blocks stand for.

    Outside its blocks a skeleton equals its solution (tests/test_skeletons.py),
    so the lines just before and after a block match a solution line each,
    and the solution's lines between those two are the learner's."""
    from tests.checker import todo_regions

    skeleton = steps.step(number).skeleton.read_text(encoding="utf-8")
    solution = steps.step(number).solution.read_text(encoding="utf-8")
    a, b = skeleton.splitlines(), solution.splitlines()
    same: dict[int, int] = {}  # 0-based skeleton line -> 0-based solution line
    for tag, i1, i2, j1, _ in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            same.update({i1 + k: j1 + k for k in range(i2 - i1)})
    lines: set[int] = set()
    for start, end, _ in todo_regions(skeleton):
        before = max((i for i in same if i < start - 1), default=None)
        after = min((i for i in same if i > end - 1), default=None)
        first = 0 if before is None else same[before] + 1
        last = len(b) if after is None else same[after]
        lines.update(range(first + 1, last + 1))  # 1-based
    return lines


# -- making mutants ----------------------------------------------------------


def _expression(node: ast.AST) -> str:
    """Source for a replacement expression, parenthesized unless atomic."""
    text = ast.unparse(node)
    atomic = (ast.Name, ast.Constant, ast.Attribute, ast.Call, ast.Subscript)
    return text if isinstance(node, atomic) else f"({text})"


def _changes(node: ast.AST, parent: ast.AST | None) -> Iterator[tuple[str, str]]:
    """(operator, replacement source) for every single change to `node` itself."""
    if isinstance(node, ast.BinOp):
        if type(node.op) in BINARY:
            yield (
                "arithmetic",
                _expression(ast.BinOp(node.left, BINARY[type(node.op)](), node.right)),
            )
        if isinstance(node.op, NON_COMMUTATIVE):
            yield "swap", _expression(ast.BinOp(node.right, node.op, node.left))
    elif isinstance(node, ast.AugAssign) and type(node.op) in BINARY:
        yield (
            "arithmetic",
            ast.unparse(ast.AugAssign(node.target, BINARY[type(node.op)](), node.value)),
        )
    elif isinstance(node, ast.Compare):
        for index, op in enumerate(node.ops):
            for other in COMPARE.get(type(op), ()):
                ops = list(node.ops)
                ops[index] = other()
                yield "comparison", _expression(ast.Compare(node.left, ops, node.comparators))
    elif isinstance(node, ast.BoolOp):
        yield "boolean", _expression(ast.BoolOp(BOOLEAN[type(node.op)](), node.values))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        yield ("sign" if isinstance(node.op, ast.USub) else "boolean"), _expression(node.operand)
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield "boolean", repr(not node.value)
    elif isinstance(node, ast.Constant) and isinstance(node.value, int):
        for value in (node.value + 1, node.value - 1):
            yield "constant", _expression(ast.Constant(value))
        if node.value and _is_index(node, parent):
            yield "sign", _expression(ast.Constant(-node.value))
    elif isinstance(node, ast.Constant) and isinstance(node.value, float):
        for value in {node.value * 2, 0.0} - {node.value}:
            yield "constant", _expression(ast.Constant(value))
    elif isinstance(node, ast.Call):
        for index, keyword in enumerate(node.keywords):
            if keyword.arg is not None:
                rest = node.keywords[:index] + node.keywords[index + 1 :]
                yield "keyword dropped", ast.unparse(ast.Call(node.func, node.args, rest))
        plain = [arg for arg in node.args if not isinstance(arg, ast.Starred)]
        for arg in plain[:2]:
            yield "call unwrapped", _expression(arg)
        for index in range(len(plain) - 1):
            args = list(node.args)
            args[index], args[index + 1] = args[index + 1], args[index]
            yield "swap", ast.unparse(ast.Call(node.func, args, node.keywords))
    if isinstance(node, ast.stmt) and not isinstance(node, ast.Pass):
        yield "statement dropped", "pass"


def _is_index(node: ast.AST, parent: ast.AST | None) -> bool:
    """An integer used as an index or an axis, where a sign flip is plausible."""
    if isinstance(parent, (ast.Subscript, ast.Slice, ast.Tuple)):
        return True
    return isinstance(parent, ast.keyword) and parent.arg in AXIS_KEYWORDS


def _skipped(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Annotations, docstrings and f-string parts: nothing a mistake changes."""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.JoinedStr):
            return True
        if isinstance(parent, (ast.arg, ast.FunctionDef)) and child in (
            getattr(parent, "annotation", None),
            getattr(parent, "returns", None),
        ):
            return True
        if isinstance(parent, ast.AnnAssign) and child is parent.annotation:
            return True
        child, parent = parent, parents.get(parent)
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def _function_of(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    """`Class.method` around `node`, for its key: line numbers move, names rarely do."""
    names = []
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
    return ".".join(reversed(names)) or "<module>"


def _offsets(source: bytes) -> list[int]:
    """The byte offset where each line starts: AST columns count bytes, not characters."""
    starts = [0]
    for index, byte in enumerate(source):
        if byte == 10:
            starts.append(index + 1)
    return starts


def _squeeze(text: str, limit: int = 120) -> str:
    """One line of at most `limit` characters, for a mutant's key."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _in_learner_lines(node: ast.AST, lines: set[int]) -> bool:
    """Whether all of `node` lies in the learner's lines (a node without lines does not)."""
    if not hasattr(node, "lineno") or node.end_lineno is None:
        return False
    return all(n in lines for n in range(node.lineno, node.end_lineno + 1))


def _changed_source(
    raw: bytes, span: tuple[int, int], replacement: str, original: str
) -> str | None:
    """The file with bytes `span` replaced, or None where that does not parse
    or parses to the same AST (`x` for `(x)`: nothing a checker could catch)."""
    begin, end = span
    source = (raw[:begin] + replacement.encode() + raw[end:]).decode()
    try:
        return None if ast.dump(ast.parse(source)) == original else source
    except SyntaxError:
        return None


def file_order(mutant: Mutant) -> tuple[int, int, str]:
    """Sort key: line, column, then key (several changes start at one node)."""
    return mutant.line, mutant.column, mutant.key


def _numbered(ordered: list[Mutant]) -> list[Mutant]:
    """Keys made unique: the same change twice in one function (`-top_k` twice
    on a line) gets ` (#2)`, so the equivalents file can name each one."""
    seen: dict[str, int] = {}
    numbered = []
    for mutant in ordered:
        seen[mutant.key] = seen.get(mutant.key, 0) + 1
        if seen[mutant.key] > 1:
            mutant = dataclasses.replace(mutant, key=f"{mutant.key} (#{seen[mutant.key]})")
        numbered.append(mutant)
    return numbered


def mutants(number: int) -> list[Mutant]:
    """Every single-change mutant of the solution's learner lines, in file order."""
    text = steps.step(number).solution.read_text(encoding="utf-8")
    if steps.step(number).suffix == ".mojo":
        return text_mutants(number, text)
    raw = text.encode()
    starts = _offsets(raw)
    tree = ast.parse(text)
    original = ast.dump(tree)
    lines = learner_lines(number)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: dict[str, Mutant] = {}  # by source: two changes with one result are one mutant
    for node in ast.walk(tree):
        if not _in_learner_lines(node, lines) or _skipped(node, parents):
            continue
        span = (
            starts[node.lineno - 1] + node.col_offset,
            starts[node.end_lineno - 1] + node.end_col_offset,
        )
        segment = raw[span[0] : span[1]].decode()
        for operator, replacement in _changes(node, parents.get(node)):
            source = _changed_source(raw, span, replacement, original)
            if source is None:
                continue
            key = f"{_function_of(node, parents)}: {_squeeze(segment)} -> {_squeeze(replacement)}"
            found.setdefault(
                source, Mutant(number, node.lineno, node.col_offset, operator, key, source)
            )
    return _numbered(sorted(found.values(), key=file_order))


def text_mutants(number: int, text: str) -> list[Mutant]:
    """A Mojo solution's mutants, made on its text (devtools/mutate/text.py)."""
    from devtools.mutate.text import line_mutants

    found: dict[str, Mutant] = {}
    for line, column, operator, key, source in line_mutants(
        text.splitlines(), learner_lines(number)
    ):
        found.setdefault(source, Mutant(number, line, column, operator, key, source))
    return _numbered(sorted(found.values(), key=file_order))


def sample(found: list[Mutant], count: int) -> list[Mutant]:
    """`count` mutants chosen by a hash of their key: the same ones every run."""
    ranked = sorted(found, key=lambda m: hashlib.sha256(m.key.encode()).hexdigest())
    return sorted(ranked[:count], key=file_order)
