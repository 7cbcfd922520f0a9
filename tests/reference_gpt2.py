"""An independent NumPy implementation of GPT-2, the checkers' ground truth.

Everything here is plain float64 NumPy, written from the GPT-2 paper and
checked against Hugging Face transformers in ``tests/test_reference_gpt2.py``.
Weights use MAX's layout: a Linear's weight is [out_features, in_features]
(Hugging Face's Conv1D stores the transpose).

The keyword arguments with defaults (``scale``, ``mask``, ``approximate``...)
exist so that the checkers can reproduce a learner's likely mistake and name
it; the defaults are GPT-2's behaviour.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

Weights = Mapping[str, np.ndarray]


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # NaN inputs (a mistake variant) stay NaN
        out = x @ weight.T
    return out if bias is None else out + bias


def gelu(x: np.ndarray, approximate: str = "tanh") -> np.ndarray:
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
        return 0.5 * x * (1.0 + np.tanh(inner))
    if approximate == "none":
        erf = np.vectorize(math.erf)
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
    raise ValueError(approximate)


def layer_norm(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5
) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)  # biased, as in the paper and PyTorch
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def causal_mask(sequence_length: int, num_tokens: int = 0, window: int | None = None) -> np.ndarray:
    """0 where row i may attend to column j (j <= i + num_tokens, and with a
    window j > i + num_tokens - window), else -inf."""
    rows = np.arange(sequence_length)[:, None] + num_tokens
    cols = np.arange(num_tokens + sequence_length)[None, :]
    visible = cols <= rows
    if window is not None:
        visible &= cols > rows - window
    return np.where(visible, 0.0, -np.inf)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=axis, keepdims=True)


def attention_weights(
    query: np.ndarray,
    key: np.ndarray,
    num_cached: int = 0,
    *,
    window: int | None = None,
    scale: float | None = None,
    mask: str = "causal",
    softmax_axis: int = -1,
) -> np.ndarray:
    """The softmax's weights of scaled dot-product attention, [..., seq, past + seq]:
    `seq` new queries over `num_cached + seq` keys. New token i sits at position
    num_cached + i and sees key j when j <= num_cached + i and, with a window,
    j > num_cached + i - window.

    mask: "causal", "none", "inverted" (only the future is visible, diagonal
    included) or "after_softmax" (the mask added to the weights: -inf weights
    make NaNs downstream, as they would in the learner's code).
    """
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ np.swapaxes(key, -1, -2)) * scale
    causal = causal_mask(query.shape[-2], num_cached, window)
    if mask == "causal":
        scores = scores + causal
    elif mask == "inverted":
        scores = scores + causal.T
    elif mask not in ("none", "after_softmax"):
        raise ValueError(mask)
    weights = softmax(scores, axis=softmax_axis)
    return weights + causal if mask == "after_softmax" else weights


def attention(
    query: np.ndarray, key: np.ndarray, value: np.ndarray, num_cached: int = 0, **options
) -> np.ndarray:
    """Causal scaled dot-product attention over [..., seq, head_dim] inputs (GPT-2's
    by default); `num_cached` and the `options` are attention_weights'."""
    weights = attention_weights(query, key, num_cached, **options)
    with np.errstate(invalid="ignore"):  # the "after_softmax" mistake's NaNs stay NaN
        return weights @ value


def split_heads(x: np.ndarray, num_heads: int, *, transpose: bool = True) -> np.ndarray:
    """[batch, seq, embed] -> [batch, heads, seq, head_dim]."""
    batch, seq, embed = x.shape
    if not transpose:  # the classic mistake: reshape straight to the 4-D shape
        return x.reshape(batch, num_heads, seq, embed // num_heads)
    return x.reshape(batch, seq, num_heads, embed // num_heads).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray, *, transpose: bool = True) -> np.ndarray:
    """[batch, heads, seq, head_dim] -> [batch, seq, embed]."""
    batch, heads, seq, head_dim = x.shape
    if not transpose:
        return x.reshape(batch, seq, heads * head_dim)
    return x.transpose(0, 2, 1, 3).reshape(batch, seq, heads * head_dim)


def qkv(
    w: Weights, x: np.ndarray, prefix: str = "c_attn."
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    projected = linear(x, w[prefix + "weight"], w[prefix + "bias"])
    return tuple(np.split(projected, 3, axis=-1))  # type: ignore[return-value]


def multi_head_attention(
    w: Weights,
    x: np.ndarray,
    num_heads: int,
    prefix: str = "",
    *,
    split_transpose: bool = True,
    merge_transpose: bool = True,
    output_projection: bool = True,
    **attention_options,
) -> np.ndarray:
    query, key, value = qkv(w, x, prefix + "c_attn.")
    heads = [split_heads(t, num_heads, transpose=split_transpose) for t in (query, key, value)]
    out = merge_heads(attention(*heads, **attention_options), transpose=merge_transpose)
    if not output_projection:
        return out
    return linear(out, w[prefix + "c_proj.weight"], w[prefix + "c_proj.bias"])


def mlp(w: Weights, x: np.ndarray, prefix: str = "", *, approximate: str = "tanh") -> np.ndarray:
    hidden = linear(x, w[prefix + "c_fc.weight"], w[prefix + "c_fc.bias"])
    return linear(gelu(hidden, approximate), w[prefix + "c_proj.weight"], w[prefix + "c_proj.bias"])


def embeddings(w: Weights, input_ids: np.ndarray, prefix: str = "") -> np.ndarray:
    positions = np.arange(input_ids.shape[-1])
    return w[prefix + "wte.weight"][input_ids] + w[prefix + "wpe.weight"][positions]


def block(w: Weights, x: np.ndarray, num_heads: int, eps: float, prefix: str = "") -> np.ndarray:
    """Pre-norm transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x))."""
    ln_1 = layer_norm(x, w[prefix + "ln_1.weight"], w[prefix + "ln_1.bias"], eps)
    x = x + multi_head_attention(w, ln_1, num_heads, prefix + "attn.")
    ln_2 = layer_norm(x, w[prefix + "ln_2.weight"], w[prefix + "ln_2.bias"], eps)
    return x + mlp(w, ln_2, prefix + "mlp.")


def model(
    w: Weights, input_ids: np.ndarray, n_layer: int, num_heads: int, eps: float, prefix: str = ""
) -> np.ndarray:
    """GPT2Model: embeddings, n_layer blocks, final layer norm."""
    x = embeddings(w, input_ids, prefix)
    for i in range(n_layer):
        x = block(w, x, num_heads, eps, f"{prefix}h.{i}.")
    return layer_norm(x, w[prefix + "ln_f.weight"], w[prefix + "ln_f.bias"], eps)


def lm_logits(
    w: Weights, input_ids: np.ndarray, n_layer: int, num_heads: int, eps: float
) -> np.ndarray:
    """GPT2LMHeadModel: hidden states times the (tied) token embedding table."""
    hidden = model(w, input_ids, n_layer, num_heads, eps, "transformer.")
    return hidden @ w["transformer.wte.weight"].T


def greedy_generate(
    w: Weights, prompt_ids: list[int], max_new_tokens: int, n_layer: int, num_heads: int, eps: float
) -> list[int]:
    """Greedy decoding: append the most likely next token, max_new_tokens times."""
    ids = list(prompt_ids)
    for _ in range(max_new_tokens):
        logits = lm_logits(w, np.asarray([ids]), n_layer, num_heads, eps)
        ids.append(int(np.argmax(logits[0, -1])))
    return ids[len(prompt_ids) :]
