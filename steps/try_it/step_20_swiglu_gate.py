# %% [markdown]
# # Step 20, try it: SiLU as a gate, and what the third matrix costs
#
# SiLU beside GELU and ReLU on a few numbers, then the gate of the page's
# example, silu(gate) times up, for a few gates, and both as figures. Last,
# the parameters of a SwiGLU MLP against a GELU MLP four times as wide as the
# hidden size, counted from the modules of this step and step 04 built
# lazily (shapes only, no random numbers).

# %%
import math

import numpy as np
from max.experimental import functional as F
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from solutions.solution_04 import GPT2MLP
from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(20)  # yours once it passes its check, else the reference
SwiGLUMLP = code.SwiGLUMLP


def apply(activation, x: np.ndarray) -> np.ndarray:
    return np.asarray(activation(Tensor(x.astype(np.float32))).to_numpy())


def gelu(t: Tensor) -> Tensor:
    return F.gelu(t, approximate="tanh")  # GPT-2's


# %%
x = np.array([-6.0, -4.0, -2.0, -1.0, 0.0, 1.0, 2.0, 4.0, 6.0], np.float32)
print("     x     ReLU   GELU (tanh)     SiLU   sigmoid")
for row in zip(
    x, apply(F.relu, x), apply(gelu, x), apply(F.silu, x), apply(F.sigmoid, x), strict=True
):
    v, relu, g, silu, sigmoid = (round(float(a), 3) + 0.0 for a in row)  # no "-0.000"
    print(f"{v:6.1f} {relu:8.3f} {g:13.3f} {silu:8.3f} {sigmoid:9.3f}")

grid = np.linspace(-8, 8, 16001, dtype=np.float32)
silu_grid, gelu_grid = apply(F.silu, grid), apply(gelu, grid)
print(f"\nSiLU's lowest value: {silu_grid.min():.3f} at x = {grid[silu_grid.argmin()]:.3f}")
print(f"GELU's lowest value: {gelu_grid.min():.3f} at x = {grid[gelu_grid.argmin()]:.3f}")

# %% [markdown]
# The gate: one feature of the intermediate vector, with `up` fixed at 3.
# A large negative gate closes it, a gate of 0 closes it exactly, and a large
# positive gate lets `up` through multiplied by about the gate itself.

# %%
gates = np.array([-6.0, -2.0, 0.0, 2.0, 6.0], np.float32)
up = 3.0
passed = apply(F.silu, gates) * up
print("  gate   silu(gate)   silu(gate) * up")
for gate, silu, product in zip(gates, apply(F.silu, gates), passed, strict=True):
    print(f"{gate:6.1f} {silu:12.3f} {product:17.3f}")

# %% [markdown]
# Left, the three activations; SiLU dips deeper below zero than GELU and
# stays below it for positive x. Right, what one feature of the MLP passes on,
# silu(gate) * up, for every gate and up in [-4, 4]: exactly 0 along gate = 0
# and up = 0, close to 0 wherever the gate is negative, and growing with both
# where it is positive, with the sign of `up`.

# %%
plt = pyplot()
if plt:
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    left.plot(grid, apply(F.relu, grid), label="ReLU")
    left.plot(grid, gelu_grid, label="GELU, tanh (GPT-2)")
    left.plot(grid, silu_grid, label="SiLU = x · sigmoid(x) (Llama)")
    left.axhline(0, color="gray", linewidth=0.8)
    left.set(xlim=(-5, 3), ylim=(-0.6, 3), xlabel="x", title="activations")
    left.legend()
    left.grid(alpha=0.3)

    axis = np.linspace(-4, 4, 201, dtype=np.float32)
    gate_grid, up_grid = np.meshgrid(axis, axis)
    product = apply(F.silu, gate_grid) * up_grid
    limit = np.abs(product).max()
    image = right.imshow(
        product,
        origin="lower",
        extent=(-4, 4, -4, 4),
        cmap="RdBu_r",
        vmin=-limit,
        vmax=limit,
    )
    lines = right.contour(
        axis, axis, product, levels=[-8, -2, 0, 2, 8], colors="black", linewidths=0.6
    )
    right.clabel(lines, fontsize=8)
    right.set(xlabel="gate", ylabel="up", title="silu(gate) · up")
    figure.colorbar(image, ax=right)
    show(figure, "step_20_silu_gate")

# %% [markdown]
# Parameters: a SwiGLU MLP has three matrices of hidden x intermediate, a
# GELU MLP two (plus biases, in GPT-2). At intermediate = 8/3 hidden the
# SwiGLU MLP has as many weights as the GELU MLP at 4 hidden.


# %%
def count(module) -> int:
    return sum(math.prod(int(d) for d in p.shape) for _, p in module.parameters)


print(
    f"{'model':<13} {'hidden':>6} {'width':>6} {'ratio':>6} {'SwiGLU MLP':>12} {'GELU MLP, 4x':>13}"
)
for name, hidden, intermediate in (
    ("SmolLM2-135M", 576, 1536),
    ("Llama 2 7B", 4096, 11008),
    ("Llama 3.2 1B", 2048, 8192),
):
    with F.lazy():  # shapes only: nothing is computed
        swiglu = SwiGLUMLP(hidden, intermediate)
        gelu_mlp = GPT2MLP(4 * hidden, GPT2Config(n_embd=hidden, n_head=hidden // 64))
    a, b = count(swiglu), count(gelu_mlp)
    print(
        f"{name:<13} {hidden:6d} {intermediate:6d} {intermediate / hidden:6.3f} "
        f"{a:12,} {b:13,}  ({a / b:.2f} times)"
    )
print("\nratio = width / hidden; 8/3 = 2.667. The GELU MLP's count includes its two biases.")
