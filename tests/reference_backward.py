"""An independent NumPy reference of attention's backward pass (step 26), and
the finite differences the checker measures every gradient against.

Plain float64 NumPy. The forward is tests/reference_gpt2.py's GPT-2 attention;
the backward is written from the chain rule and checked against PyTorch's
autograd (and against the finite differences below) in
``tests/test_reference_backward.py``. Weights use MAX's layout: a Linear's
weight is [out_features, in_features], y = x @ W.T + b.

Every gradient here is of a scalar loss L whose gradient with respect to the
function's output is given (``grad_output``, dL/dout): L = sum(out *
grad_output) has exactly that gradient, which is what ``gradients`` measures.

As in tests/reference_gpt2.py, keyword arguments with defaults reproduce a
learner's likely mistake so that a checker can name it; the defaults are the
right derivative.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from tests.reference_gpt2 import (
    Weights,
    attention_weights,
    linear,
    merge_heads,
    split_heads,
)

# --------------------------------------------------------------------------
# finite differences


def numerical_gradient(loss: Callable[[], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """dloss/dx by central differences: x is nudged in place, one entry at a
    time, by +-eps, and put back. An entry that is -inf (a masked score) stays
    -inf when nudged, so its gradient is 0."""
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        kept = x[index]
        x[index] = kept + eps
        up = loss()
        x[index] = kept - eps
        down = loss()
        x[index] = kept
        grad[index] = 0.0 if np.isinf(kept) else (up - down) / (2 * eps)
    return grad


def gradients(
    forward: Callable[..., np.ndarray], inputs: Mapping[str, np.ndarray], grad_output: np.ndarray
) -> dict[str, np.ndarray]:
    """{name: dL/dinput} for L = sum(forward(**inputs) * grad_output), by
    finite differences in float64 (the inputs are copied, never changed)."""
    values = {name: np.array(x, dtype=np.float64) for name, x in inputs.items()}
    grad_output = np.asarray(grad_output, dtype=np.float64)

    def loss() -> float:
        return float(np.sum(forward(**values) * grad_output))

    return {name: numerical_gradient(loss, x) for name, x in values.items()}


# --------------------------------------------------------------------------
# scaled dot-product attention


def transpose(x: np.ndarray) -> np.ndarray:
    """The last two axes swapped: a batch of matrices, each transposed."""
    return np.swapaxes(x, -1, -2)


def attention_forward(
    query: np.ndarray, key: np.ndarray, value: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """GPT-2's causal attention over [..., seq, head_dim]: the output and the
    softmax's weights P, which the backward pass reuses."""
    probs = attention_weights(query, key)
    return probs @ value, probs


def softmax_backward(
    probs: np.ndarray,
    grad_probs: np.ndarray,
    *,
    axis: int = -1,
    weighted: bool = True,
    rowsum: bool = True,
    times_probs: str = "both",
) -> np.ndarray:
    """dL/dS from dL/dP for P = softmax(S) along the last axis:
    dS = P * (dP - rowsum(dP * P)).

    The mistakes: `axis` -2 sums down the columns; weighted=False sums dP
    alone, not dP * P; rowsum=False leaves the sum out (dS = P * dP, the
    Jacobian's diagonal only); times_probs "none" multiplies nothing by P
    (dS = dP - rowsum) and "grad" only dP (dS = P * dP - rowsum): both send
    gradient to positions where P is 0, the masked ones."""
    inner = np.sum(grad_probs * probs if weighted else grad_probs, axis=axis, keepdims=True)
    inner = inner if rowsum else 0.0
    if times_probs == "both":
        return probs * (grad_probs - inner)
    if times_probs == "grad":
        return probs * grad_probs - inner
    if times_probs == "none":
        return grad_probs - inner
    raise ValueError(times_probs)


