"""Step 13: the language-model head.

GPT2Model turns tokens into hidden states; the head turns each hidden state
into one score (logit) per vocabulary entry for the next token. GPT-2 has no
separate output matrix: the head reuses the token embedding table, so a hidden
state scores high for a token when it points the same way as that token's
embedding. The names (transformer, lm_head) are Hugging Face's.
"""

from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from solutions.solution_12 import GPT2Model


class MaxGPT2LMHeadModel(Module[[Tensor], Tensor]):
    """Token ids [batch, seq] -> next-token logits [batch, seq, vocab_size]."""

    def __init__(self, config: GPT2Config) -> None:
        self.config = config
        self.transformer = GPT2Model(config)
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)
        # Tie the head to the embedding table, as GPT-2 does: one matrix,
        # [vocab_size, n_embd], which is exactly Linear's [out, in] layout.
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, input_ids: Tensor) -> Tensor:
        return self.lm_head(self.transformer(input_ids))
