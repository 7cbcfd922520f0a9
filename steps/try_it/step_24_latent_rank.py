# %% [markdown]
# # Step 24, try it: every head's keys and values from one small latent
#
# MLA's cache is small because of a constraint: a token's keys (without
# position) and values, for every head, are all made by kv_b_proj from the
# same kv_lora_rank numbers. Stack them for many tokens, one row per token,
# and the matrix has at most kv_lora_rank independent columns, its rank. This
# experiment measures that with the singular values (NumPy's SVD) of a small
# layer's expanded keys and values, and compares them with multi-head
# attention's keys and values of the same width, made straight from the
# hidden states: their rank is bounded by the hidden size only. Then how much
# of each matrix a rank-r approximation keeps, as a figure.

# %%
import numpy as np
from max.dtype import DType
from max.experimental.tensor import Tensor

from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(24)  # yours once it passes its check, else the reference
MLAConfig, MultiHeadLatentAttention = code.MLAConfig, code.MultiHeadLatentAttention

TOKENS = 100
config = MLAConfig(
    hidden_size=64,
    num_attention_heads=8,
    q_lora_rank=24,
    kv_lora_rank=12,
    qk_nope_head_dim=8,
    qk_rope_head_dim=4,
    v_head_dim=8,
)
heads, width = config.num_attention_heads, config.qk_nope_head_dim + config.v_head_dim
latent_width = config.kv_lora_rank
rng = np.random.default_rng(0)


def array(t: Tensor) -> np.ndarray:
    return np.asarray(t.to_numpy())


# %% [markdown]
# The layer with random weights (standard deviation 1 / sqrt(inputs), norm
# scales of 1), on 100 random tokens: the latents, then what `expand` makes
# of them, every head's key without position and value side by side, one row
# per token.

# %%
layer = MultiHeadLatentAttention(config)
shapes = {name: tuple(int(d) for d in p.shape) for name, p in layer.parameters}
layer.load_state_dict(
    {
        name: np.ones(shape, np.float32)
        if len(shape) == 1
        else rng.normal(0, 1 / np.sqrt(shape[1]), shape).astype(np.float32)
        for name, shape in shapes.items()
    }
)
x = rng.normal(0, 1, (1, TOKENS, config.hidden_size)).astype(np.float32)
positions = Tensor.arange(0, TOKENS, dtype=DType.float32)
latent, _ = layer.compress(Tensor(x), positions)
k_nope, value = layer.expand(latent)
# [1, heads, tokens, features] -> one row per token: every head's key, then every head's value.
mla = np.concatenate([array(k_nope)[0], array(value)[0]], axis=-1)
mla = mla.transpose(1, 0, 2).reshape(TOKENS, heads * width)

# Multi-head attention of the same width: keys and values straight from x.
w_kv = rng.normal(0, 1 / np.sqrt(config.hidden_size), (heads * width, config.hidden_size))
mha = x[0] @ w_kv.T


def rank(matrix: np.ndarray) -> tuple[int, np.ndarray]:
    """The number of singular values above float32 rounding, and all of them."""
    values = np.linalg.svd(matrix.astype(np.float64), compute_uv=False)
    return int(np.sum(values > values[0] * 1e-5)), values


print(f"{TOKENS} tokens, {heads} heads, {width} key + value features per head")
for name, matrix in (("MLA, expanded from the latent", mla), ("MHA, from the hidden state", mha)):
    found, values = rank(matrix)
    print(
        f"{name:30s}: {list(matrix.shape)}, rank {found}; singular values {found - 1}, {found}:"
        f" {values[found - 2]:.2f}, {values[found - 1]:.2f}, then {values[found]:.0e}"
    )
print(
    f"the bounds: kv_lora_rank = {latent_width}, hidden_size = {config.hidden_size},"
    f" tokens = {TOKENS}, columns = {heads * width}"
)

# %% [markdown]
# A rank-r approximation of a matrix (its r largest singular values and
# their directions) keeps the sum of those r values squared, out of the sum
# of all of them squared. For MLA's matrix the first 12 keep everything. For
# the random MHA matrix, nothing is special about any 12: a trained MHA's
# keys and values lie somewhere in between, which is what lets an MHA
# checkpoint be squeezed into MLA's shape, at some loss.

# %%
print("rank r | kept of MLA's matrix | kept of MHA's matrix")
kept = {}
for name, matrix in (("MLA", mla), ("MHA", mha)):
    values = rank(matrix)[1]
    kept[name] = np.cumsum(values**2) / np.sum(values**2)
for r in (1, 4, 8, 12, 16, 32, 64):
    print(f"{r:6d} | {kept['MLA'][r - 1]:20.1%} | {kept['MHA'][r - 1]:20.1%}")

plt = pyplot()
if plt:
    figure, axes = plt.subplots(figsize=(7, 4), layout="constrained")
    for name, fractions in kept.items():
        axes.plot(np.arange(1, len(fractions) + 1), fractions, marker="o", markersize=3, label=name)
    axes.axvline(latent_width, color="grey", lw=0.8, ls="--")
    axes.text(latent_width, 0.05, " kv_lora_rank", color="grey")
    axes.set(
        xlabel="rank r of the approximation",
        ylabel="share of the squared values kept",
        title=f"Keys and values of {TOKENS} tokens, {heads} heads",
    )
    axes.legend()
    axes.grid(alpha=0.3)
    show(figure, "step_24_latent_rank")
