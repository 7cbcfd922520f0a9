# %% [markdown]
# # Step 26, try it: gradient descent on a copy task
#
# A single attention block, step 09's with n_embd 16 and 2 heads, starts from
# random weights and learns, at every position, to output the vector of the
# token before it. Each input vector is a token's vector plus its position's,
# so the block has to find the previous position through its queries and
# keys, and carry that token's vector through its values. The loss is the
# mean squared error; mha_forward computes it, mha_backward gives the
# gradients of every weight, and each step moves the weights against them.

# %%
import numpy as np
from max.experimental.tensor import Tensor

from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(26)  # yours once it passes its check, else the reference
mha_backward, mha_forward = code.mha_backward, code.mha_forward

VOCAB, SEQ, EMBED, HEADS, BATCH = 8, 8, 16, 2, 16
STEPS, LEARNING_RATE = 100, 0.3
rng = np.random.default_rng(0)
token_vectors = rng.normal(0, 2 / np.sqrt(EMBED), (VOCAB, EMBED))
position_vectors = rng.normal(0, 2 / np.sqrt(EMBED), (SEQ, EMBED))


def array(t: Tensor) -> np.ndarray:
    return np.asarray(t.to_numpy())


def make_batch() -> tuple[np.ndarray, np.ndarray]:
    """Inputs [BATCH, SEQ, EMBED] and targets: the previous token's vector
    (position 0, with nothing before it, copies its own)."""
    ids = rng.integers(0, VOCAB, (BATCH, SEQ))
    previous = np.concatenate([ids[:, :1], ids[:, :-1]], axis=1)
    inputs = token_vectors[ids] + position_vectors
    return inputs.astype(np.float32), token_vectors[previous].astype(np.float32)


# %% [markdown]
# Small random weights, in MAX's layout ([out, in]), zero biases.

# %%
weights = {
    "c_attn.weight": rng.normal(0, 0.1, (3 * EMBED, EMBED)),
    "c_attn.bias": np.zeros(3 * EMBED),
    "c_proj.weight": rng.normal(0, 0.1, (EMBED, EMBED)),
    "c_proj.bias": np.zeros(EMBED),
}
weights = {name: w.astype(np.float32) for name, w in weights.items()}
probe, probe_target = make_batch()  # one batch kept aside, to watch the same text


def run(x: np.ndarray, target: np.ndarray):
    """The loss, its gradient with respect to the output, and the weights P."""
    output, saved = mha_forward(Tensor(x), {n: Tensor(w) for n, w in weights.items()}, HEADS)
    error = array(output) - target
    loss = float(np.mean(np.sum(error**2, axis=-1)))
    return loss, 2 * error / (BATCH * SEQ), array(saved.probs)


def on_previous(probs: np.ndarray) -> float:
    """The mean weight a position (from 1 on) gives the position before it."""
    return float(np.mean([probs[..., i, i - 1] for i in range(1, SEQ)]))


zeros = float(np.mean(np.sum(probe_target**2, axis=-1)))
start_loss, _, start_probs = run(probe, probe_target)
print(f"predicting zeros: loss {zeros:.3f}; the untrained block: {start_loss:.3f}")
print(f"weight on the previous position before training: {on_previous(start_probs):.3f}")

# %% [markdown]
# Gradient descent: a fresh batch each step, every weight moved by
# -LEARNING_RATE times its gradient.

# %%
losses = []
for step in range(STEPS):
    x, target = make_batch()
    loss, grad_output, _ = run(x, target)
    losses.append(loss)
    grads = mha_backward(
        Tensor(x), {n: Tensor(w) for n, w in weights.items()}, Tensor(grad_output), HEADS
    )
    for name in weights:
        weights[name] = weights[name] - LEARNING_RATE * array(grads[name])
    if step % 20 == 0 or step == STEPS - 1:
        print(f"step {step:3d}: loss {loss:.3f}")

end_loss, _, end_probs = run(probe, probe_target)
print(f"\nthe kept-aside batch: loss {start_loss:.3f} -> {end_loss:.3f}")
print(
    f"weight on the previous position: {on_previous(start_probs):.3f} -> {on_previous(end_probs):.3f}"
)

# %% [markdown]
# The loss, and head 0's attention on the first sequence of the kept-aside
# batch before and after: row i is what position i gives each position.

# %%
plt = pyplot()
if plt:
    figure, axes = plt.subplots(1, 3, figsize=(13, 3.8), layout="constrained")
    axes[0].plot(losses)
    axes[0].axhline(zeros, color="gray", linestyle="--", label="predicting zeros")
    axes[0].set(xlabel="step", ylabel="loss", title="mean squared error")
    axes[0].legend()
    for panel, probs, when in ((axes[1], start_probs, "before"), (axes[2], end_probs, "after")):
        panel.imshow(probs[0, 0], cmap="Blues", vmin=0, vmax=1)
        panel.set(xlabel="key position", ylabel="query position", title=f"head 0, {when}")
    show(figure, "step_26_copy_task")
