"""The checker engine: a step is a list of named checks run against a file.

A step's spec (the package tests/specs/step_NN: its checks, their hints as
data in hints.toml, the mistakes they must name) declares what must exist and
which checks to run; everything that talks to the learner's code goes through the
Context below, so a mistake always comes back as a Fail with a readable
message instead of a traceback.
"""

from __future__ import annotations

import functools
import importlib
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from common import max_runtime, steps

from . import compiles, source
from .hints import with_hints
from .learner_code import (
    CheckTimeout,
    LearnerImportError,
    display_path,
    import_file,
    summarize,
    time_limit,
)


class Fail(Exception):
    """A check failed: `message` says what, `hint` what to try."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


# A hint ladder: what to look at; the API or the shapes; the line itself.
# `python -m tools.learn hint NN` climbs it one rung per ask.
Ladder = Sequence[str]


@dataclass(frozen=True)
class Check:
    """One named check of a step, and the hints for when it fails.

    `hints` is the check's ladder, or ladders chosen by the failure: a mapping
    whose keys are words looked for, in order and ignoring case, in the
    failure's message and hint ("scale" picks the scale's ladder when the
    checker diagnosed a missing scale); the key "" holds the ladder for any
    other failure of this check."""

    name: str
    run: Callable[[Context], None]
    hints: Ladder | Mapping[str, Ladder] = ()

    def ladder_for(self, message: str, hint: str | None) -> tuple[str, list[str]]:
        """(topic, rungs): the ladder for this failure; topic "" is the default."""
        if not isinstance(self.hints, Mapping):
            return "", list(self.hints)
        said = f"{message} {hint or ''}".lower()
        for word, ladder in self.hints.items():
            if word and word.lower() in said:
                return word, list(ladder)
        return "", list(self.hints.get("", ()))


# A check is called endless after LIMIT_FACTOR times the step's usual time, and
# never before LIMIT_FLOOR seconds (a busy machine runs a blink-long check slowly).
LIMIT_FACTOR = 10.0
LIMIT_FLOOR = 20.0
# While MAX compiles its kernels (a cold cache) a check can take minutes.
COLD_LIMIT = 1800.0


@dataclass(frozen=True)
class Step:
    number: int
    required: dict[str, list[str]]
    checks: Sequence[Check]
    # The slowest check's usual time, in seconds, on a warm machine of the
    # smallest kind the tutorial runs on (`python -m devtools.mutate --times`
    # measures it on the machine at hand).
    typical: float = 2.0
    # A fixed limit per check instead of one derived from `typical`: for a step
    # whose check compiles a graph, which takes minutes on a machine's first run.
    seconds: float | None = None

    @property
    def id(self) -> str:
        return f"{self.number:02d}"

    @property
    def title(self) -> str:
        """The step's one title (common/steps.py)."""
        return steps.step(self.number).title


@dataclass
class Outcome:
    name: str
    status: str  # "pass", "fail" or "skip"
    message: str = ""
    hint: str | None = None
    topic: str = ""  # which of the check's hint ladders fits this failure
    ladder: list[str] = field(default_factory=list)


