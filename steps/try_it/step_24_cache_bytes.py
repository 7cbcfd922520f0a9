# %% [markdown]
# # Step 24, try it: what MLA caches against MHA, GQA and MQA
#
# Per token and layer, an attention caches what its next tokens will need:
# every key/value head's key and value for MHA, GQA and MQA, one latent and
# one rotary key for MLA. First those counts at two shapes, DeepSeek-V3's
# (61 layers, 128 heads) and GPT-2 124M's (12 layers, 12 heads), in bfloat16,
# per token and for whole texts, as a table and as a figure against the
# length of the text. Then one small MLA layer runs on a prompt and one more
# token, and the caches it returns are measured. Last, a copy of the solution
# whose cache holds the expanded keys and values: what the checker says.

# %%
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

code = learner_or_reference(24)  # yours once it passes its check, else the reference
MLAConfig, MultiHeadLatentAttention = code.MLAConfig, code.MultiHeadLatentAttention

BFLOAT16 = 2  # bytes per number

# Each shape: layers, query heads, the widths of one head's key and value,
# the key/value heads of its GQA variant, and its MLA's latent and rotary key.
# DeepSeek-V3's keys are 128 + 64 = 192 wide (the part without position and
# the rotary part). GPT-2 has no MLA; its MLA here keeps DeepSeek-V3's
# proportions: a latent 4 head widths wide and a rotary key half a head wide.
SHAPES = {
    "DeepSeek-V3": dict(layers=61, heads=128, key=192, value=128, gqa=8, latent=512, rope=64),
    "GPT-2 124M": dict(layers=12, heads=12, key=64, value=64, gqa=4, latent=256, rope=32),
}


def numbers_per_token(shape: dict) -> dict[str, int]:
    """The numbers one layer caches for one token, for each attention."""
    key_and_value = shape["key"] + shape["value"]
    return {
        "MHA": shape["heads"] * key_and_value,
        f"GQA, {shape['gqa']} kv heads": shape["gqa"] * key_and_value,
        "MQA": key_and_value,
        "MLA": shape["latent"] + shape["rope"],
    }


# %%
for name, shape in SHAPES.items():
    print(f"{name}: {shape['layers']} layers, {shape['heads']} query heads, bfloat16")
    print("  attention        | per token and layer | per token, all layers |", end="")
    print(" 4,096 tokens | 131,072 tokens | times MLA's")
    counts = numbers_per_token(shape)
    for attention, numbers in counts.items():
        layer = numbers * BFLOAT16
        model = layer * shape["layers"]
        print(
            f"  {attention:16s} | {layer:13,d} bytes | {model / 2**10:15,.1f} KiB |"
            f" {model * 4096 / 2**20:8,.0f} MiB | {model * 131072 / 2**30:10.2f} GiB |"
            f" {numbers / counts['MLA']:11.2f}"
        )
    print()

# %% [markdown]
# The same as curves: the cache of the whole model against the number of
# tokens in the text, both axes logarithmic. Every attention's cache grows
# the same way, one row per token; what differs is the row.

# %%
tokens = 2.0 ** np.arange(10, 18)  # 1,024 to 131,072
plt = pyplot()
if plt:
    figure, panels = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    for axes, (name, shape) in zip(panels, SHAPES.items(), strict=True):
        for attention, numbers in numbers_per_token(shape).items():
            gib = numbers * BFLOAT16 * shape["layers"] * tokens / 2**30
            axes.plot(tokens, gib, marker="o", markersize=3, label=attention)
        axes.set_xscale("log", base=2)
        axes.set_xticks(tokens, [f"{int(n) // 1024}K" for n in tokens])
        axes.set_yscale("log")
        axes.set(
            xlabel="tokens in the text",
            ylabel="KV cache, all layers (GiB)",
            title=f"{name}'s shape, bfloat16",
        )
        axes.grid(alpha=0.3, which="both")
        axes.legend(fontsize=8)
    show(figure, "step_24_cache_bytes")

# %% [markdown]
# One MLA layer with small sizes (8 heads, a latent of 32, parts of 16, 8 and
# 16 features) and its random initial weights: a prompt of 7 tokens with
# empty caches, then one more token with the caches it returned. What the
# cache holds is compared with what `expand` makes of it, every head's key
# without position and value.

# %%
config = MLAConfig(
    hidden_size=64,
    num_attention_heads=8,
    q_lora_rank=24,
    kv_lora_rank=32,
    qk_nope_head_dim=16,
    qk_rope_head_dim=8,
    v_head_dim=16,
)
attention = MultiHeadLatentAttention(config)
print("weights:", {name: [int(d) for d in p.shape] for name, p in attention.parameters})

rng = np.random.default_rng(0)
prompt = Tensor(rng.normal(0, 1, (1, 7, config.hidden_size)).astype(np.float32))
no_latent = Tensor(np.zeros((1, 0, config.kv_lora_rank), np.float32))
no_rope_key = Tensor(np.zeros((1, 0, config.qk_rope_head_dim), np.float32))
_, latent, rope_key = attention(prompt, no_latent, no_rope_key)
token = Tensor(rng.normal(0, 1, (1, 1, config.hidden_size)).astype(np.float32))
_, latent, rope_key = attention(token, latent, rope_key)
k_nope, value = attention.expand(latent)


def nbytes(t: Tensor) -> int:
    return np.asarray(t.to_numpy()).nbytes


tokens_cached = int(latent.shape[1])
cached = nbytes(latent) + nbytes(rope_key)
expanded = nbytes(k_nope) + nbytes(value) + config.num_attention_heads * nbytes(rope_key)
print(
    f"latent cache {[int(d) for d in latent.shape]}, rotary keys {[int(d) for d in rope_key.shape]}"
)
print(f"the cache: {cached:,} bytes = {tokens_cached} tokens x {cached // tokens_cached} (float32)")
print(
    f"expanded: keys {[int(d) for d in k_nope.shape]} and values {[int(d) for d in value.shape]}"
    f", with each head's copy of the rotary key {expanded:,} bytes ="
    f" {tokens_cached} tokens x {expanded // tokens_cached}"
)

# %% [markdown]
# A copy of the solution with one mistake: the forward pass returns the
# expanded keys and values as the cache (the output is still right). The
# checker's verdict on that copy, run as `python -m tests.check 24 --file COPY`:

# %%
RIGHT = "return self.o_proj(attn_output), latent, rope_key"
WRONG = "return self.o_proj(attn_output), key, value"
source = (REPO / "solutions" / "solution_24.py").read_text()
assert RIGHT in source
copy = Path(tempfile.mkdtemp()) / "expanded_cache_24.py"
copy.write_text(source.replace(RIGHT, WRONG))
result = subprocess.run(
    [sys.executable, "-m", "tests.check", "24", "--file", str(copy)],
    cwd=REPO,
    env={**os.environ, "CHECK_PLAIN": "1", "NO_COLOR": "1"},
    capture_output=True,
    text=True,
)
print(result.stdout.replace(str(copy.resolve()), "the copy"))
