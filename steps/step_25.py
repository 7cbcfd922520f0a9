"""Step 25: the absorbed decode.

Goal: decode one token with step 24's attention without expanding a single
cached latent. kv_b_proj's key half is folded into the query (the scores are
taken in latent space), its value half is applied once after the weighted
sum of latents. Same numbers as step 24, and the decode reads only the cache:
kv_lora_rank + qk_rope_head_dim numbers per token.

Run: pixi run s25    (or: python -m tests.check 25)
Stuck? Read docs/src/step_25.md (pixi run book).
"""

import math

from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor

from solutions.solution_24 import MultiHeadLatentAttention


def absorbed_weights(attention: MultiHeadLatentAttention) -> tuple[Tensor, Tensor]:
    """kv_b_proj's weight [heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank]
    cut into each head's key half [heads, qk_nope_head_dim, kv_lora_rank] and
    value half [heads, v_head_dim, kv_lora_rank]."""
    config = attention.config
    # TODO: kv_b_proj's weight as one block of rows per head, each block split
    #   into the rows that make the head's key (first) and those that make its
    #   value. The page's "Cutting kv_b_proj".
    key_half = None
    value_half = None
    # END TODO
    return key_half, value_half


def absorbed_decode(
    attention: MultiHeadLatentAttention,
    hidden_states: Tensor,
    past_latent: Tensor,
    past_rope_key: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    """One new token [batch, 1, hidden] after the cached latents [batch, past,
    kv_lora_rank] and rotary keys [batch, past, qk_rope_head_dim]: the same
    output and caches as attention(hidden_states, past_latent, past_rope_key),
    without expanding any latent."""
    config = attention.config
    num_cached = past_latent.shape[1]
    positions = Tensor.arange(
        num_cached, num_cached + 1, dtype=DType.float32, device=hidden_states.device
    )
    q_nope, q_rope = attention.query(hidden_states, positions)
    latent, rope_key = attention.compress(hidden_states, positions)
    latent = F.concat([past_latent, latent], axis=1)
    rope_key = F.concat([past_rope_key, rope_key], axis=1)
    key_half, value_half = absorbed_weights(attention)
    batch, heads = hidden_states.shape[0], config.num_attention_heads

    # TODO: the query in latent space, [batch, heads, 1, kv_lora_rank]: each
    #   head's q_nope through its own key half (the page's "Scores in latent
    #   space").
    q_latent = None
    # END TODO
    # One new token, so its heads can be the rows of one matrix, [batch, heads,
    # features]: every head reads the same latents and rotary keys, and one
    # product per sequence scores all heads against all cached tokens.
    q_latent = q_latent.reshape([batch, heads, config.kv_lora_rank])
    q_rope = q_rope.reshape([batch, heads, config.qk_rope_head_dim])
    # TODO: every head's scores against every cached token, [batch, heads,
    #   past + 1]: the latent part plus the rotary part; then the attention
    #   weights (the page's "Scores in latent space").
    scores = None
    weights = None
    # END TODO

    # The weighted sum of the latents first, then each head's value half, once.
    # TODO: each head's weighted sum of the latents, [batch, heads,
    #   kv_lora_rank] (the page's "Values after the sum").
    context = None
    # END TODO
    context = context.reshape([batch, heads, 1, config.kv_lora_rank])
    # TODO: each head's value half applied to its sum, [batch, heads, 1,
    #   v_head_dim] (the page's "Values after the sum").
    attn_output = None
    # END TODO
    attn_output = attn_output.transpose(1, 2).reshape([batch, 1, heads * config.v_head_dim])
    return attention.o_proj(attn_output), latent, rope_key
