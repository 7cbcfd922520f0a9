# %% [markdown]
# # Step 18: the page's ragged batch, run through `ragged_positions` and `last_token_rows`
#
# Which request each token belongs to, its position, and the rows that become
# logits.

# %%
import numpy as np
from max.experimental.tensor import Tensor

from steps.try_it.learner import learner_or_reference

code = learner_or_reference(18)  # yours once it passes its check, else the reference
last_token_rows, ragged_positions = code.last_token_rows, code.ragged_positions

OFFSETS = [0, 3, 4, 8]  # requests of 3, 1 and 4 new tokens
CACHED = [0, 7, 2]  # ... after 0, 7 and 2 cached tokens

# %%
offsets = Tensor(np.asarray(OFFSETS, np.int64))
cached = Tensor(np.asarray(CACHED, np.int64))
total = OFFSETS[-1]
positions = np.asarray(ragged_positions(offsets, cached, total).to_numpy())
request = np.searchsorted(OFFSETS, np.arange(total), side="right") - 1

print(f"input_row_offsets {OFFSETS}, cache_lengths {CACHED}")
print("  row | request | index in request | position")
for row in range(total):
    within = row - OFFSETS[request[row]]
    print(f"  {row:3d} | {request[row]:7d} | {within:16d} | {int(positions[row]):8d}")

# %%
hidden = Tensor(np.arange(total, dtype=np.float32)[:, None] * np.ones((1, 2), np.float32))
rows = np.asarray(last_token_rows(hidden, offsets).to_numpy())[:, 0]
print(f"last_token_rows keeps rows {[int(r) for r in rows]}: one per request")
