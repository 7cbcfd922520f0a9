# %% [markdown]
# # Step 04, try it: GELU's tanh approximation against the exact form
#
# Applies MAX's `F.gelu` both ways (and ReLU, for comparison) to a few numbers,
# then finds the largest gap between the two GELUs on [-6, 6] and draws the
# curves, SiLU beside them. Last, it runs `GPT2MLP` on one token and shows how
# far the output moves when the exact GELU replaces the tanh one.

# %%
import numpy as np
from max.experimental import functional as F
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(4)  # yours once it passes its check, else the reference
GPT2MLP = code.GPT2MLP


# %%
def gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    return np.asarray(F.gelu(Tensor(x), approximate=approximate).to_numpy())


# %%
x = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0], dtype=np.float32)
exact, tanh = gelu(x, "none"), gelu(x, "tanh")
relu = np.asarray(F.relu(Tensor(x)).to_numpy())
print("     x    exact (erf)    tanh approx    difference    relu")
for row in zip(x, exact, tanh, relu, strict=True):
    v, e, t, r = (float(a) for a in row)
    print(f"{v:>6.1f} {e:>14.6f} {t:>14.6f} {t - e:>13.2e} {r:>7.2f}")

# %%
grid = np.linspace(-6, 6, 1201, dtype=np.float32)
gap = np.abs(gelu(grid, "tanh") - gelu(grid, "none"))
print(f"\nlargest |tanh - exact| on [-6, 6]: {gap.max():.2e} at x = {grid[gap.argmax()]:.2f}")

# %% [markdown]
# On a plot the two GELUs are one curve; their difference needs a panel of its
# own. SiLU, x · sigmoid(x), is the activation of many later models (Llama's
# MLP among them): the same smooth shape as GELU, with a deeper dip below 0.

# %%
plt = pyplot()
if plt:
    curves = {
        "GELU, exact (erf)": gelu(grid, "none"),
        "GELU, tanh (GPT-2)": gelu(grid, "tanh"),
        "ReLU": np.asarray(F.relu(Tensor(grid)).to_numpy()),
        "SiLU": np.asarray(F.silu(Tensor(grid)).to_numpy()),
    }
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
    for label, y in curves.items():
        left.plot(grid, y, label=label, linestyle="--" if "tanh" in label else "-")
    left.set(xlim=(-4, 3), ylim=(-0.5, 3), xlabel="x", title="activations")
    left.legend()
    left.grid(alpha=0.3)
    right.plot(grid, curves["GELU, tanh (GPT-2)"] - curves["GELU, exact (erf)"])
    right.set(xlabel="x", title="tanh - exact")
    right.grid(alpha=0.3)
    show(figure, "step_04_activations")

# %% [markdown]
# One `GPT2MLP` with random weights, run on one token with each GELU.

# %%
config = GPT2Config(n_embd=64, n_head=4, n_layer=1)
mlp = GPT2MLP(config.n_inner, config)
rng = np.random.default_rng(0)
weights = {name: rng.normal(0, 0.5, [int(d) for d in t.shape]) for name, t in mlp.parameters}
mlp.load_state_dict({name: w.astype(np.float32) for name, w in weights.items()})
token = Tensor(rng.normal(0, 1, (1, 1, config.n_embd)).astype(np.float32))
hidden = mlp.c_fc(token)
with_tanh = np.asarray(mlp.c_proj(F.gelu(hidden, approximate="tanh")).to_numpy())
with_erf = np.asarray(mlp.c_proj(F.gelu(hidden, approximate="none")).to_numpy())
size, moved = np.abs(with_tanh).max(), np.abs(with_tanh - with_erf).max()
print(f"one GPT2MLP, one token: outputs up to {size:.1f} in size")
print(f"  the exact GELU moves them by up to {moved:.2e} ({moved / size:.1e} of that)")
