"""A canary for the pinned MAX: the API the solutions use is still there.

MAX's experimental API moves between releases. When it does, these tests say
which call changed and which solution uses it, instead of a traceback deep in a
checker. Three layers:

1. Every name the solutions take from `max.*` (found by reading their source, so
   a new use is covered without editing this file) still exists, and every call
   of one still binds: same positional count, same keyword names.
2. The methods and properties the solutions use on MAX objects (a Tensor, a
   Module), which reading the source cannot resolve, listed by hand below.
3. A few behaviours the tutorial relies on: band_part's `exclude`, the two
   GELUs, split's sizes, tensor factories, and how a Module finds its weights.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from common import max_runtime
from common.steps import REPO

SOLUTIONS = sorted((REPO / "solutions").glob("solution_[0-9][0-9].py"))
max_runtime.prepare()


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def used_in(pattern: str) -> list[str]:
    """The solution files whose source matches a regex."""
    return [rel(p) for p in SOLUTIONS if re.search(pattern, p.read_text(encoding="utf-8"))]


def changed(call: str, what: str, where: list[str]) -> str:
    first_per_file = {place.split(":")[0]: place for place in reversed(where)}
    places = ", ".join(sorted(first_per_file.values())) or "solutions/ (none uses it any more)"
    return f"MAX API changed: {call} {what}; the tutorial uses it in {places}"


def resolve(target: str) -> Any:
    """`max.a.b.C.d` -> the object: import the longest module prefix, then getattr."""
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(f"no module {parts[0]!r}")


def call_shape(positional: int, keywords: tuple[str, ...]) -> str:
    return ", ".join(["_"] * positional + [f"{k}=..." for k in keywords])


def binds(function: Any, positional: int, keywords: tuple[str, ...]) -> str | None:
    """Why a call with this shape no longer binds to `function`; None when it does."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None  # not introspectable (a C function): existence is all we can check
    try:
        signature.bind(*[object()] * positional, **dict.fromkeys(keywords, object()))
    except TypeError as error:
        return f"({error}); MAX's signature is now {signature}"
    return None


def importable(target: str) -> Any:
    """The object, or skip: test_max_name_exists reports what went missing."""
    try:
        return resolve(target)
    except (ImportError, AttributeError) as error:
        pytest.skip(f"{target} is missing ({error}): test_max_name_exists names it")


# -- 1. names from max.* the solutions use, found in their source ------------


@dataclass
class Use:
    call: str  # as the solution writes it: "F.band_part"
    target: str  # what it resolves to: "max.experimental.functional.band_part"
    positional: int = 0
    keywords: tuple[str, ...] = ()
    where: list[str] = field(default_factory=list)


def max_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted MAX path, from `from max... import` and `import max...`."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "max":
            for name in node.names:
                aliases[name.asname or name.name] = f"{node.module}.{name.name}"
        elif isinstance(node, ast.Import):
            for name in node.names:
                if name.name.split(".")[0] == "max":  # `import max.x` binds `max`
                    aliases[name.asname or "max"] = name.name if name.asname else "max"
    return aliases


