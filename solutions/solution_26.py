"""Step 26: attention's backward pass.

Every weight of GPT-2 was learned by gradient descent: run the model, measure
how wrong it is (the loss), and move each weight a little against the
gradient of the loss with respect to that weight. Frameworks get the
gradients from autograd, which walks the forward pass backwards applying the
chain rule to each operation. Here we do that walk by hand for attention:
the softmax, the scaled scores with their causal mask, the heads, and the
two projections of step 09.

Every backward function takes the gradient of the loss with respect to its
forward's output (`grad_output`, dL/dout, the same shape as the output) and
returns the gradients with respect to its inputs, each the shape of its input.
"""

import math
from typing import NamedTuple

from max.experimental import functional as F
from max.experimental.tensor import Tensor

from solutions.solution_02 import causal_mask


def attention_forward(query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
    """Causal scaled dot-product attention over [batch, heads, seq, head_dim],
    step 09's `_attn`. Returns the output and the softmax's weights P
    [batch, heads, seq, seq], which the backward pass reuses."""
    scale = 1.0 / math.sqrt(int(query.shape[-1]))
    scores = query @ key.T * scale
    mask = causal_mask(int(query.shape[-2]), 0, dtype=scores.dtype, device=scores.device)
    probs = F.softmax(scores + mask, axis=-1)
    return probs @ value, probs


def softmax_backward(probs: Tensor, grad_probs: Tensor) -> Tensor:
    """dL/dS for P = softmax(S) along the last axis, from P and dL/dP; every
    tensor [..., seq, seq]."""
    # Raising one score raises its own weight and lowers every weight of its
    # row: that second part is one number per row, dP . P, [..., seq, 1].
    # The factor P in front gives a masked position (P = 0) exactly 0.
    inner = (grad_probs * probs).sum(axis=-1)
    return probs * (grad_probs - inner)


def attention_backward(
    query: Tensor, key: Tensor, value: Tensor, probs: Tensor, grad_output: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """(dQ, dK, dV) of attention_forward, given its weights P and dL/dout;
    each [batch, heads, seq, head_dim]."""
    scale = 1.0 / math.sqrt(int(query.shape[-1]))
    # out = P V: each value is read by every query that weighs it.
    grad_value = probs.T @ grad_output
    grad_probs = grad_output @ value.T
    # S = Q K^T * scale: the scale multiplies on the way back as it did forward.
    grad_scores = softmax_backward(probs, grad_probs) * scale
    grad_query = grad_scores @ key
    grad_key = grad_scores.T @ query
    return grad_query, grad_key, grad_value


def linear(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """y = x W^T + b, MAX's Linear with its weight [out_features, in_features]."""
    return x @ weight.T + bias


def linear_backward(x: Tensor, weight: Tensor, grad_y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(dx, dW, db) of linear, for x [batch, seq, in] and dL/dy [batch, seq, out]."""
    out_features, in_features = (int(d) for d in weight.shape)
    grad_x = grad_y @ weight
    # The same W and b serve every position of every sequence: each is one
    # more sample, and its share of the gradient adds to the others.
    flat_x = x.reshape([-1, in_features])
    flat_grad = grad_y.reshape([-1, out_features])
    grad_weight = flat_grad.T @ flat_x
    grad_bias = flat_grad.sum(axis=0).reshape([out_features])
    return grad_x, grad_weight, grad_bias


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """[batch, seq, embed] -> [batch, heads, seq, head_dim], as step 09."""
    batch, seq, embed = x.shape
    return x.reshape([batch, seq, num_heads, embed // num_heads]).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """[batch, heads, seq, head_dim] -> [batch, seq, embed]: split_heads undone."""
    batch, heads, seq, head_dim = x.shape
    return x.transpose(1, 2).reshape([batch, seq, heads * head_dim])


class Saved(NamedTuple):
    """What mha_forward keeps for the backward pass: the inputs of its
    operations (autograd's "saved tensors")."""

    query: Tensor  # [batch, heads, seq, head_dim], like key and value
    key: Tensor
    value: Tensor
    probs: Tensor  # the softmax's weights P, [batch, heads, seq, seq]
    merged: Tensor  # c_proj's input, [batch, seq, n_embd]


def mha_forward(x: Tensor, weights: dict[str, Tensor], n_head: int) -> tuple[Tensor, Saved]:
    """Step 09's multi-head attention on x [batch, seq, n_embd], its weights
    given by name in MAX's layout. Returns the output and what the backward
    pass reuses."""
    embed = int(x.shape[-1])
    qkv = linear(x, weights["c_attn.weight"], weights["c_attn.bias"])
    query, key, value = (split_heads(t, n_head) for t in F.split(qkv, [embed] * 3, axis=-1))
    out, probs = attention_forward(query, key, value)
    merged = merge_heads(out)
    output = linear(merged, weights["c_proj.weight"], weights["c_proj.bias"])
    return output, Saved(query, key, value, probs, merged)


def mha_backward(
    x: Tensor, weights: dict[str, Tensor], grad_output: Tensor, n_head: int
) -> dict[str, Tensor]:
    """The gradients of x and of every weight of mha_forward, by name, given
    dL/doutput [batch, seq, n_embd]."""
    _, (query, key, value, probs, merged) = mha_forward(x, weights, n_head)
    # Backwards through the forward, last operation first.
    grad_merged, grad_proj_weight, grad_proj_bias = linear_backward(
        merged, weights["c_proj.weight"], grad_output
    )
    grad_heads = split_heads(grad_merged, n_head)
    grad_query, grad_key, grad_value = attention_backward(query, key, value, probs, grad_heads)
    # c_attn's output was split into query, key and value: their gradients
    # join in the same order.
    grad_qkv = F.concat([merge_heads(g) for g in (grad_query, grad_key, grad_value)], axis=-1)
    grad_x, grad_attn_weight, grad_attn_bias = linear_backward(
        x, weights["c_attn.weight"], grad_qkv
    )
    return {
        "x": grad_x,
        "c_attn.weight": grad_attn_weight,
        "c_attn.bias": grad_attn_bias,
        "c_proj.weight": grad_proj_weight,
        "c_proj.bias": grad_proj_bias,
    }