@dataclass
class Context:
    """What a check can do with the learner's module, each call guarded."""

    step: Step
    path: Path
    module: ModuleType
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    _memo: dict[str, Any] = field(default_factory=dict)

    def once(self, key: str, build: Callable[[], Any]) -> Any:
        """`build()` the first time a check of this run asks for `key`, then
        the same object (a model worth building once per run)."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    # -- reaching into the learner's code ---------------------------------
    def get(self, name: str) -> Any:
        value = getattr(self.module, name, None)
        if value is None:
            raise Fail(f"{display_path(self.path)} does not define `{name}`.")
        return value

    def call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call learner code; an exception becomes a Fail pointing at their line."""
        try:
            return fn(*args, **kwargs)
        except (Fail, CheckTimeout, KeyboardInterrupt):
            raise
        except Exception as error:
            raise Fail(f"{what} raised {summarize(error, self.path)}") from error

    def run_lazily(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call learner code that computes with tensors (a model's forward) as
        one graph (see `as_one_graph`); an exception becomes a Fail, as in `call`."""
        return self.call(what, as_one_graph, fn, *args, **kwargs)

    def build(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The learner's class `name` built with these arguments. Built under
        F.lazy(): a Linear's random initial weights are typed, not drawn, so a
        first check compiles no random kernel for weights the check replaces."""
        from max.experimental import functional as F

        with F.lazy():
            return self.call(f"{name}(...)", self.get(name), *args, **kwargs)

    # -- data --------------------------------------------------------------
    def normal(self, *shape: int, std: float = 1.0) -> np.ndarray:
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    def token_ids(self, vocab_size: int, *shape: int) -> np.ndarray:
        return self.rng.integers(0, vocab_size, size=shape).astype(np.int64)

    def weights_for(self, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
        """GPT-2-like random weights: N(0, 0.02), layer-norm scales near 1."""
        weights = {}
        for name, shape in shapes.items():
            if len(shape) == 1 and name.split(".")[-1] == "weight":
                weights[name] = 1.0 + self.normal(*shape, std=0.1)
            else:
                weights[name] = self.normal(*shape, std=0.02)
        return weights

    def load_weights(
        self,
        module: Any,
        shapes: dict[str, tuple[int, ...]],
        weights: dict[str, np.ndarray] | None = None,
    ) -> dict[str, np.ndarray]:
        """Check parameter names and shapes, then load the weights the NumPy
        reference will use (random GPT-2-like ones unless given). Returns them."""
        expect_parameters(module, shapes)
        weights = self.weights_for(shapes) if weights is None else weights
        self.call("load_state_dict", module.load_state_dict, weights)
        return weights


def as_one_graph(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """fn(*args, **kwargs) with its tensor operations recorded under F.lazy(),
    not run one by one, and the tensors it returns realized together, in one
    run of MAX's interpreter: a small model's forward runs 3x faster than one
    run per operation. A mistake in shapes or dtypes still stops at the line
    that records the operation."""
    from max.experimental import functional as F

    with F.lazy():
        out = fn(*args, **kwargs)
    realize_tensors(out)
    return out


def realize_tensors(out: Any) -> None:
    """Run what a lazy call recorded and returned (tensors, alone or in tuples,
    lists and dicts): realizing one tensor runs its whole graph, so the rest
    are real by the time the walk reaches them."""
    if isinstance(out, (tuple, list)):
        for each in out:
            realize_tensors(each)
    elif isinstance(out, dict):
        realize_tensors(list(out.values()))
    elif getattr(out, "real", True) is False and hasattr(out, "to_numpy"):
        out.to_numpy()


def load_spec(number: int) -> Step:
    """Step `number`'s spec: tests/specs/step_NN's checks, with the ladders of
    its hints.toml."""
    return with_hints(importlib.import_module(steps.step(number).spec_module).STEP)


def parameter_shapes(module: Any) -> dict[str, tuple[int, ...]]:
    parameters = getattr(module, "parameters", None)
    if parameters is None:
        raise Fail(
            f"{type(module).__name__} is not a MAX Module (no .parameters).",
            "Subclass max.experimental.nn.Module.",
        )
    return {name: tuple(int(d) for d in tensor.shape) for name, tensor in parameters}


def submodule(module: Any, dotted: str) -> Any:
    """The object a parameter name's prefix names ("h.0.attn" of "h.0.attn.c_attn.weight")."""
    for part in dotted.split(".")[:-1]:
        module = module[int(part)] if part.isdigit() else getattr(module, part, None)
        if module is None:
            return None
    return module


def missing_bias(module: Any, missing: list[str], actual: dict[str, Any]) -> Fail | None:
    """A Fail naming the layers built without their bias, when that is all that differs."""
    biasless = [
        n for n in missing if n.endswith(".bias") and n[: -len("bias")] + "weight" in actual
    ]
    if not biasless or len(biasless) != len(missing):
        return None
    layers = ", ".join(n.removesuffix(".bias") for n in biasless)
    kind = type(submodule(module, biasless[0])).__name__
    return Fail(
        f"{layers} has no bias ({', '.join(biasless)} is missing).",
        f"GPT-2's {kind} layers add a bias: was the layer built with bias=False? "
        f"Build it with bias=True.",
    )


def transposed_hint(module: Any, name: str) -> str:
    """Why a weight comes out transposed, in the terms of the layer that holds it."""
    kind = type(submodule(module, name)).__name__
    if kind == "Embedding":
        return (
            "Embedding(num_embeddings, dim) stores one row per entry, [num_embeddings, dim]: "
            "are its two sizes swapped?"
        )
    return (
        "MAX's Linear(in_dim, out_dim) stores its weight as [out_dim, in_dim]: "
        "are in_dim and out_dim swapped?"
    )


def expect_parameters(module: Any, expected: dict[str, tuple[int, ...]]) -> None:
    actual = parameter_shapes(module)
    missing = [n for n in expected if n not in actual]
    extra = [n for n in actual if n not in expected]
    if missing and not extra and (failure := missing_bias(module, missing, actual)):
        raise failure
    if missing or extra:
        lines = []
        if missing:
            lines.append("missing: " + ", ".join(missing))
        if extra:
            lines.append("unexpected: " + ", ".join(extra))
        raise Fail(
            "parameter names differ from the checkpoint's: " + "; ".join(lines),
            "Use the attribute names from the TODOs: pretrained weights load by name.",
        )
    for name, shape in expected.items():
        if actual[name] != shape:
            hint = transposed_hint(module, name) if actual[name] == shape[::-1] else None
            raise Fail(f"{name} has shape {list(actual[name])}, expected {list(shape)}.", hint)


def describe_placeholders(path: Path, blanks: list[source.Placeholder]) -> str:
    """Placeholders grouped under the TODO they belong to, with file:line."""
    lines = [f"{len(blanks)} placeholder(s) still None:"]
    todo_line = None
    for blank in blanks:
        if blank.todo_line != todo_line:
            todo_line = blank.todo_line
            lines.append(f"{display_path(path)}:{todo_line}: {blank.todo}")
        lines.append(f"    line {blank.line}: {blank.code}")
    return "\n".join(lines)


def time_limit_for(step: Step) -> float:
    """Seconds a check may run before it is called endless: CHECK_TIME_LIMIT if
    set; else the step's fixed `seconds`, or LIMIT_FACTOR times its `typical`
    time (at least LIMIT_FLOOR); at least COLD_LIMIT while MAX's kernel cache is
    cold."""
    if os.environ.get("CHECK_TIME_LIMIT"):
        return float(os.environ["CHECK_TIME_LIMIT"])
    limit = step.seconds or max(LIMIT_FLOOR, LIMIT_FACTOR * step.typical)
    if os.environ.get("CHECK_COLD_CACHE") or kernel_cache_is_cold():
        limit = max(limit, COLD_LIMIT)
    return limit


@functools.cache
def kernel_cache_is_cold() -> bool:
    """Asked of MAX once per process (the CLI also sets CHECK_COLD_CACHE)."""
    return not max_runtime.kernel_cache_is_warm()


def run_step(
    step: Step,
    path: Path,
    on_check: Callable[[str], None] | None = None,
    limit: float | None = None,
) -> list[Outcome]:
    """Run every check of `step` against `path`; stop at the first failure.

    `on_check(name)` is called as each check (and the import) begins: a
    parent process watching this one knows which check a crash happened in.
    `limit`: seconds per check instead of time_limit_for(step)."""
    outcomes: list[Outcome] = []
    started = on_check or (lambda name: None)
    limit = limit or time_limit_for(step)

    def skip_rest(start: int) -> list[Outcome]:
        return outcomes + [Outcome(c.name, "skip") for c in step.checks[start:]]

    if path.suffix == ".mojo":
        from .mojo_step import run_mojo_step

        return run_mojo_step(step, path, started, limit)
    try:
        tree = source.parse(path)
    except source.LearnerSyntaxError as error:
        outcomes.append(
            Outcome("the file parses", "fail", f"SyntaxError in {display_path(path)}: {error}")
        )
        return skip_rest(0)

    blanks = source.placeholders(path, tree)
    if blanks:
        outcomes.append(
            Outcome(
                "no placeholders left",
                "fail",
                describe_placeholders(path, blanks),
                "Replace each None with code; the TODO comment above it says what goes there.",
            )
        )
        return skip_rest(0)
    missing = source.missing_names(tree, step.required)
    if missing:
        outcomes.append(
            Outcome(
                "required names defined",
                "fail",
                "not defined: " + ", ".join(missing),
                "Keep the class, function and method names of the skeleton.",
            )
        )
        return skip_rest(0)
    outcomes.append(Outcome("no placeholders left", "pass"))

    compiles.watch()  # a compile of MAX's is off the check's clock
    with max_runtime.on_the_cpu():  # where the references' numbers hold
        return outcomes + import_and_run(step, path, started, limit)


def import_and_run(
    step: Step, path: Path, started: Callable[[str], None], limit: float
) -> list[Outcome]:
    """Import the learner's file, then run the step's checks on it."""
    started("the file imports")
    try:
        with time_limit(limit):
            module = import_file(path)
    except LearnerImportError as error:
        failed = Outcome("the file imports", "fail", f"importing it raised {error}")
    except CheckTimeout as error:
        hint = "Is there an endless loop at the top level of the file?"
        failed = Outcome("the file imports", "fail", f"importing it is {error}", hint)
    else:
        with warnings.catch_warnings():
            # MAX warns (and retries) when an eager op fails; the learner gets
            # the error itself, summarized, from the check.
            warnings.filterwarnings("ignore", category=UserWarning, module=r"max\.")
            return run_checks(step, path, module, started, limit)
    return [failed] + [Outcome(c.name, "skip") for c in step.checks]


def run_checks(
    step: Step, path: Path, module: ModuleType, started: Callable[[str], None], limit: float
) -> list[Outcome]:
    outcomes: list[Outcome] = []

    def skip_rest(start: int) -> list[Outcome]:
        return outcomes + [Outcome(c.name, "skip") for c in step.checks[start:]]

    def failed(check: Check, message: str, hint: str | None) -> Outcome:
        topic, ladder = check.ladder_for(message, hint)
        return Outcome(check.name, "fail", message, hint, topic, ladder)

    ctx = Context(step, path, module)
    for index, check in enumerate(step.checks):
        started(check.name)
        try:
            with time_limit(limit):
                check.run(ctx)
        except Fail as failure:
            outcomes.append(failed(check, failure.message, failure.hint))
            return skip_rest(index + 1)
        except CheckTimeout as error:
            hint = "Look for a loop that never ends in your code."
            outcomes.append(failed(check, f"stopped: {error}", hint))
            return skip_rest(index + 1)
        except Exception as error:  # a learner error not routed through ctx.call
            outcomes.append(failed(check, summarize(error, path), None))
            return skip_rest(index + 1)
        outcomes.append(Outcome(check.name, "pass"))
    return outcomes