def chain(node: ast.AST) -> list[str] | None:
    """`F.band_part` -> ["F", "band_part"]; None for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        head = chain(node.value)
        return None if head is None else [*head, node.attr]
    return None


def scan_solutions() -> tuple[dict[str, Use], dict[tuple[str, int, tuple[str, ...]], Use]]:
    """Every MAX name the solutions reference, and every distinct call of one."""
    names: dict[str, Use] = {}
    calls: dict[tuple[str, int, tuple[str, ...]], Use] = {}
    for path in SOLUTIONS:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        aliases = max_aliases(tree)
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            parts = chain(node)
            if not parts or parts[0] not in aliases or isinstance(parents.get(node), ast.Attribute):
                continue
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                continue
            call, target = ".".join(parts), ".".join([aliases[parts[0]], *parts[1:]])
            where = f"{rel(path)}:{node.lineno}"
            names.setdefault(target, Use(call, target)).where.append(where)
            parent = parents.get(node)
            if isinstance(parent, ast.Call) and parent.func is node:
                if any(isinstance(a, ast.Starred) for a in parent.args) or any(
                    k.arg is None for k in parent.keywords
                ):
                    continue  # *args or **kwargs: the shape is not known statically
                keywords = tuple(sorted(k.arg for k in parent.keywords if k.arg))
                key = (target, len(parent.args), keywords)
                calls.setdefault(key, Use(call, target, len(parent.args), keywords))
                calls[key].where.append(where)
    return names, calls


NAMES, CALLS = scan_solutions()


def test_the_scan_finds_the_max_api() -> None:
    """Guard the scanner itself: it must see the calls the tutorial is built on."""
    found = {use.call for use in NAMES.values()}
    assert {"F.band_part", "F.softmax", "Tensor.full", "Linear", "Module"} <= found, found


@pytest.mark.parametrize("target", sorted(NAMES), ids=lambda target: NAMES[target].call)
def test_max_name_exists(target: str) -> None:
    use = NAMES[target]
    try:
        resolve(target)
    except (ImportError, AttributeError) as error:
        pytest.fail(
            changed(use.call, f"({target}) no longer exists: {error!r}", use.where), pytrace=False
        )


@pytest.mark.parametrize(
    "key", sorted(CALLS), ids=lambda key: f"{CALLS[key].call}({call_shape(*key[1:])})"
)
def test_max_call_still_accepts_our_arguments(key: tuple[str, int, tuple[str, ...]]) -> None:
    use = CALLS[key]
    function = importable(use.target)
    problem = binds(function, use.positional, use.keywords)
    if problem:
        call = f"{use.call}({call_shape(use.positional, use.keywords)})"
        pytest.fail(
            changed(call, f"no longer accepts these arguments {problem}", use.where), pytrace=False
        )


# -- 2. methods and properties of MAX objects, listed by hand ----------------

TENSOR = "max.experimental.tensor.Tensor"
MODULE = "max.experimental.nn.Module"
MODULE_LIST = "max.experimental.nn.ModuleList"


@dataclass(frozen=True)
class Member:
    owner: str  # dotted path of the class
    name: str
    calls: tuple[tuple[int, tuple[str, ...]], ...] = ()  # (positional, keywords), self excluded
    uses: str | None = None  # regex finding the uses in solutions/; None: operators, everywhere
    is_property: bool = False

    @property
    def call(self) -> str:
        return f"{self.owner.rsplit('.', 1)[-1]}.{self.name}"

    def where(self) -> list[str]:
        return used_in(self.uses) if self.uses else ["solutions/ (operators, throughout)"]


MEMBERS = [
    Member(TENSOR, "shape", uses=r"\.shape\b", is_property=True),
    Member(TENSOR, "dtype", uses=r"\.dtype\b", is_property=True),
    Member(TENSOR, "device", uses=r"\.device\b", is_property=True),
    Member(TENSOR, "transpose", ((2, ()),), r"\.transpose\("),
    Member(TENSOR, "reshape", ((1, ()),), r"\.reshape\("),
    Member(TENSOR, "to_numpy", ((0, ()),), r"\.to_numpy\("),
    Member(TENSOR, "__matmul__", ((1, ()),)),
    Member(TENSOR, "__add__", ((1, ()),)),
    Member(TENSOR, "__truediv__", ((1, ()),)),
    Member(TENSOR, "__getitem__", ((1, ()),)),
    Member(MODULE, "parameters", uses=r"\.parameters\b", is_property=True),
    Member(MODULE, "device", uses=r"model\.device\b", is_property=True),
    Member(MODULE, "load_state_dict", ((1, ()),), r"\.load_state_dict\("),
    Member(MODULE, "compile", ((1, ()), (3, ())), r"\.compile\("),
    Member(MODULE, "__call__", ((1, ()), (3, ()))),
    Member(MODULE_LIST, "__iter__", ((0, ()),), r"for \w+ in self\.h\b"),
    Member(MODULE_LIST, "__setitem__", ((2, ()),), r"\.h\[\w+\] = "),
]


@pytest.mark.parametrize("member", MEMBERS, ids=lambda m: m.call)
def test_max_member_exists(member: Member) -> None:
    owner = importable(member.owner)
    try:
        static = inspect.getattr_static(owner, member.name)
    except AttributeError:
        pytest.fail(changed(member.call, "no longer exists", member.where()), pytrace=False)
    if member.is_property:
        assert isinstance(static, property), changed(
            member.call, f"is no longer a property (now {type(static).__name__})", member.where()
        )
        return
    function = getattr(owner, member.name)
    for positional, keywords in member.calls:
        problem = binds(function, positional + 1, keywords)  # + self
        shape = call_shape(positional, keywords)
        assert not problem, changed(
            f"{member.call}({shape})",
            f"no longer accepts these arguments {problem}",
            member.where(),
        )


@pytest.mark.parametrize("member", [m for m in MEMBERS if m.uses], ids=lambda m: m.call)
def test_listed_member_is_still_used(member: Member) -> None:
    assert member.where(), (
        f"no solution uses {member.call} any more: drop it from MEMBERS in tests/test_max_api.py"
    )


# -- 3. behaviours the tutorial relies on --------------------------------------


class MaxNames:
    """The MAX names the behaviour checks use, each imported when first used:
    a missing one skips only the checks that need it (test_max_name_exists fails)."""

    PATHS = {
        "F": "max.experimental.functional",
        "Tensor": TENSOR,
        "DType": "max.dtype.DType",
        "Module": MODULE,
        "ModuleList": MODULE_LIST,
        "Linear": "max.experimental.nn.Linear",
        "Embedding": "max.experimental.nn.Embedding",
    }

    def __getattr__(self, name: str) -> Any:
        return importable(self.PATHS[name])


@pytest.fixture
def mx() -> MaxNames:
    return MaxNames()


def behaves(call: str, uses: str, expectation: str, check: Callable[[], bool]) -> None:
    """Run `check`; fail naming the call if it raises or returns False."""
    try:
        ok = check()
    except Exception as error:
        pytest.fail(
            changed(call, f"raised {error!r} ({expectation})", used_in(uses)), pytrace=False
        )
    assert ok, changed(call, f"no longer behaves as expected: {expectation}", used_in(uses))


def test_band_part_exclude_keeps_outside_of_band(mx: MaxNames) -> None:
    F, Tensor, DType = mx.F, mx.Tensor, mx.DType

    rows, cols, upper = 3, 5, 1
    allowed = np.arange(cols)[None, :] <= np.arange(rows)[:, None] + upper
    expected = np.where(allowed, 0.0, -np.inf).astype(np.float32)

    def masked() -> bool:
        full = Tensor.full([rows, cols], float("-inf"), dtype=DType.float32)
        mask = F.band_part(full, num_lower=None, num_upper=upper, exclude=True).to_numpy()
        return mask.shape == expected.shape and np.array_equal(mask, expected)

    behaves(
        "F.band_part(Tensor.full(..., -inf), num_lower=None, num_upper=1, exclude=True)",
        r"F\.band_part\(",
        "0 inside the band (column <= row + num_upper), -inf kept outside it",
        masked,
    )

    def kept() -> bool:
        band = F.band_part(Tensor.ones([3, 3]), num_lower=0, num_upper=0).to_numpy()
        return np.array_equal(band, np.eye(3, dtype=np.float32))

    behaves(
        "F.band_part(ones, num_lower=0, num_upper=0)",
        r"F\.band_part\(",
        "without exclude the band (here the diagonal) is kept and the rest zeroed",
        kept,
    )


def test_gelu_tanh_is_the_approximation(mx: MaxNames) -> None:
    F, Tensor = mx.F, mx.Tensor

    x = np.linspace(-3, 3, 13, dtype=np.float64)
    tanh = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    exact = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))

    def gelus() -> bool:
        values = Tensor(x.astype(np.float32))
        approx = F.gelu(values, approximate="tanh").to_numpy()
        default = F.gelu(values).to_numpy()
        return (
            np.allclose(approx, tanh, atol=1e-5)
            and np.allclose(default, exact, atol=1e-5)
            and not np.allclose(approx, default, atol=1e-6)
        )

    behaves(
        'F.gelu(x, approximate="tanh")',
        r"F\.gelu\(",
        'approximate="tanh" is GPT-2\'s tanh GELU, the default the exact erf one, and they differ',
        gelus,
    )


def test_split_takes_sizes(mx: MaxNames) -> None:
    F, Tensor = mx.F, mx.Tensor

    data = np.arange(12, dtype=np.float32).reshape(2, 6)

    def split() -> bool:
        parts = F.split(Tensor(data), [1, 2, 3], axis=-1)
        arrays = [part.to_numpy() for part in parts]
        expected = np.split(data, [1, 3], axis=-1)
        return len(arrays) == 3 and all(
            np.array_equal(a, e) for a, e in zip(arrays, expected, strict=True)
        )

    behaves(
        "F.split(x, [1, 2, 3], axis=-1)",
        r"F\.split\(",
        "a list of sizes gives pieces of those sizes, in order",
        split,
    )


def test_module_finds_its_weights_by_attribute_name(mx: MaxNames) -> None:
    F, Tensor = mx.F, mx.Tensor

    def tiny() -> Any:
        """A module written the way the solutions write theirs."""

        class Tiny(mx.Module[[Tensor], Tensor]):
            def __init__(self) -> None:  # no super().__init__(), as in the solutions
                self.weight = Tensor.ones([2])
                self.wte = mx.Embedding(5, dim=2)
                self.h = mx.ModuleList([mx.Linear(2, 3, bias=True)])

            def forward(self, x: Tensor) -> Tensor:
                return self.h[0](self.wte(x) * self.weight)

        return Tiny()

    expected = {"weight": (2,), "wte.weight": (5, 2), "h.0.weight": (3, 2), "h.0.bias": (3,)}

    def shapes() -> bool:
        with F.lazy():
            model = tiny()
        found = {name: tuple(int(d) for d in t.shape) for name, t in model.parameters}
        return found == expected

    behaves(
        "Module[[Tensor], Tensor] subclass, built under F.lazy(): .parameters",
        r"Module\b",
        f"parameters named by attribute path; Linear's weight is [out, in]: {expected}",
        shapes,
    )

    def loads() -> bool:
        model = tiny()
        state = {
            name: np.full(shape, index, dtype=np.float32)
            for index, (name, shape) in enumerate(expected.items())
        }
        model.load_state_dict(state)
        loaded = {name: t.to_numpy() for name, t in model.parameters}
        return all(np.array_equal(loaded[name], value) for name, value in state.items())

    behaves(
        "Module.load_state_dict(state)",
        r"\.load_state_dict\(",
        "every parameter takes the NumPy array of its name",
        loads,
    )
