# %% [markdown]
# # Step 19, try it: a score that sees only the distance
#
# One random query and one random key of head_dim 64, turned with theta 10000
# as in Llama 2. The query sits at position m, the key at position n, and the
# score is their dot product. First a few (m, n) pairs: the same distance at
# different places, then other distances. Then the score against the distance,
# and the cos table itself, as figures. Last, rope_attention run on nine tokens
# at once and on four and then five with a cache.

# %%
import numpy as np
from max.experimental.tensor import Tensor

from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(19)  # yours once it passes its check, else the reference
apply_rope, rope_attention, rope_tables = code.apply_rope, code.rope_attention, code.rope_tables

HEAD_DIM = 64
THETA = 10000.0


# %%
def turn(vectors: np.ndarray, positions: list[int]) -> np.ndarray:
    """Row i of vectors [n, head_dim] turned as if it sat at positions[i]."""
    cos, sin = rope_tables(Tensor(np.asarray(positions, np.float32)), HEAD_DIM, THETA)
    x = Tensor(vectors.astype(np.float32)[None, None])  # [1, 1, n, head_dim]: one head
    return np.asarray(apply_rope(x, cos, sin).to_numpy())[0, 0]


def scores(query: np.ndarray, key: np.ndarray, pairs: list[tuple[int, int]]) -> np.ndarray:
    """query turned to m dotted with key turned to n, for every (m, n)."""
    queries = turn(np.tile(query, (len(pairs), 1)), [m for m, _ in pairs])
    keys = turn(np.tile(key, (len(pairs), 1)), [n for _, n in pairs])
    return (queries * keys).sum(axis=-1)


# %%
rng = np.random.default_rng(0)
query, key = rng.normal(0, 1, (2, HEAD_DIM))
pairs = [(3, 0), (10, 7), (103, 100), (5003, 5000), (10, 0), (10, 9), (3, 3)]
print(f"without any turn, query . key = {query @ key:+.4f}")
print("  query at m | key at n | distance m - n | score")
for (m, n), score in zip(pairs, scores(query, key, pairs), strict=True):
    print(f"  {m:10d} | {n:8d} | {m - n:14d} | {score:+.4f}")

turned = turn(query[None], [5000])[0]
print(
    f"\nlength of the query: {np.linalg.norm(query):.4f}; "
    f"turned to position 5000: {np.linalg.norm(turned):.4f}"
)

# %% [markdown]
# The score against the distance, for the key above and for a key equal to the
# query. The same curves come out wherever the pair sits: once with the key at
# position 0, once with the key at position 1000.

# %%
distances = np.arange(0, 257)
curves = {}
for name, other in (("random key", key), ("key = query", query)):
    near = scores(query, other, [(d, 0) for d in distances])
    far = scores(query, other, [(1000 + d, 1000) for d in distances])
    print(f"{name}: largest difference, key at 0 or at 1000: {np.abs(near - far).max():.1e}")
    curves[name] = near

print("\ndistance | random key | key = query")
for d in (0, 1, 2, 4, 8, 16, 32, 64, 128, 256):
    print(f"{d:8d} | {curves['random key'][d]:+10.3f} | {curves['key = query'][d]:+11.3f}")

plt = pyplot()
if plt:
    figure, axes = plt.subplots(figsize=(8, 3.5), layout="constrained")
    for name, curve in curves.items():
        axes.plot(distances, curve, label=name)
    axes.axhline(0, color="gray", linewidth=0.8)
    axes.set(xlabel="distance m - n", ylabel="score q . k", title="the score against distance")
    axes.legend()
    axes.grid(alpha=0.3)
    show(figure, "step_19_score_by_distance")

# %% [markdown]
# The cos table for positions 0 to 127: one row per position, one column per
# feature. Column i and column i + 32 are the two halves of pair i and hold the
# same angle. Each pair needs 2 pi / speed positions for one full turn.

# %%
positions = np.arange(128, dtype=np.float32)
cos, _ = rope_tables(Tensor(positions), HEAD_DIM, THETA)
cos = np.asarray(cos.to_numpy())
print(f"cos table: {list(cos.shape)}; the halves agree: {np.array_equal(cos[:, :32], cos[:, 32:])}")
print("pair | speed (radians per position) | positions per full turn")
for pair in (0, 1, 2, 8, 16, 31):
    speed = THETA ** (-2 * pair / HEAD_DIM)
    print(f"{pair:4d} | {speed:28.6f} | {2 * np.pi / speed:23,.1f}")

if plt:
    figure, axes = plt.subplots(figsize=(8, 5), layout="constrained")
    image = axes.imshow(cos, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
    axes.set(
        xlabel="feature",
        ylabel="position",
        title=f"cos table, head_dim {HEAD_DIM}, theta {THETA:g}",
    )
    figure.colorbar(image, ax=axes, label="cos(position x speed)")
    show(figure, "step_19_cos_table")

# %% [markdown]
# Nine tokens in one call, or four and then five with the cache the first call
# returned: the last five outputs must agree.

# %%
q, k, v = rng.normal(0, 1, (3, 1, 2, 9, HEAD_DIM)).astype(np.float32)  # [1, 2 heads, 9, 64]
empty = Tensor(np.zeros((1, 2, 0, HEAD_DIM), np.float32))
whole, _, _ = rope_attention(Tensor(q), Tensor(k), Tensor(v), empty, empty, THETA)
first, past_key, past_value = rope_attention(
    Tensor(q[:, :, :4]), Tensor(k[:, :, :4]), Tensor(v[:, :, :4]), empty, empty, THETA
)
print(f"after 4 tokens the key cache is {[int(d) for d in past_key.shape]}")
rest, past_key, _ = rope_attention(
    Tensor(q[:, :, 4:]), Tensor(k[:, :, 4:]), Tensor(v[:, :, 4:]), past_key, past_value, THETA
)
print(f"after 5 more it is {[int(d) for d in past_key.shape]}")
difference = np.abs(np.asarray(whole.to_numpy())[:, :, 4:] - np.asarray(rest.to_numpy())).max()
print(f"largest difference, 9 at once against 4 then 5: {difference:.1e}")
