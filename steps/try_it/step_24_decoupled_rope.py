# %% [markdown]
# # Step 24, try it: why the rotary part goes around the latent
#
# First one head in NumPy: a key expanded from a latent, `W_UK c`, and a
# query `q`. Without positions, `q . (W_UK c)` equals `(W_UK^T q) . c`: the
# query can be folded into latent space once and meet every cached latent
# as it is (step 25 is built on this). Turn the expanded keys by their
# positions and the fold is lost: each cached token would need a folded
# query of its own. Then DeepSeek's way out, a small rotary part beside the
# latent, and the same scores both ways again. Last, the step's layer: its
# latent carries no position, its rotary key does, and its scores depend on
# how far apart two tokens are, not on where they are.

# %%
import numpy as np
from max.dtype import DType
from max.experimental.tensor import Tensor

from steps.try_it.learner import learner_or_reference

code = learner_or_reference(24)  # yours once it passes its check, else the reference
MLAConfig, MultiHeadLatentAttention, deinterleave = (
    code.MLAConfig,
    code.MultiHeadLatentAttention,
    code.deinterleave,
)

RANK, NOPE, ROPE, TOKENS = 8, 4, 4, 6
rng = np.random.default_rng(0)


def turn(x: np.ndarray, position: int, theta: float = 10000.0) -> np.ndarray:
    """Step 19's rotation of x's last axis (half-split pairs) for one position."""
    half = x.shape[-1] // 2
    angles = position * theta ** (-2 * np.arange(half) / x.shape[-1])
    first, second = x[..., :half], x[..., half:]
    return np.concatenate(
        [first * np.cos(angles) - second * np.sin(angles),
         second * np.cos(angles) + first * np.sin(angles)],
        axis=-1,
    )  # fmt: skip


# %% [markdown]
# One head's block of `kv_b_proj`, `W_UK` [4, 8], six cached latents [6, 8],
# and the query of the last token, at position 5.

# %%
w_uk = rng.normal(size=(NOPE, RANK))
latents = rng.normal(size=(TOKENS, RANK))
query = rng.normal(size=NOPE)
last = TOKENS - 1

keys = latents @ w_uk.T  # every token's key, expanded: [6, 4]
folded = w_uk.T @ query  # the query in latent space, once: [8]
print("without positions:")
print(f"  q . (W_UK c) for each token: {np.round(keys @ query, 3)}")
print(f"  (W_UK^T q) . c:              {np.round(latents @ folded, 3)}")

# %% [markdown]
# Now the keys turn by their positions 0 to 5 and the query by 5, as RoPE on
# the whole key would have it. The true scores need each key expanded and
# turned. The fold that worked above no longer gives them, and the fold that
# would, `W_UK^T R(n - 5) q`, is a different vector for every position `n`.

# %%
turned = np.array([turn(keys[n], n) @ turn(query, last) for n in range(TOKENS)])
per_token = np.array([w_uk.T @ turn(query, last - n) for n in range(TOKENS)])
print("with RoPE on the expanded key:")
print(f"  the true scores:             {np.round(turned, 3)}")
print(f"  one fold for all tokens:     {np.round(latents @ folded, 3)}")
print(f"  one fold per cached token:   {np.round(np.sum(per_token * latents, axis=1), 3)}")
print("  the first 3 numbers of each token's folded query:")
for n in range(TOKENS):
    print(f"    token {n}: {np.round(per_token[n, :3], 3)}")

# %% [markdown]
# Decoupled RoPE: the query has a part without position and a rotary part;
# the key's part without position comes from the latent, and its rotary part
# is a small vector of its own per token, cached beside the latent. One fold
# serves every token again, and moving every position by 100 changes no
# score.

# %%
q_nope, q_rope = rng.normal(size=NOPE), rng.normal(size=ROPE)
rope_keys = rng.normal(size=(TOKENS, ROPE))  # one per token, cached before turning


def scores(start: int) -> tuple[np.ndarray, np.ndarray]:
    """Expanded and absorbed scores of the last token with positions start, start + 1, ..."""
    rotary = np.array(
        [turn(rope_keys[n], start + n) @ turn(q_rope, start + last) for n in range(TOKENS)]
    )
    expanded = latents @ w_uk.T @ q_nope + rotary
    absorbed = latents @ (w_uk.T @ q_nope) + rotary
    return expanded, absorbed


expanded, absorbed = scores(0)
print("decoupled RoPE:")
print(f"  expanded, positions 0-5:     {np.round(expanded, 3)}")
print(f"  absorbed, positions 0-5:     {np.round(absorbed, 3)}")
print(f"  absorbed, positions 100-105: {np.round(scores(100)[1], 3)}")

# %% [markdown]
# DeepSeek's checkpoints pair rotary features (0, 1), (2, 3), ...; step 19
# pairs feature i with feature i + d/2. `deinterleave` puts the features in
# the order step 19 expects:

# %%
numbered = Tensor(np.arange(8, dtype=np.float32).reshape(1, 8))
print(f"features 0-7 after deinterleave: {np.asarray(deinterleave(numbered).to_numpy())[0]}")

# %% [markdown]
# The step's layer, small (4 heads, a latent of 16, parts of 8, 8 and 8
# features) with random weights (standard deviation 1 / sqrt(inputs), norm
# scales of 1), on six tokens at positions
# 0 to 5 and then at positions 100 to 105: the same tokens, the same distances,
# different places.

# %%
config = MLAConfig(
    hidden_size=32,
    num_attention_heads=4,
    q_lora_rank=16,
    kv_lora_rank=16,
    qk_nope_head_dim=8,
    qk_rope_head_dim=8,
    v_head_dim=8,
)
layer = MultiHeadLatentAttention(config)
layer.load_state_dict(
    {
        name: np.ones(shape, np.float32)
        if len(shape) == 1
        else rng.normal(0, 1 / np.sqrt(shape[1]), shape).astype(np.float32)
        for name, shape in ((n, tuple(int(d) for d in p.shape)) for n, p in layer.parameters)
    }
)
x = Tensor(rng.normal(0, 1, (1, TOKENS, config.hidden_size)).astype(np.float32))


def array(t: Tensor) -> np.ndarray:
    return np.asarray(t.to_numpy())


def layer_scores(start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The layer's latent, rotary keys and scores [heads, tokens, tokens] at
    positions start, start + 1, ..."""
    positions = Tensor.arange(start, start + TOKENS, dtype=DType.float32)
    q_nope, q_rope = layer.query(x, positions)
    latent, rope_key = layer.compress(x, positions)
    k_nope, _ = layer.expand(latent)
    # Every head's scores: the part without position plus the shared rotary key's.
    score = array(q_nope)[0] @ array(k_nope)[0].transpose(0, 2, 1)
    score = score + array(q_rope)[0] @ array(rope_key)[0].T
    return array(latent)[0], array(rope_key)[0], score


latent_0, rope_0, scores_0 = layer_scores(0)
latent_100, rope_100, scores_100 = layer_scores(100)
print("positions 0-5 against 100-105:")
print(f"  largest difference of the latents:     {np.abs(latent_0 - latent_100).max():.1e}")
print(f"  largest difference of the rotary keys: {np.abs(rope_0 - rope_100).max():.2f}")
print(f"  largest difference of the scores:      {np.abs(scores_0 - scores_100).max():.1e}")
print(f"  largest score:                         {np.abs(scores_0).max():.2f}")
