"""The NumPy reference (tests/reference_gpt2.py) checked against Hugging Face
transformers, the trusted oracle.

Every test builds a small Hugging Face module from a local ``GPT2Config``
(nothing is downloaded), fills it with reproducible random weights, copies the
very same weights into the reference (transposing Conv1D weights into MAX's
[out_features, in_features] layout) and compares the outputs: torch float32
against NumPy float64, so the tolerances are float32 ones.

The last tests check that the reference's "mistake" options really produce
different numbers, so that a checker can tell a learner's mistakes apart.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model
from transformers.activations import NewGELUActivation
from transformers.models.gpt2.modeling_gpt2 import GPT2MLP, GPT2Attention, GPT2Block
from transformers.pytorch_utils import Conv1D

from tests import reference_gpt2 as ref
from tests.checker.compare import close

RTOL = 1e-4  # torch float32 against NumPy float64
ATOL = 1e-5

# Hugging Face's GPT-2 stores these as Conv1D, weight [in, out]; MAX's Linear
# (and the reference) use [out, in].
CONV1D_NAMES = frozenset({"c_attn", "q_attn", "c_proj", "c_fc"})

SMALL = {"vocab_size": 97, "n_positions": 32, "n_embd": 64, "n_layer": 2, "n_head": 4}
# GPT-2 124M's widths, with one layer and a tiny vocabulary to stay fast.
REAL_WIDTH = {
    "vocab_size": 97,
    "n_positions": 64,
    "n_embd": 768,
    "n_layer": 1,
    "n_head": 12,
}


# --------------------------------------------------------------------------
# helpers


def make_config(**overrides) -> GPT2Config:
    # bos/eos default to 50256, outside the tiny vocabularies used here.
    config = GPT2Config(**{**SMALL, "bos_token_id": 0, "eos_token_id": 0, **overrides})
    config._attn_implementation = "eager"
    return config


def init_weights(module: nn.Module, seed: int, std: float = 0.02) -> nn.Module:
    """Reproducible weights: N(0, std) for weights and (nonzero) biases,
    layer-norm weights near 1. Puts the module in eval mode (no dropout)."""
    generator = torch.Generator().manual_seed(seed)

    def randn(shape: torch.Size) -> torch.Tensor:
        return torch.randn(shape, generator=generator, dtype=torch.float32)

    with torch.no_grad():
        for sub in module.modules():
            for name, param in sub.named_parameters(recurse=False):
                if isinstance(sub, nn.LayerNorm):
                    base = 1.0 if name == "weight" else 0.0
                    param.copy_(base + 0.1 * randn(param.shape))
                else:
                    param.copy_(std * randn(param.shape))
    return module.eval()


def to_reference(state_dict) -> dict[str, np.ndarray]:
    """A Hugging Face state_dict as the reference's weights: same names,
    float64 NumPy, Conv1D weights transposed to [out_features, in_features]."""
    weights = {}
    for name, tensor in state_dict.items():
        parts = name.split(".")
        is_conv1d = parts[-1] == "weight" and len(parts) > 1 and parts[-2] in CONV1D_NAMES
        value = tensor.detach().to(torch.float64)
        weights[name] = (value.T if is_conv1d else value).numpy().copy()
    return weights


def hf_causal_mask(seq: int) -> torch.Tensor:
    """The additive float mask that GPT2Model builds for eager attention:
    [1, 1, seq, seq], 0 where allowed, the dtype's minimum elsewhere."""
    blocked = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    mask = torch.zeros(seq, seq).masked_fill(blocked, torch.finfo(torch.float32).min)
    return mask[None, None]


