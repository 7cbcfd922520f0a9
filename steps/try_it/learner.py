"""Which code an experiment runs: the learner's step once it passes its check,
else the reference solution, said in one printed line either way.

"Passes" means the checker's stored verdict (.check_results.json, kept by
`python -m tests.check NN` and tools/learn): every check of the step passed,
and neither the file nor anything the verdict depends on changed since. An
experiment never runs the check itself (that takes tens of seconds); it reads
the verdict the learner's last check left.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from pathlib import Path
from types import ModuleType, SimpleNamespace, TracebackType

from common import steps
from steps.try_it.figures import in_notebook
from tests.checker import last_result

_in_use: set[Path] = set()  # the learner's files this process runs, for the excepthook


def learner_or_reference(number: int) -> ModuleType | SimpleNamespace:
    """steps/step_NN.py when its check passed and it has not changed since,
    else solutions/solution_NN.py; prints which, and why. For a step whose
    learner writes Mojo, a namespace whose `file` is the .mojo file chosen
    (the experiment builds it, common/mojo_file.py)."""
    module, line = choose(number)
    print(line, flush=True)
    return module


def choose(number: int) -> tuple[ModuleType | SimpleNamespace, str]:
    """The module an experiment of step `number` runs, and the line that says which."""
    record = steps.step(number)
    shown = steps.display_path(record.skeleton)
    reference = "Using the reference solution: "
    again = f"; {record.check_command()} checks it."
    outcomes = last_result(number, record.skeleton)
    if outcomes is None:
        return reference_module(number), (
            f"{reference}{shown} has no check on record since it last changed{again}"
        )
    if not outcomes or not all(outcome.status == "pass" for outcome in outcomes):
        return reference_module(number), f"{reference}{shown} does not pass its check yet{again}"
    if record.suffix == ".mojo":  # built by the experiment, not imported
        mine = SimpleNamespace(__name__=record.module, file=record.skeleton)
        return mine, f"Using your {shown} (it passes its check)."
    try:  # a notebook's kernel may hold an earlier version: the file as it is now
        imported = sys.modules.get(record.module)
        module = importlib.reload(imported) if imported else importlib.import_module(record.module)
    except (Exception, SystemExit) as error:  # passed, yet does not import here: say so
        return reference_module(number), (
            f"{reference}{shown} passed its check but does not import here "
            f"({type(error).__name__}: {error})."
        )
    _in_use.add(record.skeleton.resolve())
    if not in_notebook():  # a notebook shows an error under its cell
        sys.excepthook = said_in_learners_terms
    return module, f"Using your {shown} (it passes its check)."


def reference_module(number: int) -> ModuleType | SimpleNamespace:
    record = steps.step(number)
    if record.suffix == ".mojo":
        return SimpleNamespace(__name__=f"solutions.solution_{number:02d}", file=record.solution)
    return importlib.import_module(f"solutions.solution_{number:02d}")


def said_in_learners_terms(
    kind: type[BaseException], error: BaseException, trace: TracebackType | None
) -> None:
    """An error raised in the learner's file while an experiment ran it: its
    place and message, not a traceback. The exit status stays 1."""
    frames = [
        frame for frame in traceback.extract_tb(trace) if Path(frame.filename).resolve() in _in_use
    ]
    if not frames or not issubclass(kind, Exception):
        sys.__excepthook__(kind, error, trace)
        return
    where = frames[-1]
    shown = steps.display_path(where.filename)
    print(
        f"{shown} raised {kind.__name__} in {where.name} (line {where.lineno}) while this "
        f"experiment ran it: {error}\nIts check passed: this experiment calls it on inputs "
        "the check does not try.",
        file=sys.stderr,
    )
