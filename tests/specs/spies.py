"""What a learner's layer is given while their model runs, for a check that
compares the pieces of a forward pass one by one (step 17's positions, step
21's heads as o_proj receives them)."""

from __future__ import annotations

from typing import Any


def note_inputs(layer: Any, seen: list) -> None:
    """Make `layer` (a MAX module of the learner's model) append to `seen` the
    tensor each call gives it; a layer whose class cannot be swapped, or that is
    not there, is left as it is and notes nothing."""
    if layer is None or not callable(getattr(layer, "forward", None)):
        return

    class Noting(type(layer)):
        def forward(self, x):
            seen.append(x)
            return super().forward(x)

    Noting.__name__ = Noting.__qualname__ = type(layer).__name__
    try:
        layer.__class__ = Noting
    except TypeError:  # not a plain Python object
        pass
