# %% [markdown]
# # Step 20, try it: RMSNorm against LayerNorm on the same rows
#
# A few rows of three features go through `RMSNorm(3)` and step 03's
# `LayerNorm(3)`, both starting at the identity (weight 1, and bias 0 for
# LayerNorm): the page's two rows, a row far from zero, a row centered on zero,
# and a row twice the first. Then tokens of 64 features with different means,
# where only LayerNorm removes the mean; last, the layer written out against
# MAX's fused `F.rms_norm`.

# %%
import numpy as np
from max.experimental import functional as F
from max.experimental.tensor import Tensor

from solutions.solution_03 import LayerNorm
from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(20)  # yours once it passes its check, else the reference
RMSNorm = code.RMSNorm


def run(layer, rows: np.ndarray) -> np.ndarray:
    """Rows [tokens, dim] through the layer, as one sequence of tokens."""
    return np.asarray(layer(Tensor(rows[None].astype(np.float32))).to_numpy())[0]


def signs_kept(before: np.ndarray, after: np.ndarray) -> float:
    """The share of features whose sign the layer leaves as it was."""
    return float(np.mean(np.sign(after) == np.sign(before)))


def show_row(row: np.ndarray) -> str:
    return "[" + ", ".join(f"{round(float(value), 3) + 0.0:6.3f}" for value in row) + "]"


# %%
rows = np.array([[1, 2, 3], [10, 10, 40], [9, 10, 11], [-1, 0, 1], [2, 4, 6]], np.float32)
by_rms, by_layer = run(RMSNorm(3), rows), run(LayerNorm(3), rows)
print(f"{'row':<16} {'RMSNorm':<26} LayerNorm")
for row, rms, layer in zip(rows, by_rms, by_layer, strict=True):
    print(f"{str(row.astype(int).tolist()):<16} {show_row(rms):<26} {show_row(layer)}")

# %% [markdown]
# Tokens of 64 features: random values of spread 1 around a mean that differs
# from token to token. RMSNorm gives every token a mean square of 1 and keeps
# each feature's sign; LayerNorm gives every token mean 0 and variance 1, so
# its mean square is 1 as well, and it flips the signs of about half the
# features of a token far from zero.

# %%
DIM = 64
rng = np.random.default_rng(0)
means = np.array([0.0, 0.5, -2.0, 5.0, 20.0], np.float32)
tokens = (means[:, None] + rng.normal(0.0, 1.0, (len(means), DIM))).astype(np.float32)
by_rms, by_layer = run(RMSNorm(DIM), tokens), run(LayerNorm(DIM), tokens)
print("        before       |         RMSNorm          |         LayerNorm")
print("  mean  mean square  |  mean   std  signs kept  |  mean   std  signs kept")
for before, rms, layer in zip(tokens, by_rms, by_layer, strict=True):
    print(
        f"{before.mean():6.2f} {np.mean(before**2):12.2f}  | "
        f"{rms.mean() + 0.0:5.2f} {rms.std():5.2f} {signs_kept(before, rms):11.0%}  | "
        f"{round(float(layer.mean()), 2) + 0.0:5.2f} {layer.std():5.2f} "
        f"{signs_kept(before, layer):11.0%}"
    )
print(f"mean square after RMSNorm, per token: {np.round(np.mean(by_rms**2, axis=-1), 4)}")

# %% [markdown]
# The token of mean 5, feature by feature: RMSNorm scales the whole row down
# and keeps its shape; LayerNorm moves it to mean 0 and stretches its spread.

# %%
plt = pyplot()
if plt:
    token = 3  # mean 5
    figure, panels = plt.subplots(1, 3, figsize=(12, 3.2), sharex=True, layout="constrained")
    for panel, values, title in zip(
        panels,
        (tokens[token], by_rms[token], by_layer[token]),
        ("input, mean 5", "RMSNorm", "LayerNorm"),
        strict=True,
    ):
        panel.bar(range(DIM), values, color=np.where(values < 0, "tab:red", "tab:blue"))
        panel.axhline(0, color="gray", linewidth=0.8)
        panel.set(title=title, xlabel="feature")
        panel.grid(alpha=0.3)
    show(figure, "step_20_norms_of_one_token")

# %% [markdown]
# The layer with a learned weight, written out as in the solution, against
# MAX's fused kernel `F.rms_norm(input, weight, epsilon)`.

# %%
layer = RMSNorm(DIM, eps=1e-5)
weight = (1.0 + rng.normal(0.0, 0.1, DIM)).astype(np.float32)
layer.load_state_dict({"weight": weight})
x = rng.normal(0.0, 3.0, (2, 5, DIM)).astype(np.float32)
written_out = np.asarray(layer(Tensor(x)).to_numpy())
fused = np.asarray(F.rms_norm(Tensor(x), Tensor(weight), epsilon=1e-5).to_numpy())
print(
    f"largest difference, written out against F.rms_norm: {np.abs(written_out - fused).max():.1e}"
)
