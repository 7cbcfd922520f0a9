"""Mutation testing of the checkers: `python -m devtools.mutate [NN ...]` (pixi run mutate).

A checker earns trust by failing on wrong code. For each step this makes every
small change a learner could plausibly get wrong in the code the learner
writes (the solution's lines that the skeleton leaves as `# TODO` blocks), one
change at a time, and runs the step's checker on each mutated copy in a
scratch folder (solutions/ and steps/ are never written). A mutant the
checker fails is killed; one it passes survives. Survivors that compute the
same thing as the solution on every valid input are listed, with the reason,
in tests/mutation_equivalents.toml; any other survivor fails the run.

Changes (OPERATORS): an arithmetic, comparison or boolean operator swapped,
an integer constant nudged by one, a float constant doubled or zeroed, the
sign of an index or axis flipped, a boolean flag flipped, a keyword argument
dropped, a call replaced by one of its arguments, two arguments (or the
operands of a non-commutative operator) swapped, a statement dropped.

    python -m devtools.mutate              every step (about 40 minutes on 2 busy cores)
    python -m devtools.mutate 14 15        some steps
    python -m devtools.mutate --sample 4   4 mutants per step, always the same ones (CI)
    python -m devtools.mutate --list 14    print the mutants, run nothing
    python -m devtools.mutate --times      each solution's slowest check (Step.typical)

Exit status: 0 no survivor outside the equivalents file, 1 otherwise, 2 usage error.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import hashlib
import itertools
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from common import max_runtime, steps
from common.cli import ArgumentParser, Failure, exit_status
from common.steps import REPO

EQUIVALENTS = REPO / "tests" / "mutation_equivalents.toml"

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
    step: int
    line: int  # in the solution
    column: int
    operator: str
    key: str  # "function: original -> mutated", stable while the code is
    source: str  # the whole mutated file

    def describe(self) -> str:
        return f"{steps.step(self.step).solution.relative_to(REPO)}:{self.line}: [{self.operator}] {self.key}"


# -- where the learner writes ------------------------------------------------


def learner_lines(number: int) -> set[int]:
    """Line numbers of the solution that the skeleton's TODO blocks stand for.

    Outside its blocks a skeleton equals its solution (tests/test_skeletons.py),
    so the lines just before and after a block match a solution line each,
    and the solution's lines between those two are the learner's."""
    from tests.checker.source import todo_regions

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
    names = []
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
    return ".".join(reversed(names)) or "<module>"


def _offsets(source: bytes) -> list[int]:
    starts = [0]
    for index, byte in enumerate(source):
        if byte == 10:
            starts.append(index + 1)
    return starts


def _squeeze(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def mutants(number: int) -> list[Mutant]:
    """Every single-change mutant of the solution's learner lines, in file order."""
    path = steps.step(number).solution
    text = path.read_text(encoding="utf-8")
    raw = text.encode()
    starts = _offsets(raw)
    tree = ast.parse(text)
    original = ast.dump(tree)
    lines = learner_lines(number)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: dict[str, Mutant] = {}
    for node in ast.walk(tree):
        if not hasattr(node, "lineno") or node.end_lineno is None:
            continue
        if not all(n in lines for n in range(node.lineno, node.end_lineno + 1)):
            continue
        if _skipped(node, parents):
            continue
        begin = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset
        segment = raw[begin:end].decode()
        for operator, replacement in _changes(node, parents.get(node)):
            source = (raw[:begin] + replacement.encode() + raw[end:]).decode()
            try:
                if ast.dump(ast.parse(source)) == original:
                    continue
            except SyntaxError:
                continue
            key = f"{_function_of(node, parents)}: {_squeeze(segment)} -> {_squeeze(replacement)}"
            found.setdefault(
                source, Mutant(number, node.lineno, node.col_offset, operator, key, source)
            )
    ordered = sorted(found.values(), key=lambda m: (m.line, m.column, m.key))
    # The same change twice in one function (`-top_k` twice on a line): number them.
    seen: dict[str, int] = {}
    for index, mutant in enumerate(ordered):
        seen[mutant.key] = seen.get(mutant.key, 0) + 1
        if seen[mutant.key] > 1:
            ordered[index] = dataclasses.replace(mutant, key=f"{mutant.key} (#{seen[mutant.key]})")
    return ordered


