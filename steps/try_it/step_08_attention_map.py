# %% [markdown]
# # Step 08, try it: one head's attention map, with and without the scale
#
# Random weights, no checkpoint: every word of a short sentence gets a random
# vector, and random matrices turn it into a query and a key of head_dim = 64,
# as in GPT-2 124M. Row i of the map is what query i gives each key j.
#
# `scaled_dot_product_attention` returns weights @ value; with the identity as
# the values (value row j = one-hot j), that product is the weights themselves.
# Multiplying the queries by sqrt(head_dim) cancels the scale, which shows what
# the map would look like without it.

# %%
import math

import numpy as np
from max.experimental.tensor import Tensor

from steps.try_it.figures import attention_maps, pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(8)  # yours once it passes its check, else the reference
scaled_dot_product_attention = code.scaled_dot_product_attention

HEAD_DIM = 64
SENTENCE = "the cat sat on the mat".split()


# %%
def attention_map(query: np.ndarray, key: np.ndarray) -> np.ndarray:
    seq = query.shape[-2]
    identity = np.eye(seq, dtype=np.float32)[None, None]  # [1, 1, seq, seq] values
    out = scaled_dot_product_attention(Tensor(query), Tensor(key), Tensor(identity))
    return np.asarray(out.to_numpy())[0, 0]


def table(title: str, weights: np.ndarray) -> None:
    print(title)
    print("        " + "".join(f"{word:>6}" for word in SENTENCE) + "     sum    max")
    for word, row in zip(SENTENCE, weights, strict=True):
        cells = "".join("     ·" if w == 0 else f"{w:6.2f}" for w in row)
        print(f"{word:>6}  {cells}   {row.sum():5.2f}  {row.max():5.2f}")


# %%
rng = np.random.default_rng(1)
vocabulary = sorted(set(SENTENCE))
vectors = rng.normal(0, 1, (len(vocabulary), HEAD_DIM))
tokens = np.stack([vectors[vocabulary.index(word)] for word in SENTENCE])
w_query, w_key = rng.normal(0, 1 / math.sqrt(HEAD_DIM), (2, HEAD_DIM, HEAD_DIM))
query = (tokens @ w_query).astype(np.float32)[None, None]  # [1, 1, seq, head_dim]
key = (tokens @ w_key).astype(np.float32)[None, None]

scaled = attention_map(query, key)
unscaled = attention_map(query * np.float32(math.sqrt(HEAD_DIM)), key)
table(f"scores / sqrt({HEAD_DIM}), as GPT-2 does (· = masked, exactly 0):", scaled)
print()
table("without the scale:", unscaled)

# %%
raw = (query @ key.swapaxes(-1, -2))[0, 0][np.tril_indices(len(SENTENCE))]
print(
    f"\nstd of the visible scores: {raw.std():.1f} unscaled, {raw.std() / math.sqrt(HEAD_DIM):.1f} scaled"
)
for name, weights in (("scaled", scaled), ("unscaled", unscaled)):
    print(f"mean of each row's largest weight, {name}: {weights.max(axis=-1).mean():.2f}")

# %% [markdown]
# The two maps side by side: without the scale most rows put all their weight
# on one key.

# %%
if pyplot():
    titles = [f"scores / sqrt({HEAD_DIM})", "without the scale"]
    show(attention_maps([scaled, unscaled], titles, SENTENCE), "step_08_attention")
