"""Step 04: the feed-forward network (MLP).

Goal: GPT2MLP widens each hidden vector to ``intermediate_size``, applies GELU
(tanh approximation) and projects back to n_embd.

Run: pixi run s04    (or: python -m tests.check 04)
Stuck? Read docs/src/step_04.md (pixi run book).
"""

from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config


class GPT2MLP(Module[[Tensor], Tensor]):
    """Linear -> GELU (tanh approximation) -> Linear, named as in GPT-2."""

    def __init__(self, intermediate_size: int, config: GPT2Config) -> None:
        embed_dim = config.n_embd
        # TODO: c_fc maps embed_dim -> intermediate_size, c_proj maps it back.
        #   Both are learned linear layers with a bias; the names must be c_fc and
        #   c_proj so GPT-2's weights load into them later (the page's "Shapes"
        #   lists their weights, "MAX operations" the layer).
        self.c_fc = None
        self.c_proj = None
        # END TODO

    def forward(self, hidden_states: Tensor) -> Tensor:
        # TODO: c_fc, then GELU, then c_proj.
        #   [batch, seq, embed_dim] -> [batch, seq, intermediate_size] -> the same
        #   shape, each number through GELU -> [batch, seq, embed_dim]. GPT-2 was
        #   trained with GELU's tanh approximation, not the exact form MAX
        #   computes by default (the page's "A worked example" tells them apart).
        hidden_states = None
        hidden_states = None
        return None
        # END TODO
