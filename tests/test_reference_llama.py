"""Part II's NumPy reference (tests/reference_llama.py) checked against Hugging
Face transformers' Llama modules, the trusted oracle.

Each test builds a small module from a local `LlamaConfig` (nothing is
downloaded), fills it with reproducible random weights, gives the reference
the very same weights and compares: torch float32 against NumPy float64.
The last tests check that the reference's mistake options really change the
numbers, so a checker can tell those mistakes apart.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama import modeling_llama as hf

from tests import reference_llama as ref
from tests.checker.compare import close

RTOL, ATOL = 1e-4, 1e-5  # torch float32 against NumPy float64

SMALL = {
    "vocab_size": 97,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
}


def make_config(**overrides) -> LlamaConfig:
    config = LlamaConfig(**{**SMALL, **overrides})
    config._attn_implementation = "eager"
    return config


def randomize(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Reproducible weights: N(0, 0.1), norm scales near 1; eval mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in module.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            base = (
                1.0 if name.endswith("norm.weight") or name == "weight" and param.ndim == 1 else 0.0
            )
            param.copy_(base + 0.1 * noise)
    return module.eval()


def weights_of(module: torch.nn.Module) -> dict[str, np.ndarray]:
    return {name: t.detach().double().numpy() for name, t in module.state_dict().items()}


def assert_close(actual, expected) -> None:
    actual = actual.detach().numpy() if isinstance(actual, torch.Tensor) else actual
    assert close(np.asarray(actual), np.asarray(expected), rtol=RTOL, atol=ATOL)


# --------------------------------------------------------------------------
# step 19: rotary position embeddings


@pytest.mark.parametrize("theta", [10000.0, 500000.0])
def test_rope_tables_equal_llamas(theta):
    config = make_config(rope_parameters={"rope_type": "default", "rope_theta": theta})
    rotary = hf.LlamaRotaryEmbedding(config)
    positions = torch.arange(3, 11)[None, :]
    cos, sin = rotary(torch.zeros(1, dtype=torch.float32), positions)
    head_dim = config.hidden_size // config.num_attention_heads
    want_cos, want_sin = ref.rope_tables(np.arange(3, 11), head_dim, theta)
    assert_close(cos[0], want_cos)
    assert_close(sin[0], want_sin)


def test_apply_rope_equals_llamas():
    generator = torch.Generator().manual_seed(0)
    query, key = (torch.randn(2, 4, 6, 16, generator=generator) for _ in range(2))
    cos, sin = ref.rope_tables(np.arange(6), 16, 10000.0)
    q_hf, k_hf = hf.apply_rotary_pos_emb(
        query,
        key,
        torch.tensor(cos, dtype=torch.float32)[None],
        torch.tensor(sin, dtype=torch.float32)[None],
    )
    assert_close(q_hf, ref.apply_rope(query.double().numpy(), cos, sin))
    assert_close(k_hf, ref.apply_rope(key.double().numpy(), cos, sin))


def test_rope_score_depends_only_on_distance():
    rng = np.random.default_rng(0)
    query, key = rng.standard_normal((2, 16))

    def score(m: int, n: int) -> float:
        cos, sin = ref.rope_tables(np.array([m, n]), 16, 10000.0)
        return float(ref.apply_rope(query, cos[0], sin[0]) @ ref.apply_rope(key, cos[1], sin[1]))

    assert score(7, 3) == pytest.approx(score(104, 100))
    assert score(7, 3) != pytest.approx(score(7, 4))


def test_rope_attention_with_a_cache_equals_attention_over_everything():
    """Rotating the prefix into a cache, then the new tokens at their positions,
    gives what one pass over every token gives."""
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 2, 9, 8)) for _ in range(3))
    whole, keys, values = ref.rope_attention(q, k, v, k[:, :, :0], v[:, :, :0], 10000.0)
    _, past_k, past_v = ref.rope_attention(
        q[:, :, :5], k[:, :, :5], v[:, :, :5], keys[:, :, :0], values[:, :, :0], 10000.0
    )
    tail, *_ = ref.rope_attention(q[:, :, 5:], k[:, :, 5:], v[:, :, 5:], past_k, past_v, 10000.0)
    assert_close(tail, whole[:, :, 5:])


def test_rope_mistakes_change_the_numbers():
    rng = np.random.default_rng(2)
    q, k, v, pk, pv = (rng.standard_normal((1, 2, 4, 8)) for _ in range(5))
    right = ref.rope_attention(q, k, v, pk, pv, 10000.0)[0]
    for options in (
        {"interleaved": True},
        {"start": 0},
        {"rotate": "query,key,value"},
        {"rotate": "query"},
        {"exponent": "i/d"},
    ):
        assert not close(ref.rope_attention(q, k, v, pk, pv, 10000.0, **options)[0], right), options


# --------------------------------------------------------------------------
# step 20: RMSNorm and the SwiGLU MLP


def test_rms_norm_equals_llamas():
    norm = randomize(hf.LlamaRMSNorm(64, eps=1e-5), seed=3)
    x = torch.randn(2, 5, 64, generator=torch.Generator().manual_seed(4)) * 3 + 1
    assert_close(norm(x), ref.rms_norm(x.double().numpy(), weights_of(norm)["weight"], 1e-5))


def test_swiglu_mlp_equals_llamas():
    mlp = randomize(hf.LlamaMLP(make_config()), seed=5)
    x = torch.randn(2, 5, 64, generator=torch.Generator().manual_seed(6))
    assert_close(mlp(x), ref.swiglu_mlp(weights_of(mlp), x.double().numpy()))


# --------------------------------------------------------------------------
# step 21: grouped-query attention


def causal_bias(seq: int) -> torch.Tensor:
    """transformers' additive mask for eager attention: [1, 1, seq, seq]."""
    return torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1)[None, None]


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
def test_gqa_attention_equals_llamas(num_kv_heads):
    config = make_config(num_key_value_heads=num_kv_heads)
    attention = randomize(hf.LlamaAttention(config, layer_idx=0), seed=7)
    x = torch.randn(2, 6, 64, generator=torch.Generator().manual_seed(8))
    positions = torch.arange(6)[None]
    cos, sin = hf.LlamaRotaryEmbedding(config)(x, positions)
    out, _ = attention(x, position_embeddings=(cos, sin), attention_mask=causal_bias(6))
    theta = config.rope_parameters["rope_theta"]
    want, keys, _ = ref.gqa_attention(
        weights_of(attention), x.double().numpy(), 4, num_kv_heads, theta
    )
    assert_close(out, want)
    assert keys.shape == (2, num_kv_heads, 6, 16)  # the cache holds the kv heads only


