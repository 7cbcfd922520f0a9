"""Step 07: query, key and value projections.

Attention compares what each position is looking for (its query) with what
every position offers (its key), and then mixes what they carry (their value).
All three are linear maps of the same hidden state, so GPT-2 computes them with
one Linear three times as wide, ``c_attn``, and splits the result.
"""

from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config


class GPT2QKVProjection(Module[..., tuple[Tensor, Tensor, Tensor]]):
    """Project [batch, seq, n_embd] to query, key and value of the same shape."""

    def __init__(self, config: GPT2Config) -> None:
        self.embed_dim = config.n_embd
        self.c_attn = Linear(self.embed_dim, 3 * self.embed_dim, bias=True)

    def forward(self, hidden_states: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        qkv = self.c_attn(hidden_states)  # [batch, seq, 3 * n_embd]
        # The checkpoint stores the three projections side by side in this
        # order, so the split must be query, key, value along the last axis.
        query, key, value = F.split(qkv, [self.embed_dim] * 3, axis=-1)
        return query, key, value