def sample(found: list[Mutant], count: int) -> list[Mutant]:
    """`count` mutants chosen by a hash of their key: the same ones every run."""
    ranked = sorted(found, key=lambda m: hashlib.sha256(m.key.encode()).hexdigest())
    return sorted(ranked[:count], key=lambda m: (m.line, m.column, m.key))


# -- the equivalents file ----------------------------------------------------


def load_equivalents(path: Path = EQUIVALENTS) -> dict[tuple[int, str], str]:
    """{(step, mutant key): reason} from the committed file."""
    if not path.is_file():
        return {}
    entries = tomllib.loads(path.read_text(encoding="utf-8")).get("equivalent", [])
    return {(int(e["step"]), str(e["mutant"])): str(e["reason"]) for e in entries}


# -- running -----------------------------------------------------------------


@dataclass
class StepResult:
    number: int
    killed: int = 0
    equivalent: int = 0
    survivors: list[Mutant] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return self.killed + self.equivalent + len(self.survivors)


class SolutionFails(Failure):
    pass


def time_limit(number: int) -> float:
    """Seconds per check for this step's mutants: what the checker allows
    (LIMIT_FACTOR times the usual time, at least LIMIT_FLOOR), with the usual
    time measured now, on the solution, on this machine as loaded as it is.
    A mutant that runs longer is killed: the checker would stop it too."""
    from tests.checker.engine import LIMIT_FACTOR, LIMIT_FLOOR
    from tests.checker.isolate import CheckProcess

    with CheckProcess(quiet=True) as worker:
        _, outcomes = worker.run_step(number, steps.step(number).solution)
        failed = [o for o in outcomes if o.status != "pass"]
        if failed:
            raise SolutionFails(
                f"{steps.step(number).solution.relative_to(REPO)} fails its own checker "
                f"({failed[0].name}: {failed[0].message})"
            )
        slowest = max(worker.durations.values(), default=0.0)
    return max(LIMIT_FLOOR, LIMIT_FACTOR * slowest)


