"""Step 09: multi-head attention.

One attention is one way of relating positions. GPT-2 runs n_head of them side
by side, each on its own head_dim = n_embd / n_head slice of the projections,
then concatenates the heads and mixes them with an output projection ``c_proj``.
The attribute names match Hugging Face's GPT2Attention, so pretrained weights
load by name later.
"""

import math

from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from solutions.solution_02 import causal_mask


class GPT2MultiHeadAttention(Module[[Tensor], Tensor]):
    """Causal multi-head self-attention, laid out like GPT-2's."""

    def __init__(self, config: GPT2Config) -> None:
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.head_dim = self.embed_dim // self.num_heads
        self.c_attn = Linear(self.embed_dim, 3 * self.embed_dim, bias=True)
        self.c_proj = Linear(self.embed_dim, self.embed_dim, bias=True)

    def _split_heads(self, tensor: Tensor, num_heads: int, attn_head_size: int) -> Tensor:
        """[batch, seq, n_embd] -> [batch, heads, seq, head_dim]."""
        batch, seq_length = tensor.shape[0], tensor.shape[1]
        # Cut the feature axis into heads, then move heads before the sequence
        # so each head is an independent [seq, head_dim] matrix.
        tensor = tensor.reshape([batch, seq_length, num_heads, attn_head_size])
        return tensor.transpose(1, 2)

    def _merge_heads(self, tensor: Tensor, num_heads: int, attn_head_size: int) -> Tensor:
        """[batch, heads, seq, head_dim] -> [batch, seq, n_embd]."""
        # Undo _split_heads: sequence back in front of heads, then flatten.
        tensor = tensor.transpose(1, 2)
        batch, seq_length = tensor.shape[0], tensor.shape[1]
        return tensor.reshape([batch, seq_length, num_heads * attn_head_size])

    def _attn(self, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        """Causal scaled dot-product attention, run for every head at once."""
        scores = query @ key.transpose(-1, -2)
        scores = scores / math.sqrt(self.head_dim)
        seq_length = query.shape[-2]
        scores = scores + causal_mask(seq_length, 0, dtype=scores.dtype, device=scores.device)
        weights = F.softmax(scores, axis=-1)
        return weights @ value

    def forward(self, hidden_states: Tensor) -> Tensor:
        query, key, value = F.split(self.c_attn(hidden_states), [self.embed_dim] * 3, axis=-1)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)

        attn_output = self._attn(query, key, value)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        return self.c_proj(attn_output)
