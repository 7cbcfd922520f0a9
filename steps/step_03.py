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
        #   Hint: Tensor.ones(shape) and Tensor.zeros(shape), a shape being a list
        #   of sizes; keep eps too. The attribute names become the parameter names.
        self.weight = None
        self.bias = None
        self.eps = None
        # END TODO

    def forward(self, x: Tensor) -> Tensor:
        # TODO: (x - mean) / sqrt(var + eps) * weight + bias over the last axis.
        #   Hint: F.layer_norm(x, gamma=..., beta=..., epsilon=...)
        return None
        # END TODO
