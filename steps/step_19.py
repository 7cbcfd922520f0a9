"""Step 19: rotary position embeddings (RoPE).

Goal: give attention a sense of distance without adding anything to the
tokens. Each head's query and key are cut into pairs of features, and every
pair turns by an angle that grows with the token's position; the value stays
as it is. Pairs are "half-split" as in transformers' Llama: pair i is feature
i and feature i + head_dim / 2.

Run: pixi run s19    (or: python -m tests.check 19)
Stuck? Read docs/src/step_19.md (pixi run book).
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
    # TODO: pair i's speed for i = 0 .. head_dim/2 - 1: a float32 vector of
    #   head_dim / 2 speeds, on the positions' device (the page's "One speed
    #   per pair").
    speeds = None
    # END TODO
    # angles[p, i] = position p times speed i, [seq, head_dim / 2], laid side by
    # side twice: half-split pairs share angle i between features i and i + head_dim / 2.
    # TODO: the [seq, head_dim] table of angles described above (the page's
    #   "Half-split pairs").
    angles = None
    # END TODO
    return F.cos(angles), F.sin(angles)


def rotate_half(x: Tensor) -> Tensor:
    """Each pair (a, b) of the last axis becomes (-b, a): a quarter turn."""
    # TODO: every pair's quarter turn at once, same shape as x; pair i is
    #   feature i of the first half and feature i of the second half (the
    #   page's "A quarter turn" works x = [1, 2, 3, 4] by hand).
    return None
    # END TODO


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate every pair of x's last axis ([..., seq, head_dim]) by its angle."""
    # (a, b) turned by angle t is (a cos t - b sin t, b cos t + a sin t).
    # TODO: every pair of x turned by its angle, written with the tables and
    #   rotate_half; cos and sin are [seq, head_dim] and broadcast over batch and
    #   heads (the page's "Turning every pair at once").
    return None
    # END TODO


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
    # TODO: the new tokens' positions, a float32 vector of seq_length numbers
    #   on the query's device (the page's "Positions after a cache").
    positions = None
    # END TODO
    cos, sin = rope_tables(positions, head_dim, theta)
    # Position goes into the scores only: query and key turn, value does not.
    # TODO: query turned; the new keys turned and appended to past_key, the
    #   new values appended to past_value, along the sequence axis (cached
    #   positions first): [batch, heads, past + seq, head_dim] each (the page's
    #   "What turns and what does not").
    query = None
    key = None
    value = None
    # END TODO

    scores = query @ key.transpose(-1, -2) / math.sqrt(head_dim)
    mask = causal_mask(int(seq_length), int(num_cached), dtype=scores.dtype, device=scores.device)
    weights = F.softmax(scores + mask, axis=-1)
    return weights @ value, key, value