def random_input(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> np.ndarray:
    return scale * np.random.default_rng(seed).standard_normal(shape)


def torch_input(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(x.astype(np.float32))


def assert_matches(actual: torch.Tensor, expected: np.ndarray) -> None:
    actual_np = actual.detach().to(torch.float64).numpy()
    assert actual_np.shape == expected.shape
    np.testing.assert_allclose(actual_np, expected, rtol=RTOL, atol=ATOL)


def max_diff(actual: torch.Tensor, expected: np.ndarray) -> float:
    return float(np.max(np.abs(actual.detach().to(torch.float64).numpy() - expected)))


# --------------------------------------------------------------------------
# the weight conversion itself


def test_to_reference_transposes_exactly_the_conv1d_weights():
    model = init_weights(GPT2LMHeadModel(make_config()), seed=0)
    weights = to_reference(model.state_dict())
    conv1d = {name for name, sub in model.named_modules() if isinstance(sub, Conv1D)}
    assert conv1d  # GPT-2 still uses Conv1D
    for name, tensor in model.state_dict().items():
        owner = name.rsplit(".", 1)[0]
        if owner in conv1d and name.endswith(".weight"):
            assert weights[name].shape == tuple(reversed(tensor.shape)), name
            np.testing.assert_array_equal(weights[name], tensor.double().numpy().T)
        else:
            assert weights[name].shape == tuple(tensor.shape), name
            np.testing.assert_array_equal(weights[name], tensor.double().numpy())
        assert weights[name].dtype == np.float64
    # The LM head is tied to the token embedding (the reference relies on it).
    np.testing.assert_array_equal(weights["lm_head.weight"], weights["transformer.wte.weight"])
    # MAX layout: c_attn maps n_embd -> 3 * n_embd.
    assert weights["transformer.h.0.attn.c_attn.weight"].shape == (3 * 64, 64)


# --------------------------------------------------------------------------
# layer by layer against Hugging Face


# A small spread makes the epsilon matter: 1e-5 against 1e-6 changes the
# output by percents.
@pytest.mark.parametrize("spread", [3.0, 0.01])
def test_layer_norm_matches_torch(spread):
    norm = init_weights(nn.LayerNorm(64, eps=1e-5), seed=1)
    x = random_input((2, 5, 64), seed=2, scale=spread) + 1.5
    with torch.no_grad():
        hf = norm(torch_input(x))
    w = to_reference(norm.state_dict())
    assert_matches(hf, ref.layer_norm(x, w["weight"], w["bias"], 1e-5))
    assert_matches(hf, ref.layer_norm(x, w["weight"], w["bias"]))  # default eps


def test_gelu_new_is_the_tanh_approximation():
    config = make_config()
    assert config.activation_function == "gelu_new"
    act = GPT2MLP(4 * config.n_embd, config).act
    assert isinstance(act, NewGELUActivation)

    x = np.linspace(-6.0, 6.0, 2001)
    with torch.no_grad():
        hf = act(torch.from_numpy(x)).numpy()  # float64 in, float64 out
        exact = nn.functional.gelu(torch.from_numpy(x), approximate="none").numpy()
    np.testing.assert_allclose(ref.gelu(x), hf, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ref.gelu(x, approximate="none"), exact, rtol=1e-12, atol=1e-12)
    # The exact GELU is measurably different: the reference can tell them apart.
    assert np.max(np.abs(ref.gelu(x, approximate="none") - hf)) > 1e-4
    with pytest.raises(ValueError):
        ref.gelu(x, approximate="sigmoid")


def test_mlp_matches_gpt2_mlp():
    config = make_config()
    # std 0.2 puts the GELU inputs at O(1), where tanh and erf GELU differ.
    mlp = init_weights(GPT2MLP(4 * config.n_embd, config), seed=3, std=0.2)
    x = random_input((2, 7, config.n_embd), seed=4)
    with torch.no_grad():
        hf = mlp(torch_input(x))
    w = to_reference(mlp.state_dict())
    expected = ref.mlp(w, x)
    assert_matches(hf, expected)

    # The erf GELU (a likely mistake) misses HF by far more than the float32
    # error, fails the elementwise tolerance and the checkers' close().
    wrong = ref.mlp(w, x, approximate="none")
    assert max_diff(hf, wrong) > 100 * max_diff(hf, expected)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(hf.double().numpy(), wrong, rtol=RTOL, atol=ATOL)
    assert not close(wrong, expected)


@pytest.mark.parametrize("std", [0.02, 0.2])
def test_attention_matches_gpt2_attention(std):
    config = make_config()
    attn = init_weights(GPT2Attention(config, layer_idx=0), seed=5, std=std)
    x = random_input((2, 9, config.n_embd), seed=6)
    with torch.no_grad():
        hf, hf_weights = attn(torch_input(x), attention_mask=hf_causal_mask(9))
    w = to_reference(attn.state_dict())
    expected = ref.multi_head_attention(w, x, config.n_head)
    assert_matches(hf, expected)

    # The test has teeth: HF's weights are causal, and forgetting the mask
    # changes the output by far more than the tolerance.
    assert torch.all(hf_weights.triu(1) == 0)
    unmasked = ref.multi_head_attention(w, x, config.n_head, mask="none")
    assert max_diff(hf, unmasked) > 20 * ATOL


def test_heads_split_like_hugging_face():
    config = make_config()
    attn = init_weights(GPT2Attention(config, layer_idx=0), seed=7)
    x = random_input((2, 6, config.n_embd), seed=8)
    with torch.no_grad():
        projected = attn.c_attn(torch_input(x))
    query = projected.split(config.n_embd, dim=2)[0]
    hf_heads = query.view(2, 6, config.n_head, -1).transpose(1, 2)
    w = to_reference(attn.state_dict())
    ref_query, _, _ = ref.qkv(w, x)
    ref_heads = ref.split_heads(ref_query, config.n_head)
    assert_matches(hf_heads, ref_heads)
    np.testing.assert_array_equal(ref.merge_heads(ref_heads), ref_query)


def test_embeddings_match_gpt2_model():
    config = make_config()
    model = init_weights(GPT2Model(config), seed=9)
    ids = np.random.default_rng(10).integers(0, config.vocab_size, size=(2, 11))
    with torch.no_grad():
        out = model(torch.from_numpy(ids), output_hidden_states=True)
    w = to_reference(model.state_dict())
    assert_matches(out.hidden_states[0], ref.embeddings(w, ids))


@pytest.mark.parametrize("widths", [SMALL, REAL_WIDTH], ids=["small", "gpt2-124m-width"])
def test_block_matches_gpt2_block(widths):
    config = make_config(**widths)
    block = init_weights(GPT2Block(config, layer_idx=0), seed=11)
    x = random_input((2, 10, config.n_embd), seed=12)
    with torch.no_grad():
        hf = block(torch_input(x), attention_mask=hf_causal_mask(10))
    hf = hf[0] if isinstance(hf, tuple) else hf
    w = to_reference(block.state_dict())
    assert_matches(hf, ref.block(w, x, config.n_head, config.layer_norm_epsilon))


def test_model_matches_gpt2_model():
    config = make_config()
    model = init_weights(GPT2Model(config), seed=13)
    ids = np.random.default_rng(14).integers(0, config.vocab_size, size=(2, 12))
    with torch.no_grad():
        hf = model(torch.from_numpy(ids)).last_hidden_state
    w = to_reference(model.state_dict())
    expected = ref.model(w, ids, config.n_layer, config.n_head, config.layer_norm_epsilon)
    assert_matches(hf, expected)


def assert_lm_logits_match(config, seed: int, ids_shape: tuple[int, int]) -> None:
    """The reference's logits equal transformers' GPT2LMHeadModel's, same weights."""
    model = init_weights(GPT2LMHeadModel(config), seed=seed)
    ids = np.random.default_rng(seed + 1).integers(0, config.vocab_size, size=ids_shape)
    with torch.no_grad():
        hf = model(torch.from_numpy(ids)).logits
    w = to_reference(model.state_dict())
    expected = ref.lm_logits(w, ids, config.n_layer, config.n_head, config.layer_norm_epsilon)
    assert expected.shape == (*ids_shape, config.vocab_size)
    assert_matches(hf, expected)


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_lm_logits_match_gpt2_lm_head_model(attn_implementation):
    config = make_config()
    config._attn_implementation = attn_implementation
    assert_lm_logits_match(config, seed=15, ids_shape=(2, config.n_positions))


def test_lm_logits_match_at_gpt2_124m_width():
    assert_lm_logits_match(make_config(**REAL_WIDTH), seed=17, ids_shape=(1, 16))


# --------------------------------------------------------------------------
# the causal mask


def test_causal_mask_pattern():
    mask = ref.causal_mask(4)
    assert mask.shape == (4, 4)
    allowed = np.array(
        [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]],
        dtype=bool,
    )
    assert np.all(mask[allowed] == 0.0)
    assert np.all(np.isneginf(mask[~allowed]))


def test_causal_mask_with_cached_tokens():
    mask = ref.causal_mask(3, num_tokens=2)
    assert mask.shape == (3, 5)
    allowed = np.array(
        [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]],
        dtype=bool,
    )
    assert np.all(mask[allowed] == 0.0)
    assert np.all(np.isneginf(mask[~allowed]))
    # Without new tokens it is the plain causal mask's last rows.
    np.testing.assert_array_equal(ref.causal_mask(5)[2:], mask)


