"""Shared machinery of the step checkers; see engine.py for the overview."""

from .compare import expect_close, expect_shape, tensor, to_numpy
from .engine import (
    Check,
    Context,
    Fail,
    Outcome,
    Step,
    expect_parameters,
    parameter_shapes,
    run_step,
)

__all__ = [
    "Check",
    "Context",
    "Fail",
    "Outcome",
    "Step",
    "expect_close",
    "expect_parameters",
    "expect_shape",
    "parameter_shapes",
    "run_step",
    "tensor",
    "to_numpy",
]
