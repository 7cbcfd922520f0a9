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
        # TODO: the two projections, c_attn and c_proj, both with a bias.
        #   c_attn makes query, key and value at once (embed_dim -> 3 * embed_dim);
        #   c_proj mixes the merged heads (embed_dim -> embed_dim). The names are
        #   the checkpoint's (the page's "Shapes").
        self.c_attn = None
        self.c_proj = None
        # END TODO

    def _split_heads(self, tensor: Tensor, num_heads: int, attn_head_size: int) -> Tensor:
        """[batch, seq, n_embd] -> [batch, heads, seq, head_dim]."""
        batch, seq_length = tensor.shape[0], tensor.shape[1]
        # TODO: cut the features into heads, in two moves.
        #   A reshape cuts each token's features (head 0 owns the first head_dim of
        #   them), then a transpose brings the heads axis in front of seq.
        #   Reshaping straight to the final shape scrambles tokens.
        #   [batch, seq, n_embd] -> [batch, seq, heads, head_dim] -> [batch, heads,
        #   seq, head_dim] (the page's "Splitting and merging heads").
        tensor = None
        return None
        # END TODO

    def _merge_heads(self, tensor: Tensor, num_heads: int, attn_head_size: int) -> Tensor:
        """[batch, heads, seq, head_dim] -> [batch, seq, n_embd]."""
        # TODO: undo _split_heads, in the opposite order.
        #   Move seq back in front of the heads, then flatten the heads into one
        #   feature axis.
        #   [batch, heads, seq, head_dim] -> [batch, seq, heads, head_dim] -> [batch,
        #   seq, n_embd]; batch and seq are read after the first move.
        tensor = None
        batch, seq_length = tensor.shape[0], tensor.shape[1]
        return None
        # END TODO

    def _attn(self, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        """Causal scaled dot-product attention, run for every head at once."""
        # TODO: step 08's attention, for every head at once.
        #   Scores, scale by sqrt(head_dim), add the causal mask, softmax over the
        #   keys, weighted sum of values.
        #   [batch, heads, seq, head_dim] in and out; the scores and weights are
        #   [batch, heads, seq, seq]. self.head_dim is already a Python int.
        scores = None
        scores = None
        seq_length = query.shape[-2]
        scores = None
        weights = None
        return None
        # END TODO

    def forward(self, hidden_states: Tensor) -> Tensor:
        # TODO: c_attn, then cut its output into query, key, value (step 07).
        #   [batch, seq, 3 * n_embd] -> three [batch, seq, n_embd], in that order.
        query, key, value = None, None, None
        # END TODO
        # TODO: split each into heads (mind the order of the size arguments).
        #   Each becomes [batch, heads, seq, head_dim]; the methods take (tensor,
        #   num_heads, attn_head_size).
        query = None
        key = None
        value = None
        # END TODO

        # TODO: attend, merge the heads, project with c_proj.
        #   [batch, heads, seq, head_dim] -> [batch, seq, n_embd] -> c_proj, the
        #   same shape: each output feature draws on every head (the page's "Why
        #   `c_proj`?").
        attn_output = None
        attn_output = None
        return None
        # END TODO
