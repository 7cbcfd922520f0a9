# %% [markdown]
# # Step 22, try it: the rolling buffer, slot by slot
#
# First a buffer of 3 slots holds token numbers instead of keys, so that each
# write and each read can be printed: positions 0 to 6 go to slot p % 3, and
# the read puts them back in order. Then 20 tokens of random queries, keys and
# values are decoded one at a time through the buffer, and compared with
# sliding-window attention over all 20 at once, with attention in NumPy, and
# with full causal attention. Last, the same decode reading the full buffer in
# slot order, without putting it back in order first.

# %%
import math

import numpy as np
from max.experimental import functional as F
from max.experimental.tensor import Tensor

from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(22)  # yours once it passes its check, else the reference
ring_decode, ring_read, ring_write, sliding_window_attention = (
    code.ring_decode,
    code.ring_read,
    code.ring_write,
    code.sliding_window_attention,
)

WINDOW = 3


# %%
def numbers(t: Tensor) -> list[int]:
    """A [1, 1, n, 1] tensor of token numbers, as a list (-1: an empty slot)."""
    return [int(n) for n in np.asarray(t.to_numpy()).reshape(-1)]


buffer = Tensor(np.full((1, 1, WINDOW, 1), -1.0, np.float32))  # -1: nothing written yet
history = []
print(f"window {WINDOW}: position p goes to slot p % {WINDOW}")
print("position | slot | slots 0, 1, 2 after the write | read, oldest first")
for p in range(7):
    token = Tensor(np.full((1, 1, 1, 1), float(p), np.float32))
    buffer = ring_write(buffer, token, p)
    history.append(numbers(buffer))
    print(
        f"{p:8d} | {p % WINDOW:4d} | {str(numbers(buffer)):29s} | {numbers(ring_read(buffer, p + 1))}"
    )

# %% [markdown]
# Each row of the figure is the buffer after the write of one position: the
# slot just written is outlined, and the number in each slot is the token it
# holds.

# %%
plt = pyplot()
if plt:
    grid = np.array(history)
    figure, axes = plt.subplots(figsize=(3.6, 4.6), layout="constrained")
    axes.imshow(np.where(grid < 0, np.nan, grid), cmap="Blues", vmin=-4, vmax=10)
    for p, row in enumerate(grid):
        for slot, token in enumerate(row):
            axes.text(slot, p, "" if token < 0 else str(token), ha="center", va="center")
        axes.add_patch(
            plt.Rectangle((p % WINDOW - 0.5, p - 0.5), 1, 1, fill=False, lw=2.5, ec="C3")
        )
    axes.set_xticks(range(WINDOW), [f"slot {s}" for s in range(WINDOW)])
    axes.set_yticks(range(len(grid)), [f"position {p}" for p in range(len(grid))])
    axes.set_title(f"a buffer of {WINDOW} slots")
    show(figure, "step_22_buffer_slots")

# %% [markdown]
# Now 20 tokens of real-looking attention inputs: a batch of 1, 2 heads,
# head_dim 8, window 5. The keys stand for keys already turned by their
# positions (step 19). Each token is decoded on its own through the buffer;
# the whole sequence is also run at once through `sliding_window_attention`
# with an empty cache, through NumPy with a window, and without one.


# %%
def numpy_attention(q, k, v, window=None) -> np.ndarray:
    """Causal attention in NumPy, each token seeing itself and, with a window,
    the window - 1 tokens before it."""
    rows, cols = np.arange(q.shape[2])[:, None], np.arange(k.shape[2])[None, :]
    visible = cols <= rows if window is None else (cols <= rows) & (cols > rows - window)
    scores = np.where(visible, q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1]), -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True) @ v


window, length, heads, head_dim = 5, 20, 2, 8
rng = np.random.default_rng(22)
q, k, v = (rng.normal(0, 1, (1, heads, length, head_dim)).astype(np.float32) for _ in range(3))

buffer_k = Tensor(np.zeros((1, heads, window, head_dim), np.float32))
buffer_v = Tensor(np.zeros((1, heads, window, head_dim), np.float32))
decoded = []
for p in range(length):
    one = [Tensor(np.ascontiguousarray(t[:, :, p : p + 1])) for t in (q, k, v)]
    out, buffer_k, buffer_v = ring_decode(*one, buffer_k, buffer_v, p)
    decoded.append(np.asarray(out.to_numpy()))
decoded = np.concatenate(decoded, axis=2)  # [1, heads, 20, head_dim]

empty = Tensor(np.zeros((1, heads, 0, head_dim), np.float32))
at_once, kept_k, _ = sliding_window_attention(Tensor(q), Tensor(k), Tensor(v), empty, empty, window)
at_once = np.asarray(at_once.to_numpy())
windowed = numpy_attention(q, k, v, window)
full = numpy_attention(q, k, v)

print(f"the buffers after {length} tokens: {[int(d) for d in buffer_k.shape]}")
print(f"sliding_window_attention's key cache after them: {[int(d) for d in kept_k.shape]}")
print(f"decoded vs all at once:       largest difference {np.abs(decoded - at_once).max():.1e}")
print(
    f"decoded vs NumPy, window {window}:  largest difference {np.abs(decoded - windowed).max():.1e}"
)
gap = np.abs(decoded - full).max(axis=(0, 1, 3))
print("decoded vs full causal attention, per position:")
print("  " + " ".join(f"{d:.2f}" for d in gap))
print(f"  the first position that differs: {int(np.argmax(gap > 1e-5))}")

# %% [markdown]
# Attention weighs each key's value by that key's score, and a key carries its
# position in its rotation, not in its place in the buffer. So once the buffer
# is full, scoring the slots in slot order, without putting them back in
# order, gives the same output up to rounding. Before the buffer is full it
# does not: the slots not yet written hold zeros, which would be scored too.


# %%
def attend(query: Tensor, keys: Tensor, values: Tensor) -> np.ndarray:
    scores = query @ keys.transpose(-1, -2) / math.sqrt(head_dim)
    return np.asarray((F.softmax(scores, axis=-1) @ values).to_numpy())


buffer_k = Tensor(np.zeros((1, heads, window, head_dim), np.float32))
buffer_v = Tensor(np.zeros((1, heads, window, head_dim), np.float32))
print("position | in order vs slot order, largest difference")
for p in range(length):
    query, key, value = (Tensor(np.ascontiguousarray(t[:, :, p : p + 1])) for t in (q, k, v))
    buffer_k, buffer_v = ring_write(buffer_k, key, p), ring_write(buffer_v, value, p)
    in_order = attend(query, ring_read(buffer_k, p + 1), ring_read(buffer_v, p + 1))
    slot_order = attend(query, buffer_k, buffer_v)
    if p < 7 or p == length - 1:
        note = "  (buffer not full yet)" if p < window - 1 else ""
        print(f"{p:8d} | {np.abs(in_order - slot_order).max():.1e}{note}")
