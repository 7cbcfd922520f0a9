"""Step 25: the absorbed decode.

Step 24's attention expands every cached latent into every head's key and
value at every step: for one new token after n cached ones, kv_b_proj runs n
times. Matrix products regroup, so it need not. A head's score against a
cached token is

    q_nope . (W_UK c) = (W_UK^T q_nope) . c

where c is the token's latent and W_UK that head's block of kv_b_proj's key
half: fold W_UK into the query once and score the latents themselves. The
same goes for the output: the weighted sum of W_UV c is W_UV applied once to
the weighted sum of the latents. The decode then reads the cache as it is,
kv_lora_rank + qk_rope_head_dim numbers per token, and never expands it.
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
    per_head = attention.kv_b_proj.weight.reshape(
        [
            config.num_attention_heads,
            config.qk_nope_head_dim + config.v_head_dim,
            config.kv_lora_rank,
        ]
    )
    # Row block h of kv_b_proj makes head h's key then its value (step 24's expand).
    key_half, value_half = F.split(per_head, [config.qk_nope_head_dim, config.v_head_dim], axis=1)
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

    # The query moves into latent space, one product per head: [batch, heads,
    # 1, nope] @ [heads, nope, rank] -> [batch, heads, 1, rank].
    q_latent = q_nope @ key_half
    # One new token, so its heads can be the rows of one matrix, [batch, heads,
    # features]: every head reads the same latents and rotary keys, and one
    # product per sequence scores all heads against all cached tokens.
    q_latent = q_latent.reshape([batch, heads, config.kv_lora_rank])
    q_rope = q_rope.reshape([batch, heads, config.qk_rope_head_dim])
    scores = q_latent @ latent.transpose(-1, -2) + q_rope @ rope_key.transpose(-1, -2)
    # The scale stays that of the full query . key: the regrouping changed no score.
    weights = F.softmax(scores / math.sqrt(config.qk_head_dim), axis=-1)

    # The weighted sum of the latents first, then each head's value half, once.
    context = weights @ latent
    context = context.reshape([batch, heads, 1, config.kv_lora_rank])
    attn_output = context @ value_half.transpose(-1, -2)
    attn_output = attn_output.transpose(1, 2).reshape([batch, 1, heads * config.v_head_dim])
    return attention.o_proj(attn_output), latent, rope_key
