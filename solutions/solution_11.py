"""Step 11: the transformer block.

A GPT-2 block is two pre-norm residual sublayers: attention, which moves
information between positions, then the MLP, which processes each position on
its own. The names (ln_1, attn, ln_2, mlp) are Hugging Face's GPT2Block's.
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
        self.ln_1 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = GPT2MultiHeadAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(config.n_inner, config)

    def forward(self, hidden_states: Tensor) -> Tensor:
        hidden_states = pre_norm_residual(hidden_states, self.ln_1, self.attn)
        return pre_norm_residual(hidden_states, self.ln_2, self.mlp)
