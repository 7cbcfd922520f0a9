"""Step 04: the feed-forward network (MLP).

After attention has mixed information between positions, each position is
processed on its own by a two-layer MLP: widen to ``intermediate_size`` (4x the
hidden width in GPT-2), apply GELU, and project back down.
"""

from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config


class GPT2MLP(Module[[Tensor], Tensor]):
    """Linear -> GELU (tanh approximation) -> Linear, named as in GPT-2."""

    def __init__(self, intermediate_size: int, config: GPT2Config) -> None:
        embed_dim = config.n_embd
        self.c_fc = Linear(embed_dim, intermediate_size, bias=True)
        self.c_proj = Linear(intermediate_size, embed_dim, bias=True)

    def forward(self, hidden_states: Tensor) -> Tensor:
        hidden_states = self.c_fc(hidden_states)
        # GPT-2 was trained with the tanh approximation of GELU; the exact
        # (erf) form differs by up to ~1e-3 and the logits would drift.
        hidden_states = F.gelu(hidden_states, approximate="tanh")
        return self.c_proj(hidden_states)
