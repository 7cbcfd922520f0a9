"""Step 24: multi-head latent attention (MLA), as DeepSeek-V3 defines it.

Goal: attention whose KV cache holds, per token, one small latent vector and
one rotary key shared by every head, instead of every head's keys and values.
The query goes through a low-rank path; keys and values are compressed
together into the latent and expanded again by kv_b_proj when attending.
Each head's query and key have a part without position (through the latent)
and a rotary part (step 19).

Run: pixi run s24    (or: python -m tests.check 24)
Stuck? Read docs/src/step_24.md (pixi run book).
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
        # TODO: the seven layers, named as in a DeepSeek-V3 checkpoint, none with
        #   a bias (the page's "Shapes"):
        #   - the query's path: q_a_proj (hidden -> q_lora_rank), q_a_layernorm
        #     (step 20's RMSNorm, its default eps), q_b_proj (-> every head's
        #     qk_head_dim features);
        #   - kv_a_proj_with_mqa: hidden -> the latent and ONE rotary key, side by side;
        #   - kv_a_layernorm: normalises the latent only;
        #   - kv_b_proj: latent -> every head's key without position and its value;
        #   - o_proj: every head's value-sized output -> hidden.
        self.q_a_proj = None
        self.q_a_layernorm = None
        self.q_b_proj = None
        self.kv_a_proj_with_mqa = None
        self.kv_a_layernorm = None
        self.kv_b_proj = None
        self.o_proj = None
        # END TODO

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
        # TODO: hidden_states through the query's low-rank path, cut into heads
        #   [batch, heads, seq, qk_head_dim], and each head's features split:
        #   the part without position first, then the rotary part, which turns
        #   by `positions` (self.rotate). The page's "The query".
        q_nope = None
        q_rope = None
        # END TODO
        return q_nope, q_rope

    def compress(self, hidden_states: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """What the cache keeps for new tokens: the normalised latent [batch,
        seq, kv_lora_rank] and the rotated rotary key [batch, seq, qk_rope_head_dim]."""
        config = self.config
        # TODO: kv_a_proj_with_mqa's output split into the latent (first
        #   kv_lora_rank features) and the rotary key; the latent normalised, the
        #   rotary key turned by `positions`. The page's "The latent".
        latent = None
        rope_key = None
        # END TODO
        return latent, rope_key

    def expand(self, latent: Tensor) -> tuple[Tensor, Tensor]:
        """Every cached latent [batch, total, kv_lora_rank] as each head's key
        without position [batch, heads, total, qk_nope_head_dim] and value
        [batch, heads, total, v_head_dim]."""
        config = self.config
        batch, total = latent.shape[0], latent.shape[1]
        # TODO: kv_b_proj of every latent, cut into heads [batch, heads, total,
        #   qk_nope_head_dim + v_head_dim], each head's block split into its key
        #   (first) and its value. The page's "Expanding the latent".
        k_nope = None
        value = None
        # END TODO
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
        # TODO: each head's full query and key, [batch, heads, seq or total,
        #   qk_head_dim], both in the same order (without position, then rotary):
        #   the one rotary key per token serves every head. Then the scores,
        #   scaled for dot products of qk_head_dim features. The page's "Scores".
        query = None
        key = None
        scores = None
        # END TODO
        # One new token is the last position and sees everything: no mask (step 17).
        if seq_length != 1:
            scores = scores + causal_mask(
                seq_length, int(num_cached), dtype=scores.dtype, device=scores.device
            )
        weights = F.softmax(scores, axis=-1)
        attn_output = (weights @ value).transpose(1, 2)
        attn_output = attn_output.reshape([batch, seq_length, self.num_heads * config.v_head_dim])
        return self.o_proj(attn_output), latent, rope_key
