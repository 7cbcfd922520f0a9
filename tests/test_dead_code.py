"""No module-level name that nothing reads: a constant, function or class
defined at the top of a module is used somewhere in the repository (by code,
by name in a string such as `getattr(module, "STEP")`, or by `__all__`)."""

from __future__ import annotations

import ast
from pathlib import Path

from common.steps import REPO
from tests.test_layout import is_test_module, modules


def defined_names(tree: ast.Module) -> dict[str, int]:
    """Module-level names and the line that defines each."""
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = node.lineno
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    found[name.id] = node.lineno
    return {name: line for name, line in found.items() if not name.startswith("__")}


def read_names(tree: ast.Module) -> set[str]:
    """Every name the module reads: loaded, an attribute, imported, or spelled
    as a string that is an identifier."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.isidentifier():
                found.add(node.value)
    return found


def unused(paths: list[Path]) -> list[tuple[Path, int, str]]:
    """(file, line, name) of each module-level name that none of `paths` reads."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in paths}
    read = set().union(*(read_names(tree) for tree in trees.values()))
    return [
        (path, line, name)
        for path, tree in trees.items()
        if not is_test_module(path)
        for name, line in defined_names(tree).items()
        if name not in read
    ]


def test_every_module_level_name_is_read() -> None:
    found = [f"{path.relative_to(REPO)}:{line}: {name}" for path, line, name in unused(modules())]
    assert not found, "defined and never read:\n" + "\n".join(found)


def test_an_unread_constant_is_found(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('USED = 1\nCASES = [(1, 0)]\n\n\ndef f():\n    return USED + g("x")\n')
    assert [name for _, _, name in unused([probe])] == ["CASES", "f"]
