# %% [markdown]
# # Step 09, try it: the shapes through the split and merge, and one attention map per head
#
# Random weights first: 4 heads of 16 features (n_embd = 64), run on "the cat
# sat on the mat". Every stage's shape; then which features of a token each head
# owns (the split done right, and cut in the wrong order); then each head's
# attention map, drawn in shades: each head has its own query and key slices, so
# each looks at the sentence its own way. Last, the heads of a trained GPT-2 on
# a real sentence, when a checkpoint is at hand.

# %%
import numpy as np
from max.experimental import functional as F
from max.experimental.tensor import Tensor

from common import checkpoint
from solutions.solution_01 import GPT2Config
from solutions.solution_15 import load_pretrained
from steps.try_it.checkpoints import gpt2_directory, tiny_random
from steps.try_it.figures import attention_maps, pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(9)  # yours once it passes its check, else the reference
GPT2MultiHeadAttention = code.GPT2MultiHeadAttention

SENTENCE = "the cat sat on the mat".split()
SHADES = " .:-=+*#%@"  # weight 0 ... 1


# %%
def shape(t: Tensor) -> list[int]:
    return [int(d) for d in t.shape]


def head_weights(attention: GPT2MultiHeadAttention, x: Tensor) -> np.ndarray:
    """Every head's attention weights on x, [heads, seq, seq]: _attn returns
    weights @ value, so with the identity as the values it returns the weights."""
    heads, head_dim, seq = attention.num_heads, attention.head_dim, int(x.shape[1])
    query, key, _ = F.split(attention.c_attn(x), [attention.embed_dim] * 3, axis=-1)
    q, k = (attention._split_heads(t, heads, head_dim) for t in (query, key))
    identity = Tensor(np.tile(np.eye(seq, dtype=np.float32), (1, heads, 1, 1)))
    return np.asarray(attention._attn(q, k, identity).to_numpy())[0]


# %%
config = GPT2Config(vocab_size=16, n_positions=16, n_embd=64, n_layer=1, n_head=4)
e, heads, head_dim, seq = config.n_embd, config.n_head, config.n_embd // config.n_head, 6
rng = np.random.default_rng(3)
attention = GPT2MultiHeadAttention(config)
attention.load_state_dict(
    {
        "c_attn.weight": rng.normal(0, 1.5 / np.sqrt(e), (3 * e, e)).astype(np.float32),
        "c_attn.bias": np.zeros(3 * e, np.float32),
        "c_proj.weight": rng.normal(0, 1 / np.sqrt(e), (e, e)).astype(np.float32),
        "c_proj.bias": np.zeros(e, np.float32),
    }
)
words = {word: rng.normal(0, 1, e) for word in sorted(set(SENTENCE))}
places = rng.normal(0, 0.5, (seq, e))  # a little position signal: the two "the" differ
x = Tensor(np.stack([words[w] for w in SENTENCE]).astype(np.float32)[None] + places[None])

query, key, value = F.split(attention.c_attn(x), [e] * 3, axis=-1)
q, k, v = (attention._split_heads(t, heads, head_dim) for t in (query, key, value))
mixed = attention._attn(q, k, v)
merged = attention._merge_heads(mixed, heads, head_dim)
print("stage                          shape")
for name, t in (
    ("hidden_states", x),
    ("c_attn(hidden_states)", attention.c_attn(x)),
    ("query (key, value alike)", query),
    ("_split_heads(query)", q),
    ("_attn(q, k, v)", mixed),
    ("_merge_heads(...)", merged),
    ("c_proj(...), the output", attention(x)),
):
    print(f"{name:<30} {shape(t)}")

