"""Step 21: grouped-query attention.

A KV cache stores every layer's keys and values for every token: for GPT-2
124M that is 72 KiB per token in float32, and a model with more layers and a
longer context runs out of memory on the cache before the weights. Grouped-
query attention (GQA) keeps many query heads but computes fewer key/value
heads: each key/value head serves a group of consecutive query heads. The
cache shrinks by the group size; the quality barely moves. Llama 3,
Qwen 2.5, Mistral and SmolLM2 all use it.

The projections are named as in transformers' LlamaAttention (q_proj, k_proj,
v_proj, o_proj, no biases), so Llama checkpoints load by name.
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
    # A new axis after the heads, broadcast to the group size, then folded
    # into the heads axis: each head appears `group` times in a row.
    x = x.reshape([batch, kv_heads, 1, seq, head_dim])
    x = x.broadcast_to([batch, kv_heads, group, seq, head_dim])
    return x.reshape([batch, kv_heads * group, seq, head_dim])


class GroupedQueryAttention(Module[..., tuple[Tensor, Tensor, Tensor]]):
    """Causal self-attention with rotary positions, num_attention_heads query
    heads sharing num_key_value_heads key/value heads, and a KV cache."""

    def __init__(self, config: LlamaConfig) -> None:
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.rope_theta = config.rope_theta
        hidden, head_dim = config.hidden_size, config.head_dim
        self.q_proj = Linear(hidden, self.num_heads * head_dim, bias=False)
        self.k_proj = Linear(hidden, self.num_kv_heads * head_dim, bias=False)
        self.v_proj = Linear(hidden, self.num_kv_heads * head_dim, bias=False)
        self.o_proj = Linear(self.num_heads * head_dim, hidden, bias=False)

    def _split_heads(self, x: Tensor, num_heads: int) -> Tensor:
        """[batch, seq, num_heads * head_dim] -> [batch, num_heads, seq, head_dim]."""
        batch, seq = x.shape[0], x.shape[1]
        return x.reshape([batch, seq, num_heads, self.head_dim]).transpose(1, 2)

    def forward(
        self, hidden_states: Tensor, past_key: Tensor, past_value: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """hidden_states [batch, seq, hidden]; the caches [batch, kv_heads, past,
        head_dim]. Returns the output [batch, seq, hidden] and the grown caches."""
        query = self._split_heads(self.q_proj(hidden_states), self.num_heads)
        key = self._split_heads(self.k_proj(hidden_states), self.num_kv_heads)
        value = self._split_heads(self.v_proj(hidden_states), self.num_kv_heads)

        seq_length, num_cached = query.shape[2], past_key.shape[2]
        positions = Tensor.arange(
            num_cached, num_cached + seq_length, dtype=DType.float32, device=query.device
        )
        cos, sin = rope_tables(positions, self.head_dim, self.rope_theta)
        query = apply_rope(query, cos, sin)
        # The cache keeps the num_kv_heads heads, rotated: the group shares them.
        key = F.concat([past_key, apply_rope(key, cos, sin)], axis=2)
        value = F.concat([past_value, value], axis=2)

        group = self.num_heads // self.num_kv_heads
        keys = repeat_kv(key, group)
        values = repeat_kv(value, group)

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
