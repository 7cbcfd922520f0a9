# %% [markdown]
# # Step 21, try it: query heads that share their keys
#
# First repeat_kv on numbered heads, in place and tiled, and which key/value
# head each query head reads. Then a small grouped-query attention layer (4
# query heads, 2 key/value heads, head_dim 16: the checker's sizes) with random
# weights, on "the cat sat on the mat". Query heads 0 and 1 read exactly the
# same keys, and so do heads 2 and 3; their attention weights still differ,
# because each head has its own query. Last, the four attention maps as a
# figure.

# %%
import numpy as np
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor

from solutions.solution_19 import apply_rope, rope_tables
from steps.try_it.figures import attention_maps, pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(21)  # yours once it passes its check, else the reference
GroupedQueryAttention, LlamaConfig, repeat_kv = (
    code.GroupedQueryAttention,
    code.LlamaConfig,
    code.repeat_kv,
)

SENTENCE = "the cat sat on the mat".split()


# %%
def array(t: Tensor) -> np.ndarray:
    return np.asarray(t.to_numpy())


def head_numbers(t: Tensor) -> list[int]:
    """The heads axis of a [1, heads, 1, 1] tensor, as a list."""
    return [int(n) for n in array(t).reshape(-1)]


# %%
numbered = Tensor(np.arange(3, dtype=np.float32).reshape(1, 3, 1, 1))  # heads 0, 1, 2
print("3 key/value heads, each repeated for a group of 2 query heads:")
print(f"  repeat_kv, in place: {head_numbers(repeat_kv(numbered, 2))}")
print(f"  F.tile, tiled:       {head_numbers(F.tile(numbered, [1, 2, 1, 1]))}")

for heads, kv_heads in ((4, 2), (32, 8)):
    group = heads // kv_heads
    print(f"\n{heads} query heads, {kv_heads} key/value heads: groups of {group}")
    for kv in range(min(kv_heads, 3)):
        print(
            f"  key/value head {kv} serves query heads {list(range(kv * group, (kv + 1) * group))}"
        )
    if kv_heads > 3:
        print(
            f"  ... key/value head {kv_heads - 1} serves query heads {heads - group}..{heads - 1}"
        )

# %% [markdown]
# A layer with random weights (standard deviation 1 / sqrt(hidden)), run on
# six made-up token vectors, one per word; the two "the" differ a little, by
# what is added for their place.

# %%
config = LlamaConfig(
    vocab_size=16,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    rope_theta=10000.0,
)
hidden, head_dim = config.hidden_size, config.head_dim
heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
group = heads // kv_heads
rng = np.random.default_rng(3)
attention = GroupedQueryAttention(config)
shapes = {
    "q_proj.weight": (heads * head_dim, hidden),
    "k_proj.weight": (kv_heads * head_dim, hidden),
    "v_proj.weight": (kv_heads * head_dim, hidden),
    "o_proj.weight": (hidden, heads * head_dim),
}
attention.load_state_dict(
    {
        name: rng.normal(0, 1 / np.sqrt(hidden), shape).astype(np.float32)
        for name, shape in shapes.items()
    }
)
words = {word: rng.normal(0, 1, hidden) for word in sorted(set(SENTENCE))}
places = rng.normal(0, 0.5, (len(SENTENCE), hidden))
x = Tensor((np.stack([words[w] for w in SENTENCE]) + places).astype(np.float32)[None])

# %% [markdown]
# The attention's own steps, taken one at a time so that the keys each query
# head reads and each head's weights can be printed: the projections, the
# turn of step 19, the repeat, then the scores and their softmax in NumPy.

# %%
seq = len(SENTENCE)
cos, sin = rope_tables(Tensor.arange(0, seq, dtype=DType.float32), head_dim, config.rope_theta)
queries = apply_rope(attention._split_heads(attention.q_proj(x), heads), cos, sin)
shared_keys = apply_rope(attention._split_heads(attention.k_proj(x), kv_heads), cos, sin)
shared_values = attention._split_heads(attention.v_proj(x), kv_heads)
read_keys = array(repeat_kv(shared_keys, group))[0]  # [heads, seq, head_dim]
read_values = array(repeat_kv(shared_values, group))[0]
q = array(queries)[0]
print(f"queries {list(q.shape)}, keys computed {[int(d) for d in shared_keys.shape][1:]}")
print(f"keys read, one set per query head {list(read_keys.shape)}")
for a, b in ((0, 1), (2, 3), (0, 2)):
    print(
        f"  query heads {a} and {b}: the same keys {np.array_equal(read_keys[a], read_keys[b])}, "
        f"the same query {np.array_equal(q[a], q[b])}"
    )

scores = q @ read_keys.transpose(0, 2, 1) / np.sqrt(head_dim)
scores = np.where(np.tri(seq, dtype=bool), scores, -np.inf)  # the causal mask
weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
weights = weights / weights.sum(axis=-1, keepdims=True)  # [heads, seq, seq]

# The layer's own output, from the same steps: the weighted values, merged, then o_proj.
merged = (weights @ read_values).transpose(1, 0, 2).reshape(seq, heads * head_dim)
mine = merged @ array(attention.o_proj.weight).T
empty = Tensor(np.zeros((1, kv_heads, 0, head_dim), np.float32))
output, _, _ = attention(x, empty, empty)
print(f"largest difference from the layer's output: {np.abs(mine - array(output)[0]).max():.1e}")

print(f'\nwhat the last token, "{SENTENCE[-1]}", gives each key:')
print("query head | kv head | " + " ".join(f"{w:>5s}" for w in SENTENCE))
for head in range(heads):
    row = " ".join(f"{w:5.2f}" for w in weights[head, -1])
    print(f"{head:10d} | {head // group:7d} | {row}")
for a, b in ((0, 1), (2, 3)):
    print(
        f"largest difference of the weights, heads {a} and {b}: {np.abs(weights[a] - weights[b]).max():.2f}"
    )

# %% [markdown]
# The four maps: row i is what token i gives each key. Heads 0 and 1 read the
# same keys, and so do heads 2 and 3, but no two maps are the same.

# %%
plt = pyplot()
if plt:
    titles = [f"query head {h}, kv head {h // group}" for h in range(heads)]
    show(attention_maps(list(weights), titles, SENTENCE), "step_21_shared_keys")
