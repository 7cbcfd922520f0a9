# %% [markdown]
# # Step 25, try it: the same numbers, regrouped
#
# First the two identities the absorbed decode rests on, in NumPy with
# float64 and made-up numbers: `q . (W c) = (W^T q) . c` for the scores, and
# `sum_j p_j (W c_j) = W (sum_j p_j c_j)` for the values. Then the step's
# functions on a small layer: the halves of kv_b_proj, the shapes on the way,
# and the absorbed decode against step 24's forward after a few cached
# tokens. Last, what dividing by the latent's width instead would do to the
# attention weights.

# %%
import math

import numpy as np
from max.dtype import DType
from max.experimental.tensor import Tensor

from solutions.solution_24 import MLAConfig, MultiHeadLatentAttention
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(25)  # yours once it passes its check, else the reference
absorbed_decode, absorbed_weights = code.absorbed_decode, code.absorbed_weights

rng = np.random.default_rng(0)
NOPE, V, RANK, TOKENS = 4, 3, 8, 6

# %%
w_uk = rng.normal(size=(NOPE, RANK))  # one head's key half
w_uv = rng.normal(size=(V, RANK))  # its value half
latents = rng.normal(size=(TOKENS, RANK))
q = rng.normal(size=NOPE)
p = rng.dirichlet(np.ones(TOKENS))  # attention weights: positive, summing to 1

expanded_scores = (latents @ w_uk.T) @ q  # every key made, then one dot product each
absorbed_scores = latents @ (w_uk.T @ q)  # the query made once, then the latents
print(f"q . (W_UK c_j), j = 0..5: {np.round(expanded_scores, 4)}")
print(f"(W_UK^T q) . c_j:         {np.round(absorbed_scores, 4)}")
print(f"largest difference: {np.abs(expanded_scores - absorbed_scores).max():.0e}")

expanded_out = p @ (latents @ w_uv.T)  # every value made, then their weighted sum
absorbed_out = w_uv @ (p @ latents)  # the weighted sum of latents, then one product
print(f"sum_j p_j (W_UV c_j): {np.round(expanded_out, 4)}")
print(f"W_UV (sum_j p_j c_j): {np.round(absorbed_out, 4)}")
print(f"largest difference: {np.abs(expanded_out - absorbed_out).max():.0e}")

# %% [markdown]
# The step's layer with the checker's sizes (4 heads, a latent of 24, parts
# of 8 and 6 features, values of 12) and random weights: a prompt of 9 tokens
# through step 24's forward fills the caches, then one more token is decoded
# both ways.

# %%
config = MLAConfig(
    hidden_size=32,
    num_attention_heads=4,
    q_lora_rank=20,
    kv_lora_rank=24,
    qk_nope_head_dim=8,
    qk_rope_head_dim=6,
    v_head_dim=12,
)
layer = MultiHeadLatentAttention(config)
shapes = {name: tuple(int(d) for d in t.shape) for name, t in layer.parameters}
layer.load_state_dict(
    {
        name: np.ones(shape, np.float32)
        if len(shape) == 1
        else rng.normal(0, 1 / np.sqrt(shape[1]), shape).astype(np.float32)
        for name, shape in shapes.items()
    }
)


def array(t: Tensor) -> np.ndarray:
    return np.asarray(t.to_numpy())


def shape(t: Tensor) -> list[int]:
    return [int(d) for d in t.shape]


key_half, value_half = absorbed_weights(layer)
print(f"kv_b_proj.weight {shapes['kv_b_proj.weight']}")
print(f"key_half {shape(key_half)}, value_half {shape(value_half)}")
rows = array(layer.kv_b_proj.weight)
print(
    "head 1's key half is rows 20-27 of kv_b_proj.weight:",
    np.array_equal(array(key_half)[1], rows[20:28]),
)

prompt = Tensor(rng.normal(0, 1, (1, 9, config.hidden_size)).astype(np.float32))
_, latent, rope_key = layer(
    prompt,
    Tensor(np.zeros((1, 0, config.kv_lora_rank), np.float32)),
    Tensor(np.zeros((1, 0, config.qk_rope_head_dim), np.float32)),
)
token = Tensor(rng.normal(0, 1, (1, 1, config.hidden_size)).astype(np.float32))
expanded, expanded_latent, _ = layer(token, latent, rope_key)
absorbed, absorbed_latent, _ = absorbed_decode(layer, token, latent, rope_key)
print(f"caches after the prompt: latent {shape(latent)}, rotary keys {shape(rope_key)}")
print(f"outputs: step 24 {shape(expanded)}, absorbed {shape(absorbed)}")
print(f"largest difference of the outputs: {np.abs(array(expanded) - array(absorbed)).max():.1e}")
print(f"largest output: {np.abs(array(expanded)).max():.2f}")
print(
    f"the caches returned are equal: {np.array_equal(array(expanded_latent), array(absorbed_latent))}"
)

# %% [markdown]
# The shapes on the way, computed the step's way, and the attention weights
# of head 0 with the right scale, `1 / sqrt(qk_head_dim)`, and with
# `1 / sqrt(kv_lora_rank)`, the width the query has in latent space.

# %%
positions = Tensor.arange(9, 10, dtype=DType.float32)
q_nope, q_rope = layer.query(token, positions)
new_latent, new_rope_key = layer.compress(token, positions)
latents = np.concatenate([array(latent), array(new_latent)], axis=1)[:, None]  # a head axis of 1
rope_keys = np.concatenate([array(rope_key), array(new_rope_key)], axis=1)[:, None]
q_latent = array(q_nope) @ array(key_half)
scores = q_latent @ latents.transpose(0, 1, 3, 2) + array(q_rope) @ rope_keys.transpose(0, 1, 3, 2)
print(f"q_nope {shape(q_nope)} @ key_half {shape(key_half)} -> q_latent {list(q_latent.shape)}")
print(f"latents {list(latents.shape)}, rotary keys {list(rope_keys.shape)}")
print(f"scores {list(scores.shape)}")


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


for name, width in (("qk_head_dim", config.qk_head_dim), ("kv_lora_rank", config.kv_lora_rank)):
    weights = softmax(scores / math.sqrt(width))[0, 0, 0]
    print(f"head 0, divided by sqrt({name} = {width:2d}): {np.round(weights, 2)}")
