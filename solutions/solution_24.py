"""Step 24: multi-head latent attention (MLA), as DeepSeek-V3 defines it.

Grouped-query attention (step 21) shrinks the KV cache by sharing key/value
heads between query heads. DeepSeek-V2 and V3 shrink it further without
sharing heads: every token's keys and values are squeezed together into one
small latent vector (kv_lora_rank features), and the cache keeps only that
latent. At attention time kv_b_proj expands the cached latents back into each
head's key and value.

Rotary positions do not survive that squeeze (a rotation that depends on the
position cannot be folded into a fixed expansion), so each head's query and
key are split: a part without position, which goes through the latent, and a
small rotary part. The rotary key is computed straight from the token, is
shared by every head, and is cached beside the latent. A DeepSeek-V3 layer
caches 512 + 64 numbers per token where multi-head attention of the same
shapes would cache 128 heads x (192 + 128).

The projections and norms are named as in transformers' DeepseekV3Attention,
so DeepSeek checkpoints load by name.
"""

import math
from dataclasses import dataclass

from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from solutions.solution_02 import causal_mask
from solutions.solution_19 import apply_rope, rope_tables
from solutions.solution_20 import RMSNorm


@dataclass
class MLAConfig:
    """The attention's hyperparameters, named as in DeepSeek-V3's config.json."""

    hidden_size: int = 7168
    num_attention_heads: int = 128
    q_lora_rank: int = 1536  # the query's compressed width
    kv_lora_rank: int = 512  # the latent every head's key and value come from
    qk_nope_head_dim: int = 128  # each head's query/key features without position
    qk_rope_head_dim: int = 64  # each head's rotary query/key features
    v_head_dim: int = 128
    rope_theta: float = 10000.0
    rope_interleave: bool = True  # DeepSeek's weights pair features (2i, 2i + 1)

    @property
    def qk_head_dim(self) -> int:
        """The width of one head's query and key: both parts side by side."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim


def deinterleave(x: Tensor) -> Tensor:
    """(x0, x1, x2, x3, ...) -> (x0, x2, ..., x1, x3, ...) on the last axis.

    DeepSeek's checkpoints pair rotary features (2i, 2i + 1); step 19's
    apply_rope pairs (i, i + d/2). Regrouping the features first lets the same
    apply_rope turn DeepSeek's pairs, as transformers does."""
    *lead, dim = x.shape
    pairs = x.reshape([*lead, int(dim) // 2, 2])
    return pairs.transpose(-1, -2).reshape([*lead, dim])


class MultiHeadLatentAttention(Module[..., tuple[Tensor, Tensor, Tensor]]):
    """Causal attention whose cache holds, per token, one normalised latent and
    one rotary key shared by every head."""

    def __init__(self, config: MLAConfig) -> None:
        self.config = config
        self.num_heads = config.num_attention_heads
        hidden, heads = config.hidden_size, config.num_attention_heads
        # The query's low-rank path: down to q_lora_rank, normalised, up to
        # every head's two parts.
        self.q_a_proj = Linear(hidden, config.q_lora_rank, bias=False)
        self.q_a_layernorm = RMSNorm(config.q_lora_rank)
        self.q_b_proj = Linear(config.q_lora_rank, heads * config.qk_head_dim, bias=False)
        # Keys and values: one projection makes the latent and the single
        # rotary key together ("with_mqa": that key is shared like MQA's).
        self.kv_a_proj_with_mqa = Linear(
            hidden, config.kv_lora_rank + config.qk_rope_head_dim, bias=False
        )
        self.kv_a_layernorm = RMSNorm(config.kv_lora_rank)
        self.kv_b_proj = Linear(
            config.kv_lora_rank,
            heads * (config.qk_nope_head_dim + config.v_head_dim),
            bias=False,
        )
        self.o_proj = Linear(heads * config.v_head_dim, hidden, bias=False)

    def rotate(self, x: Tensor, positions: Tensor) -> Tensor:
        """Step 19's rotation of the rotary features x [..., seq, qk_rope_head_dim]."""
        cos, sin = rope_tables(positions, self.config.qk_rope_head_dim, self.config.rope_theta)
        if self.config.rope_interleave:
            x = deinterleave(x)
        return apply_rope(x, cos, sin)

    def query(self, hidden_states: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """Each head's query: the part without position [batch, heads, seq,
        qk_nope_head_dim] and the rotated part [batch, heads, seq, qk_rope_head_dim]."""
        config = self.config
        batch, seq_length = hidden_states.shape[0], hidden_states.shape[1]
        query = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))
        query = query.reshape([batch, seq_length, self.num_heads, config.qk_head_dim])
        q_nope, q_rope = F.split(
            query.transpose(1, 2), [config.qk_nope_head_dim, config.qk_rope_head_dim], axis=-1
        )
        q_rope = self.rotate(q_rope, positions)
        return q_nope, q_rope

    def compress(self, hidden_states: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """What the cache keeps for new tokens: the normalised latent [batch,
        seq, kv_lora_rank] and the rotated rotary key [batch, seq, qk_rope_head_dim]."""
        config = self.config
        compressed = self.kv_a_proj_with_mqa(hidden_states)
        latent, rope_key = F.split(
            compressed, [config.kv_lora_rank, config.qk_rope_head_dim], axis=-1
        )
        # Only the latent is normalised; the rotary key turns by its position.
        latent = self.kv_a_layernorm(latent)
        rope_key = self.rotate(rope_key, positions)
        return latent, rope_key

    def expand(self, latent: Tensor) -> tuple[Tensor, Tensor]:
        """Every cached latent [batch, total, kv_lora_rank] as each head's key
        without position [batch, heads, total, qk_nope_head_dim] and value
        [batch, heads, total, v_head_dim]."""
        config = self.config
        batch, total = latent.shape[0], latent.shape[1]
        expanded = self.kv_b_proj(latent).reshape(
            [batch, total, self.num_heads, config.qk_nope_head_dim + config.v_head_dim]
        )
        k_nope, value = F.split(
            expanded.transpose(1, 2), [config.qk_nope_head_dim, config.v_head_dim], axis=-1
        )
        return k_nope, value

    def forward(
        self, hidden_states: Tensor, past_latent: Tensor, past_rope_key: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """hidden_states [batch, seq, hidden]; past_latent [batch, past,
        kv_lora_rank] and past_rope_key [batch, past, qk_rope_head_dim]. Returns
        the output [batch, seq, hidden] and both caches grown to past + seq."""
        config = self.config
        seq_length, num_cached = hidden_states.shape[1], past_latent.shape[1]
        positions = Tensor.arange(
            num_cached,
            num_cached + seq_length,
            dtype=DType.float32,
            device=hidden_states.device,
        )
        q_nope, q_rope = self.query(hidden_states, positions)
        latent, rope_key = self.compress(hidden_states, positions)
        latent = F.concat([past_latent, latent], axis=1)
        rope_key = F.concat([past_rope_key, rope_key], axis=1)

        # Expand-then-attend: every cached latent becomes every head's key
        # (without position) and value again, at every step.
        k_nope, value = self.expand(latent)
        batch, total = latent.shape[0], latent.shape[1]
        # The one rotary key serves every head: a head axis of 1, broadcast.
        k_rope = rope_key.reshape([batch, 1, total, config.qk_rope_head_dim])
        k_rope = k_rope.broadcast_to([batch, self.num_heads, total, config.qk_rope_head_dim])
        query = F.concat([q_nope, q_rope], axis=-1)
        key = F.concat([k_nope, k_rope], axis=-1)

        scores = query @ key.transpose(-1, -2) / math.sqrt(config.qk_head_dim)
        # One new token is the last position and sees everything: no mask (step 17).
        if seq_length != 1:
            scores = scores + causal_mask(
                seq_length, int(num_cached), dtype=scores.dtype, device=scores.device
            )
        weights = F.softmax(scores, axis=-1)
        attn_output = (weights @ value).transpose(1, 2)
        attn_output = attn_output.reshape([batch, seq_length, self.num_heads * config.v_head_dim])
        return self.o_proj(attn_output), latent, rope_key
