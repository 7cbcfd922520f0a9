"""Step 20: RMSNorm and the SwiGLU MLP.

Goal: the two pieces of Llama's block that differ from GPT-2's. RMSNorm
divides each token's features by their root mean square and scales them by a
learned ``weight`` (no mean, no bias). The SwiGLU MLP projects the input twice,
lets SiLU of one projection gate the other feature by feature, and projects the
product back; none of its layers has a bias.

Run: pixi run s20    (or: python -m tests.check 20)
Stuck? Read docs/src/step_20.md (pixi run book).
"""

from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor


class RMSNorm(Module[[Tensor], Tensor]):
    """x / sqrt(mean(x²) + eps) * weight, over the last axis."""

    def __init__(self, dim: int, *, eps: float = 1e-6) -> None:
        # A learned scale per feature, starting as the identity; no shift.
        # TODO: the scale, a vector of shape [dim] that leaves x unchanged at
        #   first, and eps as the caller gave it. The attribute names are the
        #   checkpoint's (the page's "RMSNorm").
        self.weight = None
        self.eps = None
        # END TODO

    def forward(self, x: Tensor) -> Tensor:
        # The mean of the squares (no mean subtracted first), eps under the root.
        # TODO: x is [batch, seq, dim]: one mean square per token over its dim
        #   features, [batch, seq, 1]; then the layer's output, [batch, seq, dim]
        #   (the formula is the docstring's; the page's "A worked example" has
        #   its numbers for one row).
        mean_square = None
        return None
        # END TODO


class SwiGLUMLP(Module[[Tensor], Tensor]):
    """down(silu(gate(x)) * up(x)), without biases, named as in LlamaMLP."""

    def __init__(self, hidden_size: int, intermediate_size: int) -> None:
        # TODO: three linear layers without bias: gate_proj and up_proj widen
        #   hidden_size to intermediate_size, down_proj narrows it back (the
        #   page's "Shapes").
        self.gate_proj = None
        self.up_proj = None
        self.down_proj = None
        # END TODO

    def forward(self, x: Tensor) -> Tensor:
        # SiLU of the gate decides, feature by feature, how much of `up` passes.
        # TODO: [batch, seq, hidden] -> two [batch, seq, intermediate]
        #   projections; SiLU of the gate times up, feature by feature (the
        #   page's "The gate").
        gated = None
        # END TODO
        return self.down_proj(gated)