# %%
index = np.tile(np.arange(e, dtype=np.float32), (1, seq, 1))  # feature f holds f
split = np.asarray(attention._split_heads(Tensor(index), heads, head_dim).to_numpy())
wrong = index.reshape(1, seq, head_dim, heads).transpose(0, 3, 1, 2)  # [head_dim, heads]
print("\nthe features of token 0 each head owns:")
for h in range(heads):
    right, dealt = split[0, h, 0].astype(int), wrong[0, h, 0].astype(int)
    owns = f"{right[:4].tolist()} ... {right[-1]}"
    print(f"  head {h}: {owns:<24} cut as [head_dim, heads]: {dealt[:4].tolist()} ... {dealt[-1]}")
back = np.asarray(attention._merge_heads(Tensor(split), heads, head_dim).to_numpy())
print(f"_merge_heads(_split_heads(x)) gives x back: {np.array_equal(back, index)}")

# %%
weights = head_weights(attention, x)
print("\nattention maps (rows: queries, columns: keys; ' ' = 0, '@' = 1):")
print("        " + "".join(f"head {h}".ljust(2 * seq + 3) for h in range(heads)))
for i, word in enumerate(SENTENCE):
    cells = ["".join(2 * SHADES[min(9, int(w * 10))] for w in weights[h, i]) for h in range(heads)]
    print(f"{word:>6} |" + " |".join(cells) + " |")
print("\nthe key each head weighs most, for each query:")
for i, word in enumerate(SENTENCE):
    picks = "".join(f"{SENTENCE[int(np.argmax(weights[h, i]))]:>8}" for h in range(heads))
    print(f"{word:>6}: {picks}")

# %%
if pyplot():
    titles = [f"head {h}" for h in range(heads)]
    show(attention_maps(weights, titles, SENTENCE), "step_09_random_heads")

# %% [markdown]
# ## The heads of a trained GPT-2
#
# Random heads differ by chance; trained heads have learned where to look. This
# part reads a GPT-2 checkpoint directory, as `save_pretrained` writes it: the
# one in the GPT2_WEIGHTS environment variable, else the hub's gpt2 if it is in
# your Hugging Face cache (`python -m tools.generate` downloads it once; nothing
# is downloaded here). Without one it writes a tiny random checkpoint and says
# so: the same code runs, but heads that learned nothing spread their weight
# evenly. Change PROMPT or LAYER and run the cells again.

# %%
PROMPT = "The cat sat on the mat because it was tired."
LAYER = 5  # the block whose heads to draw (the last one when the model has fewer)

directory = gpt2_directory()
if directory is None:
    directory = tiny_random(PROMPT)
    print("\nno GPT-2 checkpoint found (set GPT2_WEIGHTS to a checkpoint directory):")
    print(f"a tiny random one instead, {directory}: its heads have learned nothing")
model = load_pretrained(directory)
tokenizer = checkpoint.Tokenizer(directory)
ids = tokenizer.encode(PROMPT)
tokens = [tokenizer.decode([i]) for i in ids]
layer = min(LAYER, model.config.n_layer - 1)

# The residual stream as block `layer` reads it: the embeddings, then the blocks below.
transformer = model.transformer
stream = transformer.wte(Tensor(np.array([ids]))) + transformer.wpe(
    Tensor(np.arange(len(ids))[None])
)
for block in list(transformer.h)[:layer]:
    stream = block(stream)
block = transformer.h[layer]
trained = head_weights(block.attn, block.ln_1(stream))

# %%
print(f"\n{directory.name}, layer {layer}, {len(ids)} tokens of {PROMPT!r}")
print("average weight each head gives   the first token   the token itself   the previous token")
rows = np.arange(1, len(ids))  # row 0 has only itself to look at
for h, maps in enumerate(trained):
    first, itself, previous = maps[rows, 0], maps[rows, rows], maps[rows, rows - 1]
    print(f"  head {h:2d} {first.mean():38.2f} {itself.mean():18.2f} {previous.mean():20.2f}")

# %%
if pyplot():
    figure = attention_maps(trained, [f"head {h}" for h in range(len(trained))], tokens)
    figure.suptitle(f"{directory.name}, layer {layer}")
    show(figure, "step_09_checkpoint_heads")