def test_causal_mask_matches_hugging_face_eager_mask():
    seq = 7
    blocked = hf_causal_mask(seq)[0, 0] < 0
    np.testing.assert_array_equal(np.isneginf(ref.causal_mask(seq)), blocked.numpy())


# --------------------------------------------------------------------------
# the mistake options are distinguishable


def _qkv(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((2, 3, 6, 16)) for _ in range(3))  # type: ignore[return-value]


ATTENTION_MISTAKES = {
    "no scaling": {"scale": 1.0},
    "no mask": {"mask": "none"},
    "inverted mask": {"mask": "inverted"},
    "mask after softmax": {"mask": "after_softmax"},
    "softmax over the wrong axis": {"softmax_axis": -2},
}


def test_attention_default_is_scaled_causal_softmax():
    q, k, v = _qkv(19)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    scores = np.where(np.tril(np.ones((6, 6), dtype=bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    np.testing.assert_allclose(ref.attention(q, k, v), weights @ v, rtol=1e-12, atol=1e-12)


def test_attention_mistakes_differ_from_correct_and_each_other():
    q, k, v = _qkv(20)
    correct = ref.attention(q, k, v)
    results = {"correct": correct}
    with np.errstate(invalid="ignore"):  # "mask after softmax" makes inf/NaN
        for name, options in ATTENTION_MISTAKES.items():
            results[name] = ref.attention(q, k, v, **options)
    for name, result in results.items():
        assert result.shape == correct.shape, name
    names = list(results)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not close(results[a], results[b]), (a, b)
            assert not close(results[b], results[a]), (b, a)
    with pytest.raises(ValueError):
        ref.attention(q, k, v, mask="upper")


def test_split_and_merge_heads_mistakes_differ():
    x = random_input((2, 6, 64), seed=21)
    heads = ref.split_heads(x, 4)
    assert heads.shape == (2, 4, 6, 16)
    wrong_heads = ref.split_heads(x, 4, transpose=False)
    assert wrong_heads.shape == heads.shape
    assert not close(wrong_heads, heads)

    merged = ref.merge_heads(heads)
    assert merged.shape == x.shape
    np.testing.assert_array_equal(merged, x)
    wrong_merged = ref.merge_heads(heads, transpose=False)
    assert wrong_merged.shape == x.shape
    assert not close(wrong_merged, merged)

    # And through a whole attention layer, each mistake shows in the output.
    config = make_config()
    attn = init_weights(GPT2Attention(config, layer_idx=0), seed=22, std=0.2)
    w = to_reference(attn.state_dict())
    correct = ref.multi_head_attention(w, x, 4)
    for options in ({"split_transpose": False}, {"merge_transpose": False}):
        assert not close(ref.multi_head_attention(w, x, 4, **options), correct), options
