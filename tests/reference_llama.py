"""An independent NumPy implementation of Part II's pieces: rotary position
embeddings, RMSNorm, the SwiGLU MLP, grouped-query and sliding-window attention
and the Llama-style decoder they make.

Plain float64 NumPy, written from the papers (RoFormer, Llama, Mistral) and
checked against Hugging Face transformers' Llama and Mistral modules in
``tests/test_reference_llama.py``. Weights use MAX's layout, which for these
models is also Hugging Face's: a Linear's weight is [out_features, in_features].

As in tests/reference_gpt2.py, keyword arguments with defaults reproduce a
learner's likely mistake so that a checker can name it; the defaults are the
models' behaviour.
"""

from __future__ import annotations

import numpy as np

from tests.reference_gpt2 import Weights, attention, linear, merge_heads, split_heads

# --------------------------------------------------------------------------
# rotary position embeddings (step 19)


def rope_frequencies(head_dim: int, theta: float, *, exponent: str = "2i/d") -> np.ndarray:
    """One angular speed per pair of features: theta ** (-2i / head_dim), i < head_dim / 2.

    exponent "i/d" is the mistake of dividing the pair index by head_dim
    without the factor 2 (the frequencies then fall only to theta ** -1/2)."""
    pair = np.arange(head_dim // 2, dtype=np.float64)
    if exponent == "2i/d":
        return theta ** (-2.0 * pair / head_dim)
    if exponent == "i/d":
        return theta ** (-pair / head_dim)
    raise ValueError(exponent)


def rope_tables(
    positions: np.ndarray,
    head_dim: int,
    theta: float,
    *,
    interleaved: bool = False,
    exponent: str = "2i/d",
) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of position x frequency, each [seq, head_dim].

    Half-split (transformers' Llama): pair i is features (i, i + head_dim/2),
    so the angles [seq, head_dim/2] are laid side by side twice. interleaved
    (the RoFormer paper, GPT-J, Meta's original Llama code): pair i is features
    (2i, 2i + 1), so each angle is repeated in place."""
    angles = np.outer(
        np.asarray(positions, dtype=np.float64),
        rope_frequencies(head_dim, theta, exponent=exponent),
    )
    if interleaved:
        angles = np.repeat(angles, 2, axis=-1)
    else:
        angles = np.concatenate([angles, angles], axis=-1)
    return np.cos(angles), np.sin(angles)


def rotate_half(x: np.ndarray, *, interleaved: bool = False, sign: float = 1.0) -> np.ndarray:
    """Each pair (a, b) becomes (-b, a): a quarter turn. sign -1 turns the other way."""
    if interleaved:
        even, odd = x[..., 0::2], x[..., 1::2]
        return sign * np.stack([-odd, even], axis=-1).reshape(x.shape)
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    return sign * np.concatenate([-second, first], axis=-1)


def apply_rope(
    x: np.ndarray,
    cos: np.ndarray,
    sin: np.ndarray,
    *,
    interleaved: bool = False,
    sign: float = 1.0,
) -> np.ndarray:
    """Rotate every pair of x's last axis by its angle: x cos + rotate_half(x) sin."""
    return x * cos + rotate_half(x, interleaved=interleaved, sign=sign) * sin


def turned(
    rotate: str, cos: np.ndarray, sin: np.ndarray, interleaved: bool = False, **tensors
) -> dict[str, np.ndarray]:
    """`tensors` by name, those that `rotate` names ("query,key") turned by the tables."""
    names = rotate.split(",")
    return {
        name: apply_rope(t, cos, sin, interleaved=interleaved) if name in names else t
        for name, t in tensors.items()
    }


def rope_attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    past_key: np.ndarray,
    past_value: np.ndarray,
    theta: float,
    *,
    start: int | None = None,
    rotate: str = "query,key",
    **rope_options,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step 19's causal attention with rotary positions and a cache.

    query, key, value: the new tokens, [batch, heads, seq, head_dim], not yet
    rotated; past_key (rotated) and past_value: [batch, heads, past, head_dim].
    Returns the output and the grown key and value caches. `start` is where the
    new tokens' positions begin (the cache's length unless a mistake says
    otherwise); `rotate` names the tensors that are rotated."""
    seq, past, head_dim = query.shape[-2], past_key.shape[-2], query.shape[-1]
    start = past if start is None else start
    cos, sin = rope_tables(np.arange(start, start + seq), head_dim, theta, **rope_options)
    interleaved = rope_options.get("interleaved", False)
    rotated = turned(rotate, cos, sin, interleaved, query=query, key=key, value=value)
    keys = np.concatenate([past_key, rotated["key"]], axis=-2)
    values = np.concatenate([past_value, rotated["value"]], axis=-2)
    return attention(rotated["query"], keys, values, past), keys, values


# --------------------------------------------------------------------------
# RMSNorm and the SwiGLU MLP (step 20)


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """x / sqrt(mean(x²) + eps) * weight over the last axis: no mean subtracted, no bias."""
    return x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + eps) * weight


def swiglu_mlp(w: Weights, x: np.ndarray, prefix: str = "") -> np.ndarray:
    """down(silu(gate(x)) * up(x)), no biases (LlamaMLP)."""
    gate = linear(x, w[prefix + "gate_proj.weight"], None)
    up = linear(x, w[prefix + "up_proj.weight"], None)
    return linear(silu(gate) * up, w[prefix + "down_proj.weight"], None)


# --------------------------------------------------------------------------
# grouped-query attention (step 21) and sliding windows (step 22)


def repeat_kv(x: np.ndarray, group: int, *, tiled: bool = False) -> np.ndarray:
    """[batch, kv_heads, seq, head_dim] -> [batch, kv_heads * group, seq, head_dim].

    Key/value head j serves the `group` consecutive query heads j * group ..
    (j + 1) * group - 1, so each head is repeated in place. tiled: the mistake
    of repeating the whole stack of heads (query head 1 then meets kv head 1)."""
    return np.tile(x, (1, group, 1, 1)) if tiled else np.repeat(x, group, axis=1)


def gqa_attention(
    w: Weights,
    x: np.ndarray,
    num_heads: int,
    num_kv_heads: int,
    theta: float,
    past_key: np.ndarray | None = None,
    past_value: np.ndarray | None = None,
    prefix: str = "",
    *,
    tiled: bool = False,
    rotate: str = "query,key",
    scale: float | None = None,
    window: int | None = None,
    pieces: dict | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LlamaAttention (no biases) with rotary positions, a cache of the
    num_kv_heads heads, and optionally a sliding window.

    x: [batch, seq, hidden]; past_key/past_value: [batch, num_kv_heads, past,
    head_dim], keys rotated. Returns the output [batch, seq, hidden] and the
    grown caches (every cached token; step 22 keeps only a window of them).
    `pieces`, if given, receives what the heads read and give: "keys" and
    "values" repeated per query head, "heads" [batch, heads, seq, head_dim]."""
    query = split_heads(linear(x, w[prefix + "q_proj.weight"], None), num_heads)
    key = split_heads(linear(x, w[prefix + "k_proj.weight"], None), num_kv_heads)
    value = split_heads(linear(x, w[prefix + "v_proj.weight"], None), num_kv_heads)
    batch, _, seq, head_dim = query.shape
    if past_key is None:
        past_key = past_value = np.zeros((batch, num_kv_heads, 0, head_dim))
    past = past_key.shape[-2]
    cos, sin = rope_tables(np.arange(past, past + seq), head_dim, theta)
    rotated = turned(rotate, cos, sin, query=query, key=key, value=value)
    keys = np.concatenate([past_key, rotated["key"]], axis=-2)
    values = np.concatenate([past_value, rotated["value"]], axis=-2)
    group = num_heads // num_kv_heads
    out = attention(
        rotated["query"],
        repeat_kv(keys, group, tiled=tiled),
        repeat_kv(values, group, tiled=tiled),
        past,
        window=window,
        scale=scale,
    )
    if pieces is not None:
        pieces["keys"] = repeat_kv(keys, group, tiled=tiled)
        pieces["values"] = repeat_kv(values, group, tiled=tiled)
        pieces["heads"] = out
    return linear(merge_heads(out), w[prefix + "o_proj.weight"], None), keys, values


# --------------------------------------------------------------------------
# the Llama-style decoder (step 23)


def decoder_layer(
    w: Weights,
    x: np.ndarray,
    num_heads: int,
    num_kv_heads: int,
    theta: float,
    eps: float,
    prefix: str = "",
    *,
    window: int | None = None,
) -> np.ndarray:
    """LlamaDecoderLayer: x + attention(RMSNorm(x)), then + SwiGLU(RMSNorm(x))."""
    normed = rms_norm(x, w[prefix + "input_layernorm.weight"], eps)
    attended, _, _ = gqa_attention(
        w, normed, num_heads, num_kv_heads, theta, prefix=prefix + "self_attn.", window=window
    )
    x = x + attended
    normed = rms_norm(x, w[prefix + "post_attention_layernorm.weight"], eps)
    return x + swiglu_mlp(w, normed, prefix + "mlp.")


def llama_logits(
    w: Weights,
    input_ids: np.ndarray,
    *,
    num_layers: int,
    num_heads: int,
    num_kv_heads: int,
    theta: float,
    eps: float,
    window: int | None = None,
) -> np.ndarray:
    """LlamaForCausalLM's logits, [batch, seq, vocab], with transformers' names.

    Each layer: x + attention(RMSNorm(x)), then + SwiGLU(RMSNorm(x)); a final
    RMSNorm; the head is lm_head.weight, or the token embeddings when the
    checkpoint ties them (no lm_head.weight)."""
    x = w["model.embed_tokens.weight"][input_ids]
    for i in range(num_layers):
        x = decoder_layer(
            w, x, num_heads, num_kv_heads, theta, eps, f"model.layers.{i}.", window=window
        )
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T
