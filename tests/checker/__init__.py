"""The checker: it runs a step's checks on a learner's file and says what is
wrong, in the learner's terms. This is its interface; engine.py explains how a
step's checks run.

For the learner's commands (tests/check.py and tools/learn/):
    check_step, check_all   run checks in a worker process and print the verdict
    CheckProcess            a worker process, to reuse across checks
    last_result             the outcomes of the last check of the learner's file
    passed_unchanged        whether a file passed and nothing its verdict depends on changed
    step_ladder             the step's own hints, for when no check has run yet
    placeholders_in         the `None` placeholders left in a file
    todo_regions            the `# TODO` ... `# END TODO` blocks of a file's text
    report                  how outcomes print: icons, colours, the progress bar

For the specs (tests/specs/): Step, Check, Context, Fail, load_spec and the
comparisons (expect_close, expect_shape, expect_parameters, ...), as_one_graph
(a model's forward run as one graph).
"""

from . import report
from .compare import expect_close, expect_shape, tensor, to_numpy
from .engine import (
    Check,
    Context,
    Fail,
    Outcome,
    Step,
    as_one_graph,
    expect_parameters,
    load_spec,
    parameter_shapes,
    run_step,
)
from .hints import step_ladder
from .isolate import CheckProcess
from .memo import passed_unchanged
from .memo import recall as last_result
from .session import check_all, check_step
from .source import Placeholder, placeholders_in, todo_regions

__all__ = [
    "Check",
    "CheckProcess",
    "Context",
    "Fail",
    "Outcome",
    "Placeholder",
    "Step",
    "as_one_graph",
    "check_all",
    "check_step",
    "expect_close",
    "expect_parameters",
    "expect_shape",
    "last_result",
    "load_spec",
    "parameter_shapes",
    "passed_unchanged",
    "placeholders_in",
    "report",
    "run_step",
    "step_ladder",
    "tensor",
    "to_numpy",
    "todo_regions",
]