def run(
    todo: list[Mutant], jobs: int, progress: Callable[[Mutant, bool], None], limit: float
) -> dict[Mutant, bool]:
    """Check every mutant in `jobs` worker processes: {mutant: killed}."""
    from tests.checker.isolate import CheckProcess

    queue = list(reversed(todo))
    killed: dict[Mutant, bool] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    numbers = itertools.count()
    scratch = tempfile.TemporaryDirectory(prefix="mutants-")

    def check(worker: CheckProcess, mutant: Mutant) -> bool:
        # A folder per mutant: a reused path could meet a stale .pyc.
        folder = Path(scratch.name) / f"{next(numbers):05d}"
        folder.mkdir()
        path = folder / steps.step(mutant.step).skeleton.name
        path.write_text(mutant.source, encoding="utf-8")
        _, outcomes = worker.run_step(mutant.step, path, limit=limit)
        return any(o.status == "fail" for o in outcomes)

    def work() -> None:
        try:
            with CheckProcess(quiet=True) as worker:
                while True:
                    with lock:
                        if not queue or errors:
                            return
                        mutant = queue.pop()
                    caught = check(worker, mutant)
                    with lock:
                        killed[mutant] = caught
                        progress(mutant, caught)
        except BaseException as error:  # reported by the main thread
            with lock:
                errors.append(error)

    with scratch:
        threads = [threading.Thread(target=work) for _ in range(max(1, jobs))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return killed


def bar(done: int, total: int, width: int = 30) -> str:
    filled = round(width * done / total) if total else width
    return "[" + "#" * filled + "-" * (width - filled) + f"] {done}/{total}"


class Progress:
    """A progress bar: redrawn in place on a terminal, every 10 mutants in a log."""

    def __init__(self, label: str, total: int, tty: bool) -> None:
        self.label, self.total, self.tty, self.done = label, total, tty, 0
        if tty:
            print(f"{label} {bar(0, total)}", end="", flush=True)

    def __call__(self, mutant: Mutant, caught: bool) -> None:
        self.done += 1
        line = f"{self.label} {bar(self.done, self.total)}"
        if self.tty:
            print(f"\r{line}", end="", flush=True)
        elif self.done == self.total or self.done % 10 == 0:
            print(line, flush=True)


def mutate_steps(numbers: list[int], count: int | None, jobs: int) -> list[StepResult]:
    equivalents = load_equivalents()
    results = []
    tty = sys.stdout.isatty()
    for number in numbers:
        found = mutants(number)
        todo = found if count is None else sample(found, count)
        result = StepResult(number)
        started = time.perf_counter()
        limit = time_limit(number)
        progress = Progress(f"step {number:02d}", len(todo), tty)
        for mutant, caught in run(todo, jobs, progress, limit).items():
            if caught:
                result.killed += 1
            elif (number, mutant.key) in equivalents:
                result.equivalent += 1
            else:
                result.survivors.append(mutant)
        result.survivors.sort(key=lambda m: (m.line, m.column, m.key))
        result.seconds = time.perf_counter() - started
        if tty:
            print()
        print(
            f"step {number:02d}: {result.total} mutants, {result.killed} killed, "
            f"{result.equivalent} equivalent, {len(result.survivors)} survived "
            f"({result.seconds:.0f} s)",
            flush=True,
        )
        for mutant in result.survivors:
            print(f"   survived: {mutant.describe()}", flush=True)
        results.append(result)
    return results


def measure_times(numbers: list[int]) -> None:
    """Each solution's slowest check, as the worker runs it (for Step.typical)."""
    from tests.check import load_spec
    from tests.checker.isolate import CheckProcess

    with CheckProcess(quiet=True) as worker:
        for number in numbers:
            worker.run_step(number, steps.step(number).solution)  # warm-up: caches
            _, outcomes = worker.run_step(number, steps.step(number).solution)
            slowest = max(worker.durations.items(), key=lambda item: item[1])
            step = load_spec(number)
            print(
                f"step {number:02d}: slowest check {slowest[1]:.1f} s ({slowest[0]}); "
                f"declared typical {step.typical:g} s",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    from tests.check import parse_step

    parser = ArgumentParser(prog="python -m devtools.mutate", description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="*", help="step numbers (default: every step)")
    parser.add_argument(
        "--sample", type=int, metavar="N", help="N mutants per step, the same ones every run"
    )
    parser.add_argument("--jobs", type=int, default=1, help="checker processes (default 1)")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--times", action="store_true", help="time each solution's slowest check")

    def run() -> int:
        args = parser.parse_args(argv)
        max_runtime.prepare()
        numbers = [parse_step(s) for s in args.steps] or steps.numbers()
        if args.times:
            measure_times(numbers)
        elif args.list:
            for number in numbers:
                found = mutants(number)
                for mutant in found if args.sample is None else sample(found, args.sample):
                    print(mutant.describe())
        else:
            started = time.perf_counter()
            return report(mutate_steps(numbers, args.sample, args.jobs), started)
        return 0

    return exit_status(run)


def report(results: list[StepResult], started: float) -> int:
    total = sum(r.total for r in results)
    survivors = sum(len(r.survivors) for r in results)
    print(
        f"\n{total} mutants: {sum(r.killed for r in results)} killed, "
        f"{sum(r.equivalent for r in results)} equivalent, {survivors} survived "
        f"in {time.perf_counter() - started:.0f} s."
    )
    if survivors:
        print(
            "A survivor is a mistake the checker lets through: make the check stronger, or, if "
            f"it computes the same on every valid input, list it in {EQUIVALENTS.relative_to(REPO)} "
            "with the reason."
        )
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
