"""Step 20: RMSNorm and the SwiGLU MLP.

Llama keeps GPT-2's pre-norm block and changes what is inside it. RMSNorm
drops LayerNorm's mean and bias: it divides each token's features by their
root mean square and scales them, which is cheaper and trains as well. The MLP
becomes a gated one: two projections of the input, one through SiLU acting as
a gate on the other, multiplied feature by feature, then projected back. No
layer has a bias. The names are those of transformers' LlamaRMSNorm and
LlamaMLP, so Llama checkpoints load by name.
"""

from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor


class RMSNorm(Module[[Tensor], Tensor]):
    """x / sqrt(mean(x²) + eps) * weight, over the last axis."""

    def __init__(self, dim: int, *, eps: float = 1e-6) -> None:
        # A learned scale per feature, starting as the identity; no shift.
        self.weight = Tensor.ones([dim])
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        # The mean of the squares (no mean subtracted first), eps under the root.
        mean_square = (x * x).mean(axis=-1)
        return x * F.rsqrt(mean_square + self.eps) * self.weight


class SwiGLUMLP(Module[[Tensor], Tensor]):
    """down(silu(gate(x)) * up(x)), without biases, named as in LlamaMLP."""

    def __init__(self, hidden_size: int, intermediate_size: int) -> None:
        self.gate_proj = Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        # SiLU of the gate decides, feature by feature, how much of `up` passes.
        gated = F.silu(self.gate_proj(x)) * self.up_proj(x)
        return self.down_proj(gated)
