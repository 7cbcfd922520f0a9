"""Step 03: layer normalization.

Goal: a LayerNorm module that normalizes the last axis to zero mean and unit
variance, then scales by a learned ``weight`` and shifts by a learned ``bias``.

Run: pixi run s03    (or: python -m tests.check 03)
Stuck? Read docs/src/step_03.md (pixi run book).
"""

from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.tensor import Tensor


class LayerNorm(Module[[Tensor], Tensor]):
    """Normalize the last axis, then scale by ``weight`` and shift by ``bias``."""

    def __init__(self, dim: int, *, eps: float = 1e-5) -> None:
        # TODO: the learned scale starts at 1 and the shift at 0, one per feature.
        #   Both are vectors of shape [dim]; keep eps as the caller gave it. The
        #   attribute names become the parameter names, the checkpoint's (the
        #   page's "MAX operations" and "Why it is built this way").
        self.weight = None
        self.bias = None
        self.eps = None
        # END TODO

    def forward(self, x: Tensor) -> Tensor:
        # TODO: (x - mean) / sqrt(var + eps) * weight + bias over the last axis.
        #   One mean and one variance per token, over its dim features: x is
        #   [batch, seq, dim] and so is the result. MAX computes this formula in
        #   one operation (the page's "MAX operations" and "A worked example").
        return None
        # END TODO
