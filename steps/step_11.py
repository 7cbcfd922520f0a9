"""Step 11: the transformer block.

Goal: GPT2Block with ln_1, attn, ln_2 and mlp: attention then MLP, each as a
pre-norm residual sublayer (step 10).

Run: pixi run s11    (or: python -m tests.check 11)
Stuck? Read docs/src/step_11.md (pixi run book).
"""

from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from solutions.solution_03 import LayerNorm
from solutions.solution_04 import GPT2MLP
from solutions.solution_09 import GPT2MultiHeadAttention
from solutions.solution_10 import pre_norm_residual


class GPT2Block(Module[[Tensor], Tensor]):
    """ln_1 -> attention -> add, then ln_2 -> MLP -> add."""

    def __init__(self, config: GPT2Config) -> None:
        # TODO: two layer norms as wide as the hidden state, with the config's
        #   epsilon; step 09's attention; step 04's MLP, as wide inside as the
        #   config says (n_inner). The names ln_1, attn, ln_2, mlp are the
        #   checkpoint's (the page's parameter table).
        self.ln_1 = None
        self.attn = None
        self.ln_2 = None
        self.mlp = None
        # END TODO

    def forward(self, hidden_states: Tensor) -> Tensor:
        # TODO: two pre-norm residual halves (step 10), chained: attention reading
        #   ln_1's copy of the stream, then the MLP reading ln_2's copy of what the
        #   first half returns. [batch, seq, n_embd] in, the same shape out.
        hidden_states = None
        return None
        # END TODO
