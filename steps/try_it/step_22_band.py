# %% [markdown]
# # Step 22, try it: the band, and how far back a stack of windows reads
#
# First `sliding_window_mask` for 7 tokens and window 3, printed as a grid,
# then the masks for a few windows and cache offsets drawn side by side. Then
# what `F.band_part` says when it is asked for a band wider than the matrix.
# Last, the tokens that can reach the last token of a text through a stack of
# windowed layers: one window per layer.

# %%
import numpy as np
from max.driver import CPU
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor

from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(22)  # yours once it passes its check, else the reference
sliding_window_mask = code.sliding_window_mask


# %%
def mask(sequence_length: int, num_tokens: int, window: int) -> np.ndarray:
    made = sliding_window_mask(
        sequence_length, num_tokens, window, dtype=DType.float32, device=CPU()
    )
    return np.asarray(made.to_numpy())


def print_grid(grid: np.ndarray, num_tokens: int) -> None:
    """Rows are the new tokens (with their positions), columns every token."""
    print("            " + " ".join(f"{j:>4}" for j in range(grid.shape[1])))
    for i, row in enumerate(grid):
        cells = " ".join(f"{'-inf' if np.isinf(v) else '0':>4}" for v in row)
        print(f"row {i} (@{num_tokens + i:2d}) {cells}")


# %%
print("sliding_window_mask(7, 0, window=3): columns are positions 0..6")
print_grid(mask(7, 0, 3), 0)
print("\nsliding_window_mask(4, 2, window=3): columns 0 and 1 are the cached tokens")
print_grid(mask(4, 2, 3), 2)

# %% [markdown]
# The masks as pictures, dark where a token may not look. The top row keeps
# 8 new tokens and no cache and changes the window; the bottom row keeps
# window 4 and 5 new tokens and moves the cache from 0 to 3 tokens. The
# outlined cell of each row is the token's own column.

# %%
cases = [(8, 0, w) for w in (1, 2, 4, 8)] + [(5, n, 4) for n in range(4)]
plt = pyplot()
if plt:
    figure, axes = plt.subplots(2, 4, figsize=(12, 6), layout="constrained")
    for panel, (sequence_length, num_tokens, window) in zip(axes.flat, cases, strict=True):
        grid = mask(sequence_length, num_tokens, window)
        panel.imshow(np.isinf(grid), cmap="Greys", vmin=0, vmax=1.5)
        for i in range(sequence_length):
            panel.add_patch(
                plt.Rectangle((num_tokens + i - 0.5, i - 0.5), 1, 1, fill=False, lw=2, ec="C3")
            )
        panel.set_title(f"seq {sequence_length}, cache {num_tokens}, window {window}")
        panel.set_xticks(range(grid.shape[1]))
        panel.set_yticks(range(sequence_length))
    figure.supxlabel("column: cached tokens, then new ones")
    figure.supylabel("row: a new token")
    show(figure, "step_22_bands")

print("visible columns per row (the sum of each row's zeros):")
for sequence_length, num_tokens, window in cases:
    seen = (~np.isinf(mask(sequence_length, num_tokens, window))).sum(axis=1)
    print(f"  seq {sequence_length}, cache {num_tokens}, window {window}: {seen.tolist()}")

# %% [markdown]
# `F.band_part` takes no band wider than the matrix has rows: a lower width of
# 3 on a matrix of 3 rows is refused, although 2 already reaches column 0 from
# every row. This is why the solution clamps the lower width: a single token
# decoded with window 4096 would otherwise ask for a width of 4095 on one row.

# %%
ones = Tensor.full([3, 5], 1.0, dtype=DType.float32, device=CPU())
for lower in (2, 3):
    try:
        kept = F.band_part(ones, num_lower=lower, num_upper=2)
        kept_per_row = np.asarray(kept.to_numpy()).sum(axis=1).astype(int).tolist()
        print(f"num_lower={lower}: fine, the rows keep {kept_per_row} entries")
    except ValueError as error:
        print(f"num_lower={lower}: ValueError: {error}")
print(f"sliding_window_mask(1, 0, window=4096): {mask(1, 0, 4096).tolist()}")

# %% [markdown]
# How far back can a stack of windowed layers read? Layer 1 at position i
# mixes positions i - (window - 1) to i; layer 2 mixes those mixes, so it
# reaches twice as far, and so on. Below, the positions of a 24-token text
# whose information can reach the last token through 1 to 5 layers of window
# 4: the visibility matrices multiplied together.

# %%
length, window = 24, 4
visible = ~np.isinf(mask(length, 0, window))  # [40, 40]: row sees column
reach = np.eye(length, dtype=bool)
reached = []
for layer in range(1, 6):
    reach = (visible.astype(int) @ reach.astype(int)) > 0
    first = int(np.argmax(reach[-1]))
    reached.append(reach[-1].copy())
    print(
        f"through {layer} layer(s), tokens {first}..{length - 1} reach token {length - 1}: "
        f"{length - 1 - first} back = {layer} x (window - 1)"
    )

# %%
if plt:
    figure, axes = plt.subplots(figsize=(9, 2.6), layout="constrained")
    axes.imshow(np.array(reached), cmap="Blues", vmin=0, vmax=1.3, aspect="auto")
    axes.set_yticks(range(5), [f"{n} layer{'s' if n > 1 else ''}" for n in range(1, 6)])
    axes.set(
        xlabel="position",
        title=f"what reaches token {length - 1}, window {window}: window - 1 more per layer",
    )
    show(figure, "step_22_receptive_field")
