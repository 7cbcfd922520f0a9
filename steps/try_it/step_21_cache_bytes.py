# %% [markdown]
# # Step 21, try it: what the KV cache holds, with fewer key/value heads
#
# A cache keeps one key and one value per layer, per key/value head and per
# token: 2 x layers x kv_heads x head_dim numbers for every token. First that
# count for GPT-2 124M and for a model shaped like Llama 3.2 1B with 32, 8 or 1
# key/value heads, in float32 and bfloat16, per token and per sequence of 4096
# tokens, then as a figure. Then one attention layer of SmolLM2-135M's shape
# (the step's default LlamaConfig) runs on a prompt and one more token, and the
# cache it returns is measured. Last, a copy of the solution whose cache keeps
# the repeated heads: what the checker says, and what the next token does.

# %%
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from max.experimental.tensor import Tensor

from common.steps import REPO
from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(21)  # yours once it passes its check, else the reference
GroupedQueryAttention, LlamaConfig = code.GroupedQueryAttention, code.LlamaConfig

BYTES = {"float32": 4, "bfloat16": 2}
SEQUENCE = 4096  # tokens

# name: (layers, query heads, key/value heads, head_dim)
MODELS = {
    "GPT-2 124M, MHA": (12, 12, 12, 64),
    "1B shape, MHA": (16, 32, 32, 64),
    "Llama 3.2 1B, GQA": (16, 32, 8, 64),
    "1B shape, MQA": (16, 32, 1, 64),
}


def cache_bytes(layers: int, kv_heads: int, head_dim: int, dtype: str, tokens: int = 1) -> int:
    """A key and a value, in every layer, for every key/value head and token."""
    return 2 * layers * kv_heads * head_dim * BYTES[dtype] * tokens


# %%
print("model              | layers | query heads | kv heads | group |", end="")
print(" KiB per token: float32, bfloat16 | MiB per 4096 tokens: float32, bfloat16")
for name, (layers, heads, kv_heads, head_dim) in MODELS.items():
    per_token = [cache_bytes(layers, kv_heads, head_dim, dtype) / 2**10 for dtype in BYTES]
    sequence = [cache_bytes(layers, kv_heads, head_dim, d, SEQUENCE) / 2**20 for d in BYTES]
    print(
        f"{name:18s} | {layers:6d} | {heads:11d} | {kv_heads:8d} | {heads // kv_heads:5d} |"
        f" {per_token[0]:22.0f} {per_token[1]:9.0f} |"
        f" {sequence[0]:28,.0f} {sequence[1]:9,.0f}"
    )

# %% [markdown]
# Llama 3.2 1B has about 1.24 billion parameters, 2.3 GiB in bfloat16. Every new
# token of a decode step reads all of them once, and the whole cache of every
# sequence in the batch. Here is what that cache is for a batch of 16 sequences
# of 4096 tokens, and for one sequence of 131072 tokens, Llama 3.2's longest.

# %%
weights = 1_235_814_400 * BYTES["bfloat16"]
print(f"Llama 3.2 1B's weights in bfloat16: {weights / 2**30:.1f} GiB")
print("                   | 16 x 4096 tokens | 1 x 131072 tokens   (bfloat16)")
for name, (layers, _, kv_heads, head_dim) in list(MODELS.items())[1:]:
    batch = 16 * cache_bytes(layers, kv_heads, head_dim, "bfloat16", SEQUENCE)
    long = cache_bytes(layers, kv_heads, head_dim, "bfloat16", 131072)
    print(f"{name:18s} | {batch / 2**30:12.2f} GiB | {long / 2**30:13.2f} GiB")

# %% [markdown]
# The same numbers as bars: the left axis in KiB per token, the right axis in
# MiB per sequence of 4096 tokens (4 times the left: 4096 tokens x 1 KiB is
# 4 MiB).

