"""Step 05: token embeddings.

The model cannot do arithmetic on token ids, so the first layer looks each id
up in a learned table ``wte`` (word token embeddings) of shape
[vocab_size, n_embd]: row t is the vector for token t.
"""

from max.experimental.nn import Embedding, Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config


class GPT2TokenEmbedding(Module[[Tensor], Tensor]):
    """Map token ids [batch, seq] to vectors [batch, seq, n_embd]."""

    def __init__(self, config: GPT2Config) -> None:
        self.wte = Embedding(config.vocab_size, dim=config.n_embd)

    def forward(self, input_ids: Tensor) -> Tensor:
        # An embedding lookup is a gather of rows: wte.weight[input_ids].
        return self.wte(input_ids)
