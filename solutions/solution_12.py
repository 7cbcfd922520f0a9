"""Step 12: stacking transformer blocks into GPT2Model.

The body of GPT-2: embed the tokens and their positions, pass the result
through n_layer identical blocks (each with its own weights), and normalize
once more at the end. The names (wte, wpe, h, ln_f) are Hugging Face's.
"""

from max.dtype import DType
from max.experimental.nn import Embedding, Module, ModuleList
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from solutions.solution_03 import LayerNorm
from solutions.solution_11 import GPT2Block


class GPT2Model(Module[[Tensor], Tensor]):
    """Token ids [batch, seq] -> final hidden states [batch, seq, n_embd]."""

    def __init__(self, config: GPT2Config) -> None:
        self.wte = Embedding(config.vocab_size, dim=config.n_embd)
        self.wpe = Embedding(config.n_positions, dim=config.n_embd)
        # A ModuleList names its blocks h.0, h.1, ... like the checkpoint does.
        self.h = ModuleList([GPT2Block(config) for _ in range(config.n_layer)])
        self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)

    def forward(self, input_ids: Tensor) -> Tensor:
        seq_length = input_ids.shape[-1]
        positions = Tensor.arange(seq_length, dtype=DType.int64, device=input_ids.device)
        hidden_states = self.wte(input_ids) + self.wpe(positions)
        for block in self.h:
            hidden_states = block(hidden_states)
        # Pre-norm blocks leave the residual stream unnormalized; ln_f fixes
        # its scale before the language-model head reads it.
        return self.ln_f(hidden_states)
