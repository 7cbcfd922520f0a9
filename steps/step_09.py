"""Step 09: multi-head attention.

Goal: GPT2MultiHeadAttention runs n_head attentions side by side, each on a
head_dim = n_embd / n_head slice, then merges the heads and mixes them with
``c_proj``. The names match Hugging Face's GPT2Attention so weights load later.

Run: pixi run s09    (or: python -m tests.check 09)
Stuck? Read docs/src/step_09.md (pixi run book).
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
        # TODO: c_attn projects to query, key and value at once (3 * embed_dim);
        #   c_proj mixes the merged heads (embed_dim -> embed_dim). Both with bias.
        self.c_attn = None
        self.c_proj = None
        # END TODO

    def _split_heads(self, tensor: Tensor, num_heads: int, attn_head_size: int) -> Tensor:
        """[batch, seq, n_embd] -> [batch, heads, seq, head_dim]."""
        batch, seq_length = tensor.shape[0], tensor.shape[1]
        # TODO: two moves. Cut each token's features into heads (a reshape: head 0
        #   owns the first head_dim features), then bring the heads axis in front of
        #   seq (a transpose). Reshaping straight to the final shape scrambles tokens.
        tensor = None
        return None
        # END TODO

    def _merge_heads(self, tensor: Tensor, num_heads: int, attn_head_size: int) -> Tensor:
        """[batch, heads, seq, head_dim] -> [batch, seq, n_embd]."""
        # TODO: undo _split_heads in the opposite order: move seq back in front of
        #   the heads, then flatten the heads into one feature axis.
        tensor = None
        batch, seq_length = tensor.shape[0], tensor.shape[1]
        return None
        # END TODO

    def _attn(self, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        """Causal scaled dot-product attention, run for every head at once."""
        # TODO: step 08's attention: scores, scale by sqrt(head_dim), add the
        #   causal mask, softmax over the keys, weighted sum of values.
        #   Hint: self.head_dim is already a Python int.
        scores = None
        scores = None
        seq_length = query.shape[-2]
        scores = None
        weights = None
        return None
        # END TODO

    def forward(self, hidden_states: Tensor) -> Tensor:
        # TODO: c_attn, then cut its output into query, key, value (step 07).
        query, key, value = None, None, None
        # END TODO
        # TODO: split each into heads (mind the order of the size arguments).
        query = None
        key = None
        value = None
        # END TODO

        # TODO: attend, merge the heads, project with c_proj.
        attn_output = None
        attn_output = None
        return None
        # END TODO
