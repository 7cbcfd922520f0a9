"""Text mutants of a Mojo solution: the slips a kernel's author makes, on its source's text.

A Mojo file has no Python AST to walk, so its changes are made on each
learner line's code (the text before a `#`), one at a time: an arithmetic
operator swapped (+ and -, * and +), an accumulation turned into an
assignment, a loop's bound one short or its start one late, an integer
constant nudged by one, one term of a sum dropped, two arguments of a call
swapped, a statement dropped. A change that does not compile is a mutant
too: the compiler kills it in about a second.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

ARITHMETIC = {" + ": (" - ",), " - ": (" + ",), " * ": (" + ",)}
ACCUMULATE = {" += ": (" -= ", " = ")}
RANGE = re.compile(r"range\((?P<bound>[^(),]+)\)")
NUMBER = re.compile(r"(?<![\w.])(?P<n>\d+)(?![\w.])")
CALL_ARGUMENTS = re.compile(r"\w+\((?P<args>[^()]*)\)")
SUM_TERMS = re.compile(r"return (?P<sum>.+)$")
# Lines that declare rather than compute: dropping one only breaks the build.
STRUCTURE = re.compile(r"^\s*(for|if|while|var|def|struct|@|return|comptime)\b")


def code_of(line: str) -> str:
    """The line without its comment."""
    return line.split("#", 1)[0].rstrip()


def changes(code: str) -> Iterator[tuple[str, int, str, str]]:
    """(operator, column, old text, new text) for every change to one line's code."""
    for table, name in ((ARITHMETIC, "arithmetic"), (ACCUMULATE, "accumulate")):
        for old, news in table.items():
            for match in re.finditer(re.escape(old), code):
                for new in news:
                    yield name, match.start(), old, new
    for match in RANGE.finditer(code):
        bound = match["bound"]
        yield "loop bound", match.start(), match[0], f"range({bound} - 1)"
        yield "loop start", match.start(), match[0], f"range(1, {bound})"
    for match in NUMBER.finditer(code):
        number = int(match["n"])
        yield "constant", match.start(), match[0], str(number + 1)
        if number > 0:
            yield "constant", match.start(), match[0], str(number - 1)
    for match in CALL_ARGUMENTS.finditer(code):
        arguments = [a.strip() for a in match["args"].split(",")]
        start = match.start("args")
        for k in range(len(arguments) - 1):
            if arguments[k] != arguments[k + 1]:
                swapped = arguments[:k] + [arguments[k + 1], arguments[k]] + arguments[k + 2 :]
                yield "swap", start, match["args"], ", ".join(swapped)
    if match := SUM_TERMS.search(code):
        terms = top_level_terms(match["sum"])
        for k in range(len(terms)) if len(terms) > 1 else ():
            kept = " + ".join(terms[:k] + terms[k + 1 :])
            yield "term dropped", match.start("sum"), match["sum"], kept


def top_level_terms(expression: str) -> list[str]:
    """`expression` cut at each " + " outside parentheses."""
    terms, depth, start = [], 0, 0
    for index, char in enumerate(expression):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and expression.startswith(" + ", index):
            terms.append(expression[start:index])
            start = index + 3
    return terms + [expression[start:]]


def function_of(lines: list[str], number: int) -> str:
    """The function line `number` (1-based) lies in: a key that stays put
    when lines are added above it."""
    for line in reversed(lines[: number - 1]):
        if match := re.match(r"\s*def (\w+)", line):
            return match.group(1)
    return "<module>"


def line_mutants(lines: list[str], learner: set[int]) -> Iterator[tuple[int, int, str, str, str]]:
    """(line, column, operator, key, source) for each change to a learner line."""
    for number in sorted(learner):
        line = lines[number - 1]
        code = code_of(line)
        function = function_of(lines, number)
        if not code.strip() or code.strip().startswith('"""'):
            continue
        for operator, column, old, new in changes(code):
            changed = code[:column] + code[column:].replace(old, new, 1) + line[len(code) :]
            if changed == line:
                continue
            source = "\n".join(lines[: number - 1] + [changed] + lines[number:]) + "\n"
            key = f"{function}: {code.strip()} -> {changed.strip()}"
            yield number, column, operator, key, source
        if not STRUCTURE.match(code):
            source = "\n".join(lines[: number - 1] + lines[number:]) + "\n"
            key = f"{function}: {code.strip()} -> (dropped)"
            yield number, 0, "statement dropped", key, source
