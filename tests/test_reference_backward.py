"""Step 26's NumPy backward pass (tests/reference_backward.py) checked against
PyTorch's autograd, the trusted oracle, and against its own finite
differences, which the checker measures a learner's gradients with.

torch runs in float64 here, so the gradients agree to far tighter tolerances
than a float32 check: a transpose or a factor of the scale cannot hide. The
multi-head block is transformers' own GPT2Attention (Conv1D weights, so its
weight gradients are transposed into MAX's [out, in] layout to compare). The
last tests check that each mistake option changes the numbers, so the checker
can tell the mistakes apart.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers.models.gpt2.modeling_gpt2 import GPT2Attention

from tests import reference_backward as ref
from tests import reference_gpt2 as base
from tests.checker.compare import close
from tests.test_reference_gpt2 import hf_causal_mask, init_weights, make_config, to_reference

RTOL, ATOL = 1e-9, 1e-11  # float64 against float64
FD_RTOL = 1e-6  # finite differences: truncation and rounding at eps 1e-6


def assert_close(actual, expected, rtol: float = RTOL, atol: float = ATOL) -> None:
    actual = actual.detach().numpy() if isinstance(actual, torch.Tensor) else actual
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def random(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def leaf(x: np.ndarray) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)


SHAPE = (2, 3, 6, 4)  # batch, heads, seq, head_dim: seq != head_dim, so no transpose fits by luck


def qkv_and_grad(seed: int) -> tuple[np.ndarray, ...]:
    return tuple(random(SHAPE, seed + i) for i in range(4))


def torch_attention(q, k, v) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal attention in torch, written out so P can be kept."""
    seq = q.shape[-2]
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    blocked = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    probs = torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=-1)
    return probs @ v, probs


# --------------------------------------------------------------------------
# the forward and the finite differences


def test_attention_forward_equals_torchs_causal_attention():
    q, k, v, _ = qkv_and_grad(0)
    out, probs = ref.attention_forward(q, k, v)
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(t) for t in (q, k, v)), is_causal=True
    )
    assert_close(want, out)
    assert np.all(np.triu(probs, 1) == 0)
    assert np.allclose(probs.sum(axis=-1), 1.0)


def test_finite_differences_of_a_square():
    x = random((3, 4), 1)
    (grad,) = ref.gradients(lambda x: x**2, {"x": x}, np.ones_like(x)).values()
    assert_close(grad, 2 * x, rtol=FD_RTOL, atol=1e-8)


def test_finite_differences_leave_masked_scores_alone():
    scores = random((2, 5, 5), 2) + base.causal_mask(5)
    grad = ref.gradients(
        lambda scores: base.softmax(scores), {"scores": scores}, random((2, 5, 5), 3)
    )["scores"]
    assert np.all(grad[:, np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] == 0)
    assert not np.isnan(grad).any()


# --------------------------------------------------------------------------
# softmax and attention: NumPy against autograd and finite differences


def test_softmax_backward_equals_autograd():
    scores = random((2, 3, 6, 6), 4) + base.causal_mask(6)
    grad_probs = random(scores.shape, 5)
    s = leaf(scores)
    torch.softmax(s, dim=-1).backward(torch.tensor(grad_probs))
    probs = base.softmax(scores)
    assert_close(s.grad, ref.softmax_backward(probs, grad_probs))
    numeric = ref.gradients(lambda scores: base.softmax(scores), {"scores": scores}, grad_probs)[
        "scores"
    ]
    assert_close(numeric, ref.softmax_backward(probs, grad_probs), rtol=FD_RTOL, atol=1e-8)


def test_attention_backward_equals_autograd():
    q, k, v, grad_output = qkv_and_grad(10)
    leaves = [leaf(t) for t in (q, k, v)]
    out, probs = torch_attention(*leaves)
    out.backward(torch.tensor(grad_output))
    _, ref_probs = ref.attention_forward(q, k, v)
    assert_close(probs, ref_probs)
    grads = ref.attention_backward(q, k, v, ref_probs, grad_output)
    for grad, t in zip(grads, leaves, strict=True):
        assert_close(t.grad, grad)


def test_attention_backward_equals_finite_differences():
    q, k, v, grad_output = (t[:1, :2] for t in qkv_and_grad(20))

    def forward(query, key, value):
        return ref.attention_forward(query, key, value)[0]

    numeric = ref.gradients(forward, {"query": q, "key": k, "value": v}, grad_output)
    grads = ref.attention_backward(q, k, v, ref.attention_forward(q, k, v)[1], grad_output)
    for grad, name in zip(grads, ("query", "key", "value"), strict=True):
        assert_close(numeric[name], grad, rtol=FD_RTOL, atol=1e-8)


def test_only_visible_positions_get_gradient():
    """The output at position 2 reads keys and values 0..2: only they, and
    query 2, get its gradient."""
    q, k, v, _ = qkv_and_grad(30)
    grad_output = np.zeros(SHAPE)
    grad_output[..., 2, :] = 1.0
    grad_q, grad_k, grad_v = ref.attention_backward(
        q, k, v, ref.attention_forward(q, k, v)[1], grad_output
    )
    assert np.all(grad_k[..., 3:, :] == 0) and np.all(grad_v[..., 3:, :] == 0)
    assert np.all(np.delete(grad_q, 2, axis=-2) == 0)
    assert np.all(grad_v[..., :3, :] != 0)


# --------------------------------------------------------------------------
# GPT-2's attention block: NumPy against transformers' GPT2Attention