# %%
plt = pyplot()
if plt:
    figure, axes = plt.subplots(figsize=(8, 4), layout="constrained")
    places = np.arange(len(MODELS))
    for offset, dtype in zip((-0.2, 0.2), BYTES, strict=True):
        heights = [cache_bytes(n, kv, d, dtype) / 2**10 for n, _, kv, d in MODELS.values()]
        bars = axes.bar(places + offset, heights, width=0.4, label=dtype)
        axes.bar_label(bars, fmt="%.0f", fontsize=8)
    axes.set_xticks(places, list(MODELS))
    axes.set(ylabel="KiB per token", title="KV cache per token, all layers")
    right = axes.secondary_yaxis("right", functions=(lambda k: 4 * k, lambda m: m / 4))
    right.set_ylabel(f"MiB per {SEQUENCE} tokens")
    axes.legend()
    axes.grid(axis="y", alpha=0.3)
    show(figure, "step_21_cache_bytes")

# %% [markdown]
# One attention layer shaped like SmolLM2-135M's (9 query heads, 3 key/value
# heads, head_dim 64), with its random initial weights: a prompt of 7 tokens
# with an empty cache, then one more token with the cache it returned.

# %%
config = LlamaConfig()  # SmolLM2-135M
attention = GroupedQueryAttention(config)
heads, kv_heads, head_dim = (
    config.num_attention_heads,
    config.num_key_value_heads,
    config.head_dim,
)
print("weights:", {name: [int(d) for d in p.shape] for name, p in attention.parameters})

rng = np.random.default_rng(0)
prompt = Tensor(rng.normal(0, 1, (1, 7, config.hidden_size)).astype(np.float32))
empty = Tensor(np.zeros((1, kv_heads, 0, head_dim), np.float32))
_, past_key, past_value = attention(prompt, empty, empty)
token = Tensor(rng.normal(0, 1, (1, 1, config.hidden_size)).astype(np.float32))
_, key, value = attention(token, past_key, past_value)

per_layer = cache_bytes(1, kv_heads, head_dim, "float32")
for when, k, v in (("after the prompt", past_key, past_value), ("after one more", key, value)):
    size = sum(np.asarray(t.to_numpy()).nbytes for t in (k, v))
    tokens = int(k.shape[2])
    print(
        f"{when:16s}: key cache {[int(d) for d in k.shape]}, keys + values {size:,} bytes "
        f"= {tokens} tokens x {per_layer:,}"
    )
print(
    f"per token: {per_layer:,} bytes in this layer, {per_layer * config.num_hidden_layers:,} "
    f"in all {config.num_hidden_layers} layers (float32); with the {heads} repeated heads "
    f"it would be {per_layer * heads // kv_heads:,} per layer"
)

# %% [markdown]
# A copy of the solution with one mistake added: the forward pass returns the
# repeated keys and values as the cache. First the checker's verdict on that
# copy, run as `python -m tests.check 21 --file COPY`, then the copy itself on
# the prompt and one more token.

# %%
MISTAKE = '''

_Right = GroupedQueryAttention


class GroupedQueryAttention(_Right):
    """The mistake: the cache keeps the repeated heads."""

    def forward(self, hidden_states, past_key, past_value):
        output, key, value = super().forward(hidden_states, past_key, past_value)
        copies = int(self.q_proj.weight.shape[0]) // int(self.k_proj.weight.shape[0])
        return output, repeat_kv(key, copies), repeat_kv(value, copies)
'''
folder = Path(tempfile.mkdtemp())
copy = folder / "repeated_cache_21.py"
copy.write_text((REPO / "solutions" / "solution_21.py").read_text() + MISTAKE)
result = subprocess.run(
    [sys.executable, "-m", "tests.check", "21", "--file", str(copy)],
    cwd=REPO,
    env={**os.environ, "CHECK_PLAIN": "1", "NO_COLOR": "1"},
    capture_output=True,
    text=True,
)
print(result.stdout.replace(str(copy.resolve()), "the copy"))

# %%
spec = importlib.util.spec_from_file_location("repeated_cache_21", copy)
broken = importlib.util.module_from_spec(spec)
spec.loader.exec_module(broken)
wrong = broken.GroupedQueryAttention(config)
_, past_key, past_value = wrong(prompt, empty, empty)
print(f"the copy's key cache after the prompt: {[int(d) for d in past_key.shape]}")
try:
    wrong(token, past_key, past_value)
    print("the next token ran")
except ValueError as error:
    print(f"the next token fails: {str(error).split(': vals=')[0]}")
