"""An independent NumPy implementation of Part III's multi-head latent
attention (MLA): DeepSeek-V2/V3's attention, whose KV cache holds one small
latent and one shared rotary key per token instead of every head's keys and
values (step 24), and its absorbed decode (step 25).

Plain float64 NumPy, written from the DeepSeek-V2 paper and checked against
Hugging Face transformers' DeepseekV3Attention in ``tests/test_reference_mla.py``.
Weights use MAX's layout, which is also Hugging Face's: a Linear's weight is
[out_features, in_features].

As in tests/reference_llama.py, keyword arguments with defaults reproduce a
learner's likely mistake so that a checker can name it; the defaults are the
model's behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tests.reference_gpt2 import Weights, linear, merge_heads, softmax
from tests.reference_llama import apply_rope, rms_norm, rope_tables

NORM_EPS = 1e-6  # DeepseekV3Attention builds its two norms with RMSNorm's default eps


@dataclass(frozen=True)
class Sizes:
    """The attention's hyperparameters, named as in DeepseekV3Config."""

    hidden_size: int
    num_heads: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    rope_theta: float = 10000.0
    rope_interleave: bool = True

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def config(self) -> dict:
        """The sizes by their names in DeepSeek-V3's config.json (and step 24's MLAConfig)."""
        return dict(
            hidden_size=self.hidden_size,
            num_attention_heads=self.num_heads,
            q_lora_rank=self.q_lora_rank,
            kv_lora_rank=self.kv_lora_rank,
            qk_nope_head_dim=self.qk_nope_head_dim,
            qk_rope_head_dim=self.qk_rope_head_dim,
            v_head_dim=self.v_head_dim,
            rope_theta=self.rope_theta,
            rope_interleave=self.rope_interleave,
        )

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every parameter's shape, by transformers' name."""
        heads = self.num_heads
        return {
            "q_a_proj.weight": (self.q_lora_rank, self.hidden_size),
            "q_a_layernorm.weight": (self.q_lora_rank,),
            "q_b_proj.weight": (heads * self.qk_head_dim, self.q_lora_rank),
            "kv_a_proj_with_mqa.weight": (
                self.kv_lora_rank + self.qk_rope_head_dim,
                self.hidden_size,
            ),
            "kv_a_layernorm.weight": (self.kv_lora_rank,),
            "kv_b_proj.weight": (
                heads * (self.qk_nope_head_dim + self.v_head_dim),
                self.kv_lora_rank,
            ),
            "o_proj.weight": (self.hidden_size, heads * self.v_head_dim),
        }


def deinterleave(x: np.ndarray) -> np.ndarray:
    """Features (x0, x1, x2, x3, ...) as (x0, x2, ..., x1, x3, ...): pairs
    (2i, 2i + 1) become half-split pairs (i, i + d/2), as transformers does
    before its rotation when config.rope_interleave is set."""
    *lead, dim = x.shape
    return x.reshape(*lead, dim // 2, 2).swapaxes(-1, -2).reshape(*lead, dim)


def split_query(w: Weights, x: np.ndarray, s: Sizes, *, q_norm: bool = True) -> np.ndarray:
    """The query through its low-rank path: [batch, heads, seq, qk_head_dim]."""
    compressed = linear(x, w["q_a_proj.weight"], None)
    if q_norm:
        compressed = rms_norm(compressed, w["q_a_layernorm.weight"], NORM_EPS)
    query = linear(compressed, w["q_b_proj.weight"], None)
    batch, seq, _ = x.shape
    return query.reshape(batch, seq, s.num_heads, s.qk_head_dim).transpose(0, 2, 1, 3)


def compress_kv(
    w: Weights, x: np.ndarray, s: Sizes, *, kv_norm: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """What the cache stores for new tokens: the normalised latent [batch, seq,
    kv_lora_rank] and the one rotary key, not yet rotated, [batch, seq, rope]."""
    compressed = linear(x, w["kv_a_proj_with_mqa.weight"], None)
    latent, rope_key = compressed[..., : s.kv_lora_rank], compressed[..., s.kv_lora_rank :]
    if kv_norm:
        latent = rms_norm(latent, w["kv_a_layernorm.weight"], NORM_EPS)
    return latent, rope_key


def expand_kv(
    w: Weights, latent: np.ndarray, s: Sizes, *, value_first: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """kv_b_proj turns each latent into every head's key without position and
    value: [batch, heads, seq, qk_nope_head_dim] and [batch, heads, seq, v_head_dim].
    value_first: the mistake of reading each head's block as value then key."""
    batch, seq, _ = latent.shape
    expanded = linear(latent, w["kv_b_proj.weight"], None)
    expanded = expanded.reshape(batch, seq, s.num_heads, s.qk_nope_head_dim + s.v_head_dim)
    expanded = expanded.transpose(0, 2, 1, 3)
    if value_first:
        return expanded[..., s.v_head_dim :], expanded[..., : s.v_head_dim]
    return expanded[..., : s.qk_nope_head_dim], expanded[..., s.qk_nope_head_dim :]


