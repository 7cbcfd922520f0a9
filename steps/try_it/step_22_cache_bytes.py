# %% [markdown]
# # Step 22, try it: a cache that stops growing
#
# A layer with full attention keeps every token's key and value; a windowed
# layer keeps the last `window` of them. First the bytes of both for a model
# shaped like Mistral 7B (32 layers, 8 key/value heads, head_dim 128,
# bfloat16, window 4096) as the text grows, as a table and as a figure, with a
# third model in between that has one full layer for every five windowed
# ones. Then the caches that `sliding_window_attention` and the rolling
# buffer really return, decoding token by token with small sizes.

# %%
import numpy as np
from max.experimental.tensor import Tensor

from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(22)  # yours once it passes its check, else the reference
ring_decode, sliding_window_attention = code.ring_decode, code.sliding_window_attention

LAYERS, KV_HEADS, HEAD_DIM, BYTES = 32, 8, 128, 2  # Mistral 7B's shape, bfloat16
WINDOW = 4096
PER_TOKEN = 2 * KV_HEADS * HEAD_DIM * BYTES  # one layer's key and value for one token


def full_layer(tokens: np.ndarray) -> np.ndarray:
    return tokens * PER_TOKEN


def windowed_layer(tokens: np.ndarray, window: int = WINDOW) -> np.ndarray:
    return np.minimum(tokens, window) * PER_TOKEN


def mixed_model(tokens: np.ndarray) -> np.ndarray:
    """One full layer for every five windowed ones: a sixth of the 32 layers full."""
    return (LAYERS / 6) * full_layer(tokens) + (5 * LAYERS / 6) * windowed_layer(tokens)


# %%
print(f"one layer keeps {PER_TOKEN:,} bytes per token ({PER_TOKEN // 1024} KiB) in bfloat16")
print("tokens  | full layer | windowed layer | 32 full layers | 32 windowed | 1 full : 5 windowed")
for n in (1024, 4096, 8192, 32768, 131072):
    tokens = np.array(n)
    print(
        f"{n:7,d} | {full_layer(tokens) / 2**20:6.0f} MiB | {windowed_layer(tokens) / 2**20:10.0f} MiB"
        f" | {LAYERS * full_layer(tokens) / 2**30:10.2f} GiB"
        f" | {LAYERS * windowed_layer(tokens) / 2**30:7.2f} GiB"
        f" | {mixed_model(tokens) / 2**30:15.2f} GiB"
    )
ratio = full_layer(np.array(32768)) / windowed_layer(np.array(32768))
print(f"at 32,768 tokens the windowed cache is {ratio:.0f} times smaller")

# %% [markdown]
# The same as curves, for the whole model: the full cache grows by 128 KiB
# with every token, the windowed one stops at 4096 tokens, and the mixed model
# grows at a sixth of the full model's rate once its windows are full.

# %%
tokens = np.arange(0, 65537, 256)
plt = pyplot()
if plt:
    figure, axes = plt.subplots(figsize=(7, 4), layout="constrained")
    axes.plot(tokens, LAYERS * full_layer(tokens) / 2**30, label="32 full layers")
    axes.plot(tokens, mixed_model(tokens) / 2**30, label="1 full layer : 5 windowed")
    axes.plot(tokens, LAYERS * windowed_layer(tokens) / 2**30, label="32 windowed layers")
    axes.axvline(WINDOW, color="grey", lw=0.8, ls="--")
    axes.text(WINDOW, 7.2, " window", color="grey")
    axes.set(
        xlabel="tokens in the text",
        ylabel="KV cache (GiB)",
        title="Mistral 7B's shape, bfloat16, window 4096",
    )
    axes.legend()
    axes.grid(alpha=0.3)
    show(figure, "step_22_cache_bytes")

# %% [markdown]
# Now the real caches, with small sizes: one layer, 2 heads, head_dim 16,
# float32, window 8, decoding 24 tokens one at a time. A window larger than
# the text is full attention, so `sliding_window_attention` with window 10,000
# keeps everything; with window 8 it keeps the last 7 tokens; the rolling
# buffer keeps 8 slots from the start.

# %%
heads, head_dim, window, length = 2, 16, 8, 24
rng = np.random.default_rng(0)
q, k, v = (rng.normal(0, 1, (1, heads, length, head_dim)).astype(np.float32) for _ in range(3))


def nbytes(*tensors: Tensor) -> int:
    return sum(np.asarray(t.to_numpy()).nbytes for t in tensors)


empty = Tensor(np.zeros((1, heads, 0, head_dim), np.float32))
full_k = full_v = trimmed_k = trimmed_v = empty
buffer_k = buffer_v = Tensor(np.zeros((1, heads, window, head_dim), np.float32))
print("tokens | full cache | trimmed cache | rolling buffer   (bytes of keys + values)")
for p in range(length):
    one = [Tensor(np.ascontiguousarray(t[:, :, p : p + 1])) for t in (q, k, v)]
    _, full_k, full_v = sliding_window_attention(*one, full_k, full_v, 10_000)
    _, trimmed_k, trimmed_v = sliding_window_attention(*one, trimmed_k, trimmed_v, window)
    _, buffer_k, buffer_v = ring_decode(*one, buffer_k, buffer_v, p)
    if p + 1 in (1, 2, 4, 7, 8, 9, 16, 24):
        print(
            f"{p + 1:6d} | {nbytes(full_k, full_v):10,d} | {nbytes(trimmed_k, trimmed_v):13,d}"
            f" | {nbytes(buffer_k, buffer_v):14,d}"
        )
per_token = 2 * heads * head_dim * 4
print(f"one token: {per_token} bytes; the trimmed cache stops at {window - 1} tokens, ", end="")
print(
    f"{(window - 1) * per_token:,} bytes; the buffer holds {window}, {window * per_token:,} bytes"
)