@pytest.mark.parametrize("std", [0.02, 0.3])
def test_mha_backward_equals_gpt2_attentions_autograd(std):
    config = make_config(n_embd=16, n_head=4)
    attn = init_weights(GPT2Attention(config, layer_idx=0), seed=40, std=std).double()
    x, grad_output = random((2, 7, 16), 41), random((2, 7, 16), 42)
    x_leaf = leaf(x)
    out, _ = attn(x_leaf, attention_mask=hf_causal_mask(7).double())
    out.backward(torch.tensor(grad_output))
    w = to_reference(attn.state_dict())
    grads = ref.mha_backward(w, x, grad_output, config.n_head)
    assert_close(x_leaf.grad, grads["x"])
    for name in ("c_attn", "c_proj"):
        layer = getattr(attn, name)  # Conv1D: weight [in, out]
        assert_close(layer.weight.grad.T, grads[f"{name}.weight"])
        assert_close(layer.bias.grad, grads[f"{name}.bias"])


def attention_weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random weights of a 2-head attention of width 8, in MAX's layout."""
    return {
        "c_attn.weight": rng.standard_normal((24, 8)) * 0.3,
        "c_attn.bias": rng.standard_normal(24) * 0.1,
        "c_proj.weight": rng.standard_normal((8, 8)) * 0.3,
        "c_proj.bias": rng.standard_normal(8) * 0.1,
    }


def test_mha_backward_equals_finite_differences():
    rng = np.random.default_rng(50)
    w = attention_weights(rng)
    x, grad_output = rng.standard_normal((2, 4, 8)), rng.standard_normal((2, 4, 8))

    def forward(x, **weights):
        return base.multi_head_attention(weights, x, 2)

    numeric = ref.gradients(forward, {"x": x, **w}, grad_output)
    for name, grad in ref.mha_backward(w, x, grad_output, 2).items():
        assert_close(numeric[name], grad, rtol=FD_RTOL, atol=1e-8)


# --------------------------------------------------------------------------
# the mistakes change the numbers


SOFTMAX_MISTAKES = [
    {"axis": -2},
    {"weighted": False},
    {"rowsum": False},
    {"times_probs": "none"},
    {"times_probs": "grad"},
]
ATTENTION_MISTAKES = [
    {"scale": 1.0},
    {"scale": 2.0},  # sqrt(head_dim): divided where it multiplies
    {"scale": 0.25},  # the scale twice
    {"value_transpose": False},
    {"key_transpose": False},
    {"query_transpose": True},
    {"swapped": True},
]
LINEAR_MISTAKES = [{"weight_transposed": True}, {"through_transposed": True}, {"bias_mean": True}]
MHA_MISTAKES = [{"qkv_order": order} for order in ("qvk", "kqv", "kvq", "vqk", "vkq")]


def all_different(arrays: list[np.ndarray]) -> bool:
    return all(
        not close(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1 :] if a.shape == b.shape
    )


def test_softmax_mistakes_differ():
    scores = random((2, 6, 6), 60) + base.causal_mask(6)
    probs, grad_probs = base.softmax(scores), random((2, 6, 6), 61)
    results = [ref.softmax_backward(probs, grad_probs, **o) for o in [{}, *SOFTMAX_MISTAKES]]
    assert all_different(results)
    # The mistakes that leave out P's factor send gradient to masked positions.
    for options in ({"times_probs": "none"}, {"times_probs": "grad"}):
        leaked = ref.softmax_backward(probs, grad_probs, **options)
        assert np.any(leaked[:, np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] != 0)


def test_attention_mistakes_differ():
    q, k, v, grad_output = qkv_and_grad(70)
    probs = ref.attention_forward(q, k, v)[1]
    results = [
        ref.attention_backward(q, k, v, probs, grad_output, **o) for o in [{}, *ATTENTION_MISTAKES]
    ]
    for which in range(3):  # dQ, dK, dV: each mistake changes the one it is about
        changed = [r[which] for r in results]
        assert sum(not close(c, changed[0]) for c in changed[1:]) >= 1
    assert all_different([np.concatenate([g.ravel() for g in r]) for r in results])


def test_linear_mistakes_differ():
    rng = np.random.default_rng(75)
    x, weight, grad_y = (rng.standard_normal(s) for s in ((2, 5, 6), (6, 6), (2, 5, 6)))
    right = ref.linear_backward(x, weight, grad_y)
    for options in LINEAR_MISTAKES:
        wrong = ref.linear_backward(x, weight, grad_y, **options)
        assert sum(not close(a, b) for a, b in zip(wrong, right, strict=True)) == 1, options


def test_linear_backward_equals_autograd():
    rng = np.random.default_rng(76)
    x, weight, bias, grad_y = (rng.standard_normal(s) for s in ((2, 5, 6), (3, 6), (3,), (2, 5, 3)))
    leaves = [leaf(t) for t in (x, weight, bias)]
    torch.nn.functional.linear(*leaves).backward(torch.tensor(grad_y))
    for grad, t in zip(ref.linear_backward(x, weight, grad_y), leaves, strict=True):
        assert_close(t.grad, grad)


def test_mha_mistakes_differ():
    rng = np.random.default_rng(80)
    w = attention_weights(rng)
    x, grad_output = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 5, 8))
    right = ref.mha_backward(w, x, grad_output, 2)
    for options in MHA_MISTAKES:
        wrong = ref.mha_backward(w, x, grad_output, 2, **options)
        assert not close(wrong["x"], right["x"]), options
        assert not close(wrong["c_attn.weight"], right["c_attn.weight"]), options