def test_gqa_with_a_cache_equals_one_pass():
    rng = np.random.default_rng(9)
    w = {
        "q_proj.weight": rng.standard_normal((64, 64)) * 0.1,
        "k_proj.weight": rng.standard_normal((32, 64)) * 0.1,
        "v_proj.weight": rng.standard_normal((32, 64)) * 0.1,
        "o_proj.weight": rng.standard_normal((64, 64)) * 0.1,
    }
    x = rng.standard_normal((1, 9, 64))
    whole, *_ = ref.gqa_attention(w, x, 4, 2, 100.0)
    _, past_k, past_v = ref.gqa_attention(w, x[:, :5], 4, 2, 100.0)
    tail, *_ = ref.gqa_attention(w, x[:, 5:], 4, 2, 100.0, past_k, past_v)
    assert_close(tail, whole[:, 5:])
    tiled, *_ = ref.gqa_attention(w, x, 4, 2, 100.0, tiled=True)
    assert not close(tiled, whole)


# --------------------------------------------------------------------------
# steps 22 and 23: sliding windows, and the whole decoder


def logits_of(model_class, config, seed: int, ids: np.ndarray, **window):
    model = randomize(model_class(config), seed)
    with torch.no_grad():
        hf_logits = model(torch.tensor(ids)).logits
    w = weights_of(model)
    if config.tie_word_embeddings:
        w.pop("lm_head.weight", None)
    want = ref.llama_logits(
        w,
        ids,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        num_kv_heads=config.num_key_value_heads,
        theta=config.rope_parameters["rope_theta"],
        eps=config.rms_norm_eps,
        **window,
    )
    return hf_logits, want


@pytest.mark.parametrize("tied", [True, False])
def test_llama_logits_equal_llamas(tied):
    config = make_config(tie_word_embeddings=tied)
    ids = np.random.default_rng(10).integers(0, 97, size=(2, 7))
    hf_logits, want = logits_of(hf.LlamaForCausalLM, config, 11, ids)
    assert_close(hf_logits, want)


def test_sliding_window_equals_mistrals():
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(**{**SMALL, "sliding_window": 3})
    config._attn_implementation = "eager"
    ids = np.random.default_rng(12).integers(0, 97, size=(1, 9))
    hf_logits, want = logits_of(MistralForCausalLM, config, 13, ids, window=3)
    assert_close(hf_logits, want)
    _, unwindowed = logits_of(MistralForCausalLM, config, 13, ids)
    assert not close(want, unwindowed)
