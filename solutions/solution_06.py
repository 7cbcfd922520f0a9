"""Step 06: position embeddings.

Attention treats its input as a set: shuffle the tokens and, without more
information, every position sees the same thing. GPT-2 tells positions apart
with a second learned table ``wpe`` of shape [n_positions, n_embd], looked up
with the positions 0..seq-1 and added to the token embeddings.
"""

from max.dtype import DType
from max.experimental.nn import Embedding, Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config


class GPT2Embeddings(Module[[Tensor], Tensor]):
    """Token embedding plus position embedding, as at the bottom of GPT-2."""

    def __init__(self, config: GPT2Config) -> None:
        self.wte = Embedding(config.vocab_size, dim=config.n_embd)
        self.wpe = Embedding(config.n_positions, dim=config.n_embd)

    def forward(self, input_ids: Tensor) -> Tensor:
        seq_length = input_ids.shape[-1]
        # Positions 0, 1, ..., seq_length-1 on the same device as the ids.
        positions = Tensor.arange(seq_length, dtype=DType.int64, device=input_ids.device)
        # [batch, seq, n_embd] + [seq, n_embd]: the positions broadcast over
        # the batch, so every sequence gets the same position vectors.
        return self.wte(input_ids) + self.wpe(positions)
