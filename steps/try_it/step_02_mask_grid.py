# %% [markdown]
# # Step 02, try it: what the mask looks like, and what it does to a softmax
#
# Prints `causal_mask(4, 2)` (4 new tokens after 2 cached ones) as a grid, then
# adds it to a row of equal scores and applies the softmax: the -inf entries
# become weights of exactly 0, the others share the weight equally.

# %%
import numpy as np
from max.driver import CPU
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor

from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(2)  # yours once it passes its check, else the reference
causal_mask = code.causal_mask

# %%
num_tokens, sequence_length = 2, 4
mask = causal_mask(sequence_length, num_tokens, dtype=DType.float32, device=CPU())
grid = np.asarray(mask.to_numpy())
# Column j is a cached token (c) or a new one (n); row i is the new token at position num_tokens + i.
columns = [f"c{j}" if j < num_tokens else f"n{j - num_tokens}" for j in range(grid.shape[1])]
rows = [f"row {i} @{num_tokens + i}" for i in range(grid.shape[0])]

print(f"causal_mask({sequence_length}, {num_tokens}): shape {list(grid.shape)}")
print("(c = cached token, n = new token; @ = the row's absolute position)")
print("         " + " ".join(f"{c:>4}" for c in columns))
for row, values in zip(rows, grid, strict=True):
    print(f"{row} " + " ".join(f"{'-inf' if np.isinf(v) else '0':>4}" for v in values))

# %%
scores = Tensor.zeros(list(grid.shape), dtype=DType.float32)  # equal scores
weights = np.asarray(F.softmax(scores + mask, axis=-1).to_numpy())
print("\nsoftmax(0 + mask) per row: the weights each new token gives every column")
for i, row in enumerate(weights):
    print(f"row {i}  " + " ".join(f"{w:5.3f}" for w in row) + f"   sum {row.sum():.3f}")

# %% [markdown]
# The same two grids as pictures: dark cells are masked (-inf), and after the
# softmax they hold exactly 0.

# %%
plt = pyplot()
if plt:
    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3), sharey=True, layout="constrained")
    left.imshow(np.isinf(grid), cmap="Greys", vmin=0, vmax=1.5)
    left.set_title(f"causal_mask({sequence_length}, {num_tokens})")
    right.imshow(weights, cmap="Blues", vmin=0, vmax=1)
    right.set_title("softmax(0 + mask)")
    for i, j in np.ndindex(grid.shape):
        left.text(j, i, f"{grid[i, j]:g}", ha="center", va="center")
        right.text(j, i, f"{weights[i, j]:.2f}", ha="center", va="center")
    for axes in (left, right):
        axes.set_xticks(range(len(columns)), columns)
        axes.set_yticks(range(len(rows)), rows)
    show(figure, "step_02_mask")

# %%
half = causal_mask(3, 0, dtype=DType.float16, device=CPU())
print(
    f"\ncausal_mask(3, 0, dtype=float16) has dtype {half.dtype} and shape {[int(d) for d in half.shape]}"
)
