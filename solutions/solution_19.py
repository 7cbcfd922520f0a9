"""Step 19: rotary position embeddings (RoPE).

GPT-2 adds a learned vector per position to each token before the first
layer. Llama and nearly every model since instead rotate each head's query
and key: features are taken in pairs, and pair i of the token at position p
turns by the angle p * theta ** (-2i / head_dim). A query at position m and a
key at position n then meet at the angle (m - n) * speed: their score depends
on how far apart they are, not on where they sit. Values carry content, not
position, and are never rotated.

Pairs follow transformers' Llama ("half-split"): pair i is feature i and
feature i + head_dim / 2, so checkpoints converted for it load unchanged.
"""

import math

from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor

from solutions.solution_02 import causal_mask


def rope_tables(positions: Tensor, head_dim: int, theta: float) -> tuple[Tensor, Tensor]:
    """cos and sin of every position's angles, each [seq, head_dim], for positions [seq]."""
    # One speed per pair, from 1 radian per position (pair 0) down to nearly
    # 1 / theta (the last pair): speed i is theta ** (-2i / head_dim).
    pair = Tensor.arange(0, head_dim // 2, dtype=DType.float32, device=positions.device)
    speeds = F.exp(pair * (-2.0 * math.log(theta) / head_dim))
    # angles[p, i] = position p times speed i, [seq, head_dim / 2], laid side by
    # side twice: half-split pairs share angle i between features i and i + head_dim / 2.
    angles = F.outer(positions.cast(DType.float32), speeds)
    angles = F.concat([angles, angles], axis=-1)
    return F.cos(angles), F.sin(angles)


def rotate_half(x: Tensor) -> Tensor:
    """Each pair (a, b) of the last axis becomes (-b, a): a quarter turn."""
    half = int(x.shape[-1]) // 2
    first, second = F.split(x, [half, half], axis=-1)
    return F.concat([-second, first], axis=-1)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate every pair of x's last axis ([..., seq, head_dim]) by its angle."""
    # (a, b) turned by angle t is (a cos t - b sin t, b cos t + a sin t).
    return x * cos + rotate_half(x) * sin


def rope_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    past_key: Tensor,
    past_value: Tensor,
    theta: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """Causal attention with rotary positions, after `past` cached tokens.

    query, key, value: the new tokens, [batch, heads, seq, head_dim], not yet
    rotated. past_key (already rotated) and past_value: [batch, heads, past,
    head_dim]. Returns the output [batch, heads, seq, head_dim] and both
    caches grown to past + seq.
    """
    head_dim = int(query.shape[-1])
    seq_length, num_cached = query.shape[2], past_key.shape[2]
    # The new tokens sit after the cached ones: positions past .. past + seq - 1.
    positions = Tensor.arange(
        num_cached, num_cached + seq_length, dtype=DType.float32, device=query.device
    )
    cos, sin = rope_tables(positions, head_dim, theta)
    # Position goes into the scores only: query and key turn, value does not.
    query = apply_rope(query, cos, sin)
    key = F.concat([past_key, apply_rope(key, cos, sin)], axis=2)
    value = F.concat([past_value, value], axis=2)

    scores = query @ key.transpose(-1, -2) / math.sqrt(head_dim)
    mask = causal_mask(int(seq_length), int(num_cached), dtype=scores.dtype, device=scores.device)
    weights = F.softmax(scores + mask, axis=-1)
    return weights @ value, key, value