def rotate(x: np.ndarray, positions: np.ndarray, s: Sizes, *, interleave: bool) -> np.ndarray:
    cos, sin = rope_tables(positions, s.qk_rope_head_dim, s.rope_theta)
    return apply_rope(deinterleave(x) if interleave else x, cos, sin)


def mla_attention(
    w: Weights,
    x: np.ndarray,
    s: Sizes,
    past_latent: np.ndarray | None = None,
    past_rope_key: np.ndarray | None = None,
    *,
    q_norm: bool = True,
    kv_norm: bool = True,
    rope_first: bool = False,
    value_first: bool = False,
    interleave: bool | None = None,
    scale_dim: int | None = None,
    key_order: str = "nope,rope",
    start: int | None = None,
    cache_raw_latent: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DeepseekV3Attention (eager, causal) after `past` cached tokens.

    x: [batch, seq, hidden]; past_latent [batch, past, kv_lora_rank] (already
    normalised) and past_rope_key [batch, past, rope] (already rotated).
    Returns the output [batch, seq, hidden] and both grown caches.

    Mistakes: q_norm / kv_norm False leave a norm out; rope_first takes each
    head's rotary query features from the front of its block (so features
    meant to carry no position are rotated); value_first reads kv_b_proj's
    blocks as value then key; interleave False ignores
    config.rope_interleave; scale_dim divides by the root of another width;
    key_order "rope,nope" builds the key with its halves swapped (the query's
    stay in order); start restarts the positions; cache_raw_latent stores the
    latent before its norm (and normalises it when read)."""
    batch, seq, _ = x.shape
    past = 0 if past_latent is None else past_latent.shape[1]
    if past_latent is None:
        past_latent = np.zeros((batch, 0, s.kv_lora_rank))
        past_rope_key = np.zeros((batch, 0, s.qk_rope_head_dim))
    interleave = s.rope_interleave if interleave is None else interleave
    first = past if start is None else start
    positions = np.arange(first, first + seq)

    query = split_query(w, x, s, q_norm=q_norm)
    if rope_first:
        q_rope, q_nope = query[..., : s.qk_rope_head_dim], query[..., s.qk_rope_head_dim :]
    else:
        q_nope, q_rope = query[..., : s.qk_nope_head_dim], query[..., s.qk_nope_head_dim :]
    raw_latent, rope_key = compress_kv(w, x, s, kv_norm=False)
    latent = rms_norm(raw_latent, w["kv_a_layernorm.weight"], NORM_EPS) if kv_norm else raw_latent
    q_rope = rotate(q_rope, positions, s, interleave=interleave)
    rope_key = rotate(rope_key, positions, s, interleave=interleave)
    latents = np.concatenate([past_latent, latent], axis=1)
    rope_keys = np.concatenate([past_rope_key, rope_key], axis=1)

    used_latents = latents
    if cache_raw_latent:  # the cache holds raw latents, normalised on every read
        latents = np.concatenate([past_latent, raw_latent], axis=1)
        used_latents = rms_norm(latents, w["kv_a_layernorm.weight"], NORM_EPS)
    k_nope, value = expand_kv(w, used_latents, s, value_first=value_first)
    # One rotary key per token, shared by every head.
    k_rope = np.broadcast_to(rope_keys[:, None], (*k_nope.shape[:-1], s.qk_rope_head_dim))
    query = np.concatenate([q_nope, q_rope], axis=-1)
    halves = {"nope": k_nope, "rope": k_rope}
    key = np.concatenate([halves[part] for part in key_order.split(",")], axis=-1)

    scale = 1.0 / np.sqrt(s.qk_head_dim if scale_dim is None else scale_dim)
    scores = query @ np.swapaxes(key, -1, -2) * scale
    rows = np.arange(seq)[:, None] + past
    scores = np.where(np.arange(past + seq)[None, :] <= rows, scores, -np.inf)
    out = softmax(scores, axis=-1) @ value
    return linear(merge_heads(out), w["o_proj.weight"], None), latents, rope_keys


def cache_bytes_per_token(s: Sizes, *, bytes_per_value: int = 2) -> dict[str, int]:
    """Bytes one layer caches per token: MLA's latent and rotary key, against
    the expanded keys and values the same attention would cache as MHA."""
    mla = (s.kv_lora_rank + s.qk_rope_head_dim) * bytes_per_value
    expanded = s.num_heads * (s.qk_head_dim + s.v_head_dim) * bytes_per_value
    return {"mla": mla, "expanded": expanded}


def absorbed_weights(w: Weights, s: Sizes) -> tuple[np.ndarray, np.ndarray]:
    """kv_b_proj's key half [heads, qk_nope_head_dim, kv_lora_rank] and value
    half [heads, v_head_dim, kv_lora_rank]."""
    per_head = w["kv_b_proj.weight"].reshape(
        s.num_heads, s.qk_nope_head_dim + s.v_head_dim, s.kv_lora_rank
    )
    return per_head[:, : s.qk_nope_head_dim], per_head[:, s.qk_nope_head_dim :]


def absorbed_decode(
    w: Weights,
    x: np.ndarray,
    s: Sizes,
    past_latent: np.ndarray,
    past_rope_key: np.ndarray,
    *,
    scale_dim: int | None = None,
    scaled: str = "scores",
    rope_scores: bool = True,
    latent_scores: bool = True,
    own_token: bool = True,
    softmax_axis: int = -1,
    key_half_transposed: bool = False,
    value_half_transposed: bool = False,
) -> np.ndarray:
    """Step 25's decode of one token x [batch, 1, hidden] in latent space: the
    query absorbs kv_b_proj's key half, the weighted sum of latents meets its
    value half. Equal to mla_attention's output (tests/test_reference_mla.py).

    Mistakes: scale_dim divides by the root of another width; scaled "latent"
    or "rope" scales that part of each score only; rope_scores / latent_scores
    False leave one of a score's two dot products out; own_token False attends
    to the cached tokens only, not the new one; softmax_axis 1 normalizes over
    the heads; key_half_transposed / value_half_transposed multiply by a half
    the other way round (which runs only where its two widths are equal)."""
    past = past_latent.shape[1]
    positions = np.arange(past, past + 1)
    query = split_query(w, x, s)
    q_nope, q_rope = query[..., : s.qk_nope_head_dim], query[..., s.qk_nope_head_dim :]
    q_rope = rotate(q_rope, positions, s, interleave=s.rope_interleave)
    latent, rope_key = compress_kv(w, x, s)
    rope_key = rotate(rope_key, positions, s, interleave=s.rope_interleave)
    seen = slice(None) if own_token else slice(0, past)
    latents = np.concatenate([past_latent, latent], axis=1)[:, None, seen]  # a head axis of 1
    rope_keys = np.concatenate([past_rope_key, rope_key], axis=1)[:, None, seen]
    key_half, value_half = absorbed_weights(w, s)
    if key_half_transposed:
        key_half = np.swapaxes(key_half, -1, -2)
    if value_half_transposed:
        value_half = np.swapaxes(value_half, -1, -2)
    scale = 1.0 / np.sqrt(s.qk_head_dim if scale_dim is None else scale_dim)
    parts = {"latent": 0.0, "rope": 0.0}
    if latent_scores:
        parts["latent"] = (q_nope @ key_half) @ np.swapaxes(latents, -1, -2)
    if rope_scores:
        parts["rope"] = q_rope @ np.swapaxes(rope_keys, -1, -2)
    if scaled == "scores":
        scores = (parts["latent"] + parts["rope"]) * scale
    else:
        scores = parts["latent"] + parts["rope"] + parts[scaled] * (scale - 1.0)
    context = softmax(scores, axis=softmax_axis) @ latents  # [batch, heads, 1, rank]
    out = context @ np.swapaxes(value_half, -1, -2)
    return linear(merge_heads(out), w["o_proj.weight"], None)
