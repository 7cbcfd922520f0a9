# %% [markdown]
# # Step 07, try it: the shapes through c_attn and the split, at GPT-2 124M's width
#
# Runs `GPT2QKVProjection` with random weights on a batch of 2 sequences of 5
# tokens and prints every shape on the way. Then checks that the query is what
# the first third of c_attn's rows computes (one wide Linear is three stacked
# Linears), and shows `F.split` at work on a toy tensor, default axis included.

# %%
import numpy as np
from max.experimental import functional as F
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(7)  # yours once it passes its check, else the reference
GPT2QKVProjection = code.GPT2QKVProjection

# %%
config = GPT2Config()  # n_embd = 768
e = config.n_embd
rng = np.random.default_rng(0)
weight = rng.normal(0, 0.02, (3 * e, e)).astype(np.float32)
bias = rng.normal(0, 0.02, (3 * e,)).astype(np.float32)
projection = GPT2QKVProjection(config)
projection.load_state_dict({"c_attn.weight": weight, "c_attn.bias": bias})

hidden = rng.normal(0, 1, (2, 5, e)).astype(np.float32)
wide = projection.c_attn(Tensor(hidden))
query, key, value = projection(Tensor(hidden))
print(f"hidden_states        {list(hidden.shape)}")
print(f"c_attn.weight        {[int(d) for d in projection.c_attn.weight.shape]}")
print(f"c_attn(hidden)       {[int(d) for d in wide.shape]}")
for name, piece in (("query", query), ("key", key), ("value", value)):
    print(f"{name:<20} {[int(d) for d in piece.shape]}")

# %%
print("\nwhich rows of c_attn.weight make which piece:")
for i, (name, piece) in enumerate((("query", query), ("key", key), ("value", value))):
    rows = slice(i * e, (i + 1) * e)
    by_hand = hidden @ weight[rows].T + bias[rows]
    same = np.allclose(np.asarray(piece.to_numpy()), by_hand, atol=1e-4)
    print(
        f"  {name:<5} = hidden @ weight[{rows.start}:{rows.stop}].T + bias[{rows.start}:{rows.stop}]: {same}"
    )

# %%
toy = Tensor(np.arange(12, dtype=np.float32).reshape(1, 2, 6))
print("\ntoy [1, 2, 6] =", np.asarray(toy.to_numpy()).tolist())
for piece in F.split(toy, [2, 2, 2], axis=-1):
    print("  piece along the last axis:", np.asarray(piece.to_numpy()).tolist())
try:
    F.split(toy, [2, 2, 2])
except ValueError as error:
    print("  without axis=:", str(error).splitlines()[0])
