"""Part III's NumPy reference for multi-head latent attention
(tests/reference_mla.py) checked against Hugging Face transformers'
DeepseekV3Attention, the trusted oracle.

Each test builds a small attention from a local `DeepseekV3Config` (nothing is
downloaded), fills it with reproducible random weights, gives the reference
the very same weights and compares torch float32 with NumPy float64. The last
tests check that the absorbed decode equals expand-then-attend and that every
mistake option changes the numbers, so a checker can tell them apart.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import DeepseekV3Config
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf

from tests import reference_mla as ref
from tests.checker.compare import close
from tests.specs.step_24 import SIZES  # the checker's sizes: every width different
from tests.test_reference_llama import assert_close, causal_bias, randomize, weights_of


def make_attention(sizes: ref.Sizes, seed: int) -> tuple[hf.DeepseekV3Attention, DeepseekV3Config]:
    sizes_by_name = sizes.config()
    # transformers 5 takes the rotary base inside rope_parameters.
    theta = sizes_by_name.pop("rope_theta")
    config = DeepseekV3Config(
        **sizes_by_name,
        vocab_size=97,
        num_key_value_heads=sizes.num_heads,
        rope_parameters={"rope_type": "default", "rope_theta": theta},
        num_hidden_layers=1,
    )
    config._attn_implementation = "eager"
    return randomize(hf.DeepseekV3Attention(config, layer_idx=0), seed), config


def hf_attention(sizes: ref.Sizes, seq: int, seed: int = 3):
    """transformers' output for a random x, its weights and x as NumPy."""
    attention, config = make_attention(sizes, seed)
    x = torch.randn(2, seq, sizes.hidden_size, generator=torch.Generator().manual_seed(seed + 1))
    rotary = hf.DeepseekV3RotaryEmbedding(config)
    cos, sin = rotary(x, torch.arange(seq)[None])
    with torch.no_grad():
        out, _ = attention(x, position_embeddings=(cos, sin), attention_mask=causal_bias(seq))
    return out, weights_of(attention), x.double().numpy()


@pytest.mark.parametrize("interleave", [True, False])
def test_mla_equals_deepseek_v3(interleave):
    sizes = ref.Sizes(**{**SIZES.__dict__, "rope_interleave": interleave})
    out, w, x = hf_attention(sizes, seq=7)
    assert set(w) == set(sizes.shapes())
    assert all(w[name].shape == shape for name, shape in sizes.shapes().items())
    want, latents, rope_keys = ref.mla_attention(w, x, sizes)
    assert_close(out, want)
    # The cache is one latent and one rotary key per token: no head axis.
    assert latents.shape == (2, 7, sizes.kv_lora_rank)
    assert rope_keys.shape == (2, 7, sizes.qk_rope_head_dim)


def test_a_cache_equals_one_pass():
    _, w, x = hf_attention(SIZES, seq=9)
    whole, latents, rope_keys = ref.mla_attention(w, x, SIZES)
    _, past_latent, past_rope_key = ref.mla_attention(w, x[:, :5], SIZES)
    tail, grown_latent, grown_rope_key = ref.mla_attention(
        w, x[:, 5:], SIZES, past_latent, past_rope_key
    )
    assert_close(tail, whole[:, 5:])
    assert_close(grown_latent, latents)
    assert_close(grown_rope_key, rope_keys)


def test_absorbed_decode_equals_expanding():
    """Folding kv_b_proj's halves into the query and the output gives the same
    token as expanding every cached latent (the algebra step 25 teaches)."""
    _, w, x = hf_attention(SIZES, seq=6)
    whole, *_ = ref.mla_attention(w, x, SIZES)
    _, past_latent, past_rope_key = ref.mla_attention(w, x[:, :5], SIZES)
    absorbed = ref.absorbed_decode(w, x[:, 5:], SIZES, past_latent, past_rope_key)
    assert_close(absorbed, whole[:, 5:])
    for options in (
        {"scale_dim": SIZES.kv_lora_rank},
        {"rope_scores": False},
        {"scaled": "rope"},
        {"softmax_axis": 1},
    ):
        wrong = ref.absorbed_decode(w, x[:, 5:], SIZES, past_latent, past_rope_key, **options)
        assert not close(wrong, whole[:, 5:])


MISTAKES = [
    {"q_norm": False},
    {"kv_norm": False},
    {"rope_first": True},
    {"value_first": True},
    {"interleave": False},
    {"scale_dim": SIZES.v_head_dim},
    {"scale_dim": SIZES.qk_nope_head_dim},
    {"key_order": "rope,nope"},
]


@pytest.mark.parametrize("options", MISTAKES, ids=lambda o: ",".join(map(str, o.items())))
def test_each_mistake_changes_the_output(options):
    # Equal widths, so that every mistake runs (swapping halves needs equal ones).
    sizes = ref.Sizes(**{**SIZES.__dict__, "qk_rope_head_dim": 8, "v_head_dim": 8})
    rng = np.random.default_rng(5)
    w = {name: rng.standard_normal(shape) * 0.2 for name, shape in sizes.shapes().items()}
    x = rng.standard_normal((2, 5, sizes.hidden_size))
    want, *_ = ref.mla_attention(w, x, sizes)
    got, *_ = ref.mla_attention(w, x, sizes, **options)
    assert not close(got, want)


def test_restarting_positions_and_a_raw_cache_show():
    rng = np.random.default_rng(6)
    w = {name: rng.standard_normal(shape) * 0.2 for name, shape in SIZES.shapes().items()}
    x = rng.standard_normal((1, 7, SIZES.hidden_size))
    _, past_latent, past_rope_key = ref.mla_attention(w, x[:, :4], SIZES)
    want, latents, _ = ref.mla_attention(w, x[:, 4:], SIZES, past_latent, past_rope_key)
    restarted, *_ = ref.mla_attention(w, x[:, 4:], SIZES, past_latent, past_rope_key, start=0)
    assert not close(restarted, want)
    _, raw, _ = ref.mla_attention(
        w, x[:, 4:], SIZES, past_latent, past_rope_key, cache_raw_latent=True
    )
    assert not close(raw, latents)


def test_cache_bytes_at_deepseek_v3s_shape():
    v3 = ref.Sizes(7168, 128, 1536, 512, 128, 64, 128)
    per_token = ref.cache_bytes_per_token(v3)
    assert per_token["mla"] == (512 + 64) * 2
    assert per_token["expanded"] == 128 * (192 + 128) * 2