def attention_backward(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    probs: np.ndarray,
    grad_output: np.ndarray,
    *,
    scale: float | None = None,
    value_transpose: bool = True,
    key_transpose: bool = True,
    query_transpose: bool = False,
    swapped: bool = False,
    **softmax_options,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dQ, dK, dV) of out = P V, P = softmax(Q K^T * scale + mask).

    dV = P^T dO, dP = dO V^T, dS = softmax_backward(P, dP), dQ = dS K *
    scale, dK = dS^T Q * scale. The mask is a constant: its only trace is
    P = 0 at the masked positions, which makes dS 0 there.

    The mistakes: `scale`, the factor used on the way back (1.0 forgets it);
    value_transpose=False (dV = P dO); key_transpose=False (dK = dS Q);
    query_transpose=True (dQ = dS^T K); swapped (dQ and dK in each other's
    place); softmax_options, softmax_backward's."""
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    grad_value = (transpose(probs) if value_transpose else probs) @ grad_output
    grad_probs = grad_output @ transpose(value)
    grad_scores = softmax_backward(probs, grad_probs, **softmax_options) * scale
    grad_query = (transpose(grad_scores) if query_transpose else grad_scores) @ key
    grad_key = (transpose(grad_scores) if key_transpose else grad_scores) @ query
    if swapped:
        grad_query, grad_key = grad_key, grad_query
    return grad_query, grad_key, grad_value


# --------------------------------------------------------------------------
# a Linear, and GPT-2's multi-head attention (step 09's forward)


def linear_backward(
    x: np.ndarray,
    weight: np.ndarray,
    grad_y: np.ndarray,
    *,
    weight_transposed: bool = False,
    through_transposed: bool = False,
    bias_mean: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dW, db) of y = x @ W.T + b over [..., in]: dx = dy W; dW = dy^T x
    summed over every leading axis ([out, in], W's own layout); db = dy summed
    over every leading axis.

    The mistakes: weight_transposed (dW = x^T dy, [in, out]);
    through_transposed (dx = dy W^T, for a square W); bias_mean (db averaged
    over the leading axes, not summed)."""
    flat_x, flat_grad = x.reshape(-1, x.shape[-1]), grad_y.reshape(-1, grad_y.shape[-1])
    grad_x = grad_y @ (weight.T if through_transposed else weight)
    grad_weight = flat_x.T @ flat_grad if weight_transposed else flat_grad.T @ flat_x
    grad_bias = flat_grad.mean(axis=0) if bias_mean else flat_grad.sum(axis=0)
    return grad_x, grad_weight, grad_bias


def mha_backward(
    w: Weights,
    x: np.ndarray,
    grad_output: np.ndarray,
    num_heads: int,
    *,
    qkv_order: str = "qkv",
    **attention_options,
) -> dict[str, np.ndarray]:
    """The gradients of x and of c_attn's and c_proj's weights and biases, by
    name, for tests/reference_gpt2.py's multi_head_attention (weights by name).

    The mistakes: qkv_order, the order in which dQ, dK and dV are joined
    before c_attn's backward ("kqv"...); attention_options,
    attention_backward's."""
    qkv = linear(x, w["c_attn.weight"], w["c_attn.bias"])
    heads = [split_heads(t, num_heads) for t in np.split(qkv, 3, axis=-1)]
    out, probs = attention_forward(*heads)
    grads = {}
    grad_merged, grads["c_proj.weight"], grads["c_proj.bias"] = linear_backward(
        merge_heads(out), w["c_proj.weight"], grad_output
    )
    grad_heads = split_heads(grad_merged, num_heads)
    by_name = dict(
        zip("qkv", attention_backward(*heads, probs, grad_heads, **attention_options), strict=True)
    )
    grad_qkv = np.concatenate([merge_heads(by_name[n]) for n in qkv_order], axis=-1)
    grads["x"], grads["c_attn.weight"], grads["c_attn.bias"] = linear_backward(
        x, w["c_attn.weight"], grad_qkv
    )
    return grads
