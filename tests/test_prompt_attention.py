"""fast/kernels' gpt2_prompt_attention, a prompt's causal self-attention in
one call, against the attention written out in NumPy: every head, every
query, for prompts that end inside a block of queries and inside a block of
keys, heads whose size is not a whole number of vectors, and a batch; and
gpt2_prompt_attention_bf16, the bfloat16 model's, through AMX's tiles where
the CPU has them."""

from __future__ import annotations

import numpy as np
import pytest

from common import max_runtime
from devtools.bench import profile
from fast import bfloat16

max_runtime.prepare()

SHAPES = [(1, 1), (1, 7), (2, 16), (1, 17), (2, 33), (1, 70)]  # (batch, seq)


def numpy_attention(qkv: np.ndarray, heads: int, rounded: bool = False) -> np.ndarray:
    """Step 07's causal attention in float64, every head, heads merged; with
    `rounded`, of the queries (scaled), keys and values rounded to bfloat16
    first, as gpt2_prompt_attention_bf16 rounds them."""
    batch, seq, width = qkv.shape
    embed = width // 3
    query, key, value = (
        qkv[:, :, part * embed : (part + 1) * embed]
        .reshape(batch, seq, heads, embed // heads)
        .transpose(0, 2, 1, 3)
        .astype(np.float64)
        for part in range(3)
    )
    query = query / np.sqrt(embed // heads)
    if rounded:
        query, key, value = (
            bfloat16.bfloat16_rounded(part).astype(np.float64) for part in (query, key, value)
        )
    scores = query @ key.transpose(0, 1, 3, 2)
    scores += np.triu(np.full((seq, seq), -np.inf), 1)  # a query sees no later key
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return (weights @ value).transpose(0, 2, 1, 3).reshape(batch, seq, embed)


def run(graph, qkv: np.ndarray, heads: int) -> np.ndarray:
    from max.driver import Buffer

    heads_buffer = Buffer.from_numpy(np.array([heads], dtype=np.int64))
    return graph.execute(Buffer.from_numpy(qkv), heads_buffer)[0].to_numpy()


@pytest.mark.parametrize(("heads", "head_dim"), [(12, 64), (3, 20), (2, 5)])
def test_the_prompt_attention_kernel_is_causal_attention(heads: int, head_dim: int) -> None:
    graph = profile.prompt_attention_graph(heads * head_dim)
    rng = np.random.default_rng(head_dim)
    for batch, seq in SHAPES:
        # Scores of a few units, as a trained model's: the softmax is not flat.
        qkv = (rng.standard_normal((batch, seq, 3 * heads * head_dim)) * 2).astype(np.float32)
        out = run(graph, qkv, heads)
        np.testing.assert_allclose(
            out, numpy_attention(qkv, heads), rtol=1e-5, atol=1e-5, err_msg=f"{batch}x{seq}"
        )


@pytest.mark.parametrize(("heads", "head_dim"), [(12, 64), (3, 20), (2, 5), (2, 96)])
def test_the_bfloat16_models_prompt_attention_is_causal_attention_in_bfloat16(
    heads: int, head_dim: int
) -> None:
    """On a CPU with AMX: the attention of q, k and v rounded to bfloat16,
    within the rounding of the softmax's weights to bfloat16 (2^-8 of a
    weight: a fiftieth of the outputs' spread allowed, where the kernel
    lands within a two-hundredth); heads of 96 take one tile of 16 dims
    after four. Elsewhere: gpt2_prompt_attention's result, exactly."""
    from fast.kernel_ops import kernels_built_for

    graph = profile.prompt_attention_graph(heads * head_dim, "gpt2_prompt_attention_bf16")
    float32_graph = profile.prompt_attention_graph(heads * head_dim)
    amx = kernels_built_for()[2]
    rng = np.random.default_rng(head_dim)
    for batch, seq in [*SHAPES, (1, 130)]:
        qkv = (rng.standard_normal((batch, seq, 3 * heads * head_dim)) * 2).astype(np.float32)
        out = run(graph, qkv, heads)
        if not amx:
            np.testing.assert_array_equal(out, run(float32_graph, qkv, heads))
            continue
        expected = numpy_attention(qkv, heads, rounded=True)
        error = np.abs(out - expected).max() / expected.std()
        assert error < 0.02, f"{batch}x{seq}: off by {error:.3f} of the outputs' spread"


def test_the_prompt_attention_kernel_refuses_heads_that_do_not_divide_the_width() -> None:
    graph = profile.prompt_attention_graph(12)
    qkv = np.zeros((1, 4, 36), dtype=np.float32)
    with pytest.raises(Exception, match="embed a multiple of heads"):
        run(graph, qkv, 5)


def test_the_profile_times_the_kernel_against_maxs_operations_that_agree_with_it(
    monkeypatch,
) -> None:
    """bench --profile's attention table compares like with like: its graph
    of MAX's operations computes what the kernel does, and every way is timed
    at every length (here one, the graphs' own)."""
    from max.driver import Buffer

    graph = profile.max_ops_attention_graph(40, heads=4, embed=32)
    qkv = np.random.default_rng(1).standard_normal((1, 40, 96)).astype(np.float32)
    (max_ops,) = graph.execute(Buffer.from_numpy(qkv))
    np.testing.assert_allclose(max_ops.to_numpy(), numpy_attention(qkv, 4), rtol=1e-5, atol=1e-5)
    kernel = profile.prompt_attention_graph(32)
    np.testing.assert_allclose(run(kernel, qkv, 4), max_ops.to_numpy(), rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(profile, "PROMPT_LENGTHS", (40,))
    timed = profile.attention_profile({"n_head": 4, "n_embd": 32}, "bfloat16", repeats=1)
    assert set(timed["milliseconds"]) == {40}
    for ways in timed["milliseconds"].values():
        assert set(ways) == {"max_ops", "our_kernel", "our_kernel_float32", "torch_sdpa"}
        assert all(spread["median"] > 0 for spread in ways.values())
