"""Step 07: query, key and value projections.

Goal: compute query, key and value with one Linear ``c_attn`` three times as
wide as the hidden state, and split its output in three.

Run: pixi run s07    (or: python -m tests.check 07)
Stuck? Read docs/src/step_07.md (pixi run book).
"""

from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config


class GPT2QKVProjection(Module[..., tuple[Tensor, Tensor, Tensor]]):
    """Project [batch, seq, n_embd] to query, key and value of the same shape."""

    def __init__(self, config: GPT2Config) -> None:
        self.embed_dim = config.n_embd
        # TODO: one Linear from embed_dim to 3 * embed_dim, with a bias.
        #   Its weight is [3 * embed_dim, embed_dim]: the query, key and value
        #   projections stacked (the page's "Shapes" and "A worked example").
        self.c_attn = None
        # END TODO

    def forward(self, hidden_states: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # TODO: project, then cut the features into query, key and value.
        #   [batch, seq, embed_dim] -> c_attn -> [batch, seq, 3 * embed_dim] ->
        #   three [batch, seq, embed_dim] pieces along the last axis, in the
        #   order query, key, value (the checkpoint's). The page's "MAX
        #   operations": the operation that cuts a tensor, and its default axis.
        qkv = None
        query, key, value = None, None, None
        # END TODO
        return query, key, value
