# %% [markdown]
# # Step 03, try it: what layer norm does to each row's mean and variance
#
# Feeds three tokens of very different scale through `LayerNorm(8)` and prints
# each row's mean and variance before and after; then the same with a learned
# scale of 2 and shift of 0.5; then a nearly constant row, where eps matters.

# %%
import numpy as np
from max.experimental.tensor import Tensor

from steps.try_it.learner import learner_or_reference

code = learner_or_reference(3)  # yours once it passes its check, else the reference
LayerNorm = code.LayerNorm

DIM = 8


# %%
def table(title: str, before: np.ndarray, after: np.ndarray) -> None:
    print(title)
    print("  token   mean before    var before   mean after   var after")
    for i, (row_in, row_out) in enumerate(zip(before, after, strict=True)):
        print(
            f"  {i:>5} {row_in.mean():>13.4f} {row_in.var():>13.4f} "
            f"{row_out.mean():>12.4f} {row_out.var():>11.4f}"
        )


def run(layer: LayerNorm, x: np.ndarray) -> np.ndarray:
    return np.asarray(layer(Tensor(x[None])).to_numpy())[0]  # one sequence of tokens


# %%
rng = np.random.default_rng(0)
# Three tokens: small and centered, large and shifted, medium and negative.
x = np.stack(
    [
        rng.normal(0.0, 0.1, DIM),
        rng.normal(50.0, 20.0, DIM),
        rng.normal(-3.0, 1.0, DIM),
    ]
).astype(np.float32)

layer = LayerNorm(DIM)  # weight 1, bias 0: a plain normalization
table("weight = 1, bias = 0", x, run(layer, x))

# %%
layer.load_state_dict(
    {"weight": np.full(DIM, 2.0, np.float32), "bias": np.full(DIM, 0.5, np.float32)}
)
table("\nweight = 2, bias = 0.5", x, run(layer, x))

# %%
flat = (1.0 + 1e-3 * rng.standard_normal((1, DIM))).astype(np.float32)
print(f"\na nearly constant row, variance {flat.var():.2e}:")
for eps in (1e-5, 1e-2):
    out = run(LayerNorm(DIM, eps=eps), flat)
    predicted = flat.var() / (flat.var() + eps)  # var / (var + eps)
    print(f"  eps={eps:<6g} variance after: {out.var():.3g} (var / (var + eps) = {predicted:.3g})")
