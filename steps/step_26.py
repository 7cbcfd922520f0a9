"""Step 26: attention's backward pass.

Goal: the gradients of causal attention and of GPT-2's attention block, by
hand. Given dL/dout, the gradient of a loss with respect to a function's
output, each backward function returns the gradient with respect to each of
its inputs, the same shape as that input: through the softmax, the scaled
scores and their mask, the weighted sum of the values, and the two Linear
layers of step 09. The forward passes are given.

Run: pixi run s26    (or: python -m tests.check 26)
Stuck? Read docs/src/step_26.md (pixi run book).
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
    # TODO: dS, the shape of P, from the softmax's Jacobian as you finished
    #   deriving it (the page's "The softmax's Jacobian"). A sum over a row is
    #   one number per row, a [..., seq, 1] column that broadcasts along it.
    inner = None
    return None
    # END TODO


def attention_backward(
    query: Tensor, key: Tensor, value: Tensor, probs: Tensor, grad_output: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """(dQ, dK, dV) of attention_forward, given its weights P and dL/dout;
    each [batch, heads, seq, head_dim]."""
    scale = 1.0 / math.sqrt(int(query.shape[-1]))
    # TODO: through out = P V: dV [batch, heads, seq, head_dim] and dP
    #   [batch, heads, seq, seq] (the page's "Through the weighted sum").
    grad_value = None
    grad_probs = None
    # END TODO
    # TODO: through P = softmax(S) and S = Q K^T * scale: dS [batch, heads,
    #   seq, seq], then dQ and dK, each [batch, heads, seq, head_dim], the
    #   scale applied once (the page's "Through the scores").
    grad_scores = None
    grad_query = None
    grad_key = None
    # END TODO
    return grad_query, grad_key, grad_value


def linear(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """y = x W^T + b, MAX's Linear with its weight [out_features, in_features]."""
    return x @ weight.T + bias


def linear_backward(x: Tensor, weight: Tensor, grad_y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(dx, dW, db) of linear, for x [batch, seq, in] and dL/dy [batch, seq, out]."""
    out_features, in_features = (int(d) for d in weight.shape)
    # TODO: dx [batch, seq, in], dW [out, in] (W's own layout) and db [out].
    #   The same W and b serve every position of every sequence, so their
    #   gradients add up over batch and sequence (the page's "A Linear's
    #   backward").
    grad_x = None
    grad_weight = None
    grad_bias = None
    # END TODO
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
    # TODO: the gradient of x and of every weight, mha_forward's lines walked
    #   from the last up, each backward given what its operation read in the
    #   forward (the page's "The whole block").
    grad_merged, grad_proj_weight, grad_proj_bias = None, None, None
    grad_heads = None
    grad_query, grad_key, grad_value = None, None, None
    grad_qkv = None
    grad_x, grad_attn_weight, grad_attn_bias = None, None, None
    # END TODO
    return {
        "x": grad_x,
        "c_attn.weight": grad_attn_weight,
        "c_attn.bias": grad_attn_bias,
        "c_proj.weight": grad_proj_weight,
        "c_proj.bias": grad_proj_bias,
    }
