# %% [markdown]
# # Step 10, try it: the residual stream through 12 blocks, pre-norm and post-norm
#
# Random weights, no checkpoint: 12 blocks of n_embd = 64, each an attention and
# an MLP (steps 09 and 04) wired with `pre_norm_residual`, run on 8 tokens. After
# every block it prints the stream's size (the root mean square of its numbers),
# the size of what the next sublayer reads (norm(x)), and how much of the input
# is still in the stream (the cosine between the stream and the embeddings).
# The same blocks wired post-norm, norm(x + sublayer(x)), run beside them.

# %%
import numpy as np
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from solutions.solution_03 import LayerNorm
from solutions.solution_04 import GPT2MLP
from solutions.solution_09 import GPT2MultiHeadAttention
from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(10)  # yours once it passes its check, else the reference
pre_norm_residual = code.pre_norm_residual

LAYERS = 12


# %%
def random_weights(module, rng: np.random.Generator) -> None:
    """Every matrix N(0, 1/in_features), every bias 0: each sublayer adds a
    correction about as large as what it reads."""
    weights = {}
    for name, parameter in module.parameters:
        shape = [int(d) for d in parameter.shape]
        if len(shape) == 2:
            weights[name] = rng.normal(0, 1 / np.sqrt(shape[1]), shape).astype(np.float32)
        else:
            weights[name] = np.zeros(shape, np.float32)
    module.load_state_dict(weights)


def rms(t) -> float:
    return float(np.sqrt(np.mean(np.square(np.asarray(t.to_numpy())))))


def cosine(a, b) -> float:
    a, b = np.asarray(a.to_numpy()).ravel(), np.asarray(b.to_numpy()).ravel()
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


# %%
config = GPT2Config(vocab_size=16, n_positions=16, n_embd=64, n_layer=LAYERS, n_head=4)
rng = np.random.default_rng(0)
blocks = []
for _ in range(LAYERS):
    attn, mlp = GPT2MultiHeadAttention(config), GPT2MLP(config.n_inner, config)
    random_weights(attn, rng)
    random_weights(mlp, rng)
    blocks.append((LayerNorm(config.n_embd), attn, LayerNorm(config.n_embd), mlp))

# %%
embeddings = Tensor(rng.normal(0, 1, (1, 8, config.n_embd)).astype(np.float32))
pre = post = embeddings
# After the embeddings and after every block: (size of x, input left), for each wiring.
history = {"pre-norm": [(rms(pre), 1.0)], "post-norm": [(rms(post), 1.0)]}
print("          pre-norm: x + sublayer(norm(x))          post-norm: norm(x + sublayer(x))")
print("block   size of x   size of norm(x)   input left     size of x   input left   pre-norm x")
print(f"{'embed':>5}  {rms(pre):9.2f}   {'':15}   {1.0:10.2f}     {rms(post):9.2f}   {1.0:10.2f}")
for i, (ln_1, attn, ln_2, mlp) in enumerate(blocks):
    pre = pre_norm_residual(pre, ln_1, attn)
    reads = ln_2(pre)
    pre = pre_norm_residual(pre, ln_2, mlp)
    post = ln_1(post + attn(post))
    post = ln_2(post + mlp(post))
    pre_size, pre_left = rms(pre), cosine(pre, embeddings)
    post_size, post_left = rms(post), cosine(post, embeddings)
    history["pre-norm"].append((pre_size, pre_left))
    history["post-norm"].append((post_size, post_left))
    bar = "#" * round(4 * pre_size)
    print(
        f"{i:>5}  {pre_size:9.2f}   {rms(reads):15.2f}   {pre_left:10.2f}"
        f"     {post_size:9.2f}   {post_left:10.2f}   {bar}"
    )

# %%
plt = pyplot()
if plt:
    figure, (stream, kept) = plt.subplots(1, 2, figsize=(10, 3.5), layout="constrained")
    for wiring, points in history.items():
        sizes, cosines = zip(*points, strict=True)
        stream.plot(sizes, marker="o", label=wiring)
        kept.plot(cosines, marker="o", label=wiring)
    stream.set(title="size of the stream x (rms)", ylim=(0, None))
    kept.set(title="input left (cosine with the embeddings)", ylim=(0, 1.05))
    for axes in (stream, kept):
        axes.set_xlabel("blocks passed")
        axes.legend()
        axes.grid(alpha=0.3)
    show(figure, "step_10_residual_stream")
