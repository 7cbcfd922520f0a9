"""Step 21: grouped-query attention.

Goal: attention with fewer key/value heads than query heads. Each key/value
head serves a group of consecutive query heads, so the KV cache holds
num_key_value_heads heads per layer instead of num_attention_heads. Queries
and keys turn with step 19's rotary embeddings; the cache keeps the shared
heads, never their repeats.

Run: pixi run s21    (or: python -m tests.check 21)
Stuck? Read docs/src/step_21.md (pixi run book).
"""

import math
from dataclasses import dataclass

from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from solutions.solution_02 import causal_mask
from solutions.solution_19 import apply_rope, rope_tables


@dataclass
class LlamaConfig:
    """The hyperparameters of a Llama-style model, named as in its config.json."""

    vocab_size: int = 49152
    hidden_size: int = 576
    intermediate_size: int = 1536
    num_hidden_layers: int = 30
    num_attention_heads: int = 9
    num_key_value_heads: int = 3
    head_dim: int | None = None  # hidden_size // num_attention_heads unless given
    rope_theta: float = 100000.0
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = True
    max_position_embeddings: int = 8192
    sliding_window: int | None = None  # step 22: how many recent tokens a query sees

    def __post_init__(self) -> None:
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads


def repeat_kv(x: Tensor, group: int) -> Tensor:
    """[batch, kv_heads, seq, head_dim] -> [batch, kv_heads * group, seq, head_dim]:
    key/value head j serves query heads j * group .. (j + 1) * group - 1."""
    batch, kv_heads, seq, head_dim = x.shape
    # TODO: each key/value head repeated `group` times in a row along the heads
    #   axis: heads [k0, k1] with group 2 become [k0, k0, k1, k1], not [k0, k1,
    #   k0, k1] (the page's "Which query heads share a head").
    return None
    # END TODO


class GroupedQueryAttention(Module[..., tuple[Tensor, Tensor, Tensor]]):
    """Causal self-attention with rotary positions, num_attention_heads query
    heads sharing num_key_value_heads key/value heads, and a KV cache."""

    def __init__(self, config: LlamaConfig) -> None:
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.rope_theta = config.rope_theta
        hidden, head_dim = config.hidden_size, config.head_dim
        # TODO: four linear layers without bias: q_proj makes head_dim features
        #   for every query head, k_proj and v_proj for every key/value head,
        #   o_proj maps the query heads' outputs back to hidden (the page's
        #   "Shapes").
        self.q_proj = None
        self.k_proj = None
        self.v_proj = None
        self.o_proj = None
        # END TODO

    def _split_heads(self, x: Tensor, num_heads: int) -> Tensor:
        """[batch, seq, num_heads * head_dim] -> [batch, num_heads, seq, head_dim]."""
        batch, seq = x.shape[0], x.shape[1]
        return x.reshape([batch, seq, num_heads, self.head_dim]).transpose(1, 2)

    def forward(
        self, hidden_states: Tensor, past_key: Tensor, past_value: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """hidden_states [batch, seq, hidden]; the caches [batch, kv_heads, past,
        head_dim]. Returns the output [batch, seq, hidden] and the grown caches."""
        # TODO: the three projections of hidden_states, each split into its own
        #   number of heads: [batch, heads, seq, head_dim] (the page's "Shapes").
        query = None
        key = None
        value = None
        # END TODO

        seq_length, num_cached = query.shape[2], past_key.shape[2]
        positions = Tensor.arange(
            num_cached, num_cached + seq_length, dtype=DType.float32, device=query.device
        )
        cos, sin = rope_tables(positions, self.head_dim, self.rope_theta)
        query = apply_rope(query, cos, sin)
        # The cache keeps the num_kv_heads heads, rotated: the group shares them.
        key = F.concat([past_key, apply_rope(key, cos, sin)], axis=2)
        value = F.concat([past_value, value], axis=2)

        # TODO: keys and values with one head per query head, for the scores
        #   below: [batch, num_heads, past + seq, head_dim] (the page's "Which
        #   query heads share a head").
        keys = None
        values = None
        # END TODO

        scores = query @ keys.transpose(-1, -2) / math.sqrt(self.head_dim)
        # One new token is the last position and sees everything: no mask (step 17).
        if seq_length != 1:
            scores = scores + causal_mask(
                seq_length, int(num_cached), dtype=scores.dtype, device=scores.device
            )
        weights = F.softmax(scores, axis=-1)
        attn_output = (weights @ values).transpose(1, 2)
        batch = attn_output.shape[0]
        attn_output = attn_output.reshape([batch, seq_length, self.num_heads * self.head_dim])
        return self.o_proj(attn_output), key, value
