# %% [markdown]
# # Step 26, try it: a gradient checked by nudging
#
# First the page's worked example through attention_backward: one head,
# head_dim 1, two tokens, a gradient on the last output only. Then the
# checker's method on random inputs: nudge one input entry by +-eps, run the
# forward again, and compare the loss's change with attention_backward's
# gradient, for eps from 1e-1 to 1e-6, in float32 and in float64. Last, a map
# of dS for one head: zero wherever the mask hid a key.

# %%
import math

import numpy as np
from max.dtype import DType
from max.experimental.tensor import Tensor

from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(26)  # yours once it passes its check, else the reference
attention_backward, attention_forward, softmax_backward = (
    code.attention_backward,
    code.attention_forward,
    code.softmax_backward,
)


# %%
def array(t: Tensor) -> np.ndarray:
    return np.asarray(t.to_numpy())


def one_head(values: list[float]) -> Tensor:
    """A [1, 1, seq, 1] tensor: batch 1, one head, head_dim 1."""
    return Tensor(np.asarray(values, dtype=np.float32).reshape(1, 1, -1, 1))


def row(t) -> str:
    return "[" + ", ".join(f"{v:.4g}" for v in np.ravel(t)) + "]"


# %% [markdown]
# The worked example: Q = [1, 1], K = [0, ln 3], V = [4, 0], dO = [0, 1].

# %%
query, key, value = one_head([1, 1]), one_head([0, math.log(3)]), one_head([4, 0])
grad_output = one_head([0, 1])
output, probs = attention_forward(query, key, value)
grad_query, grad_key, grad_value = attention_backward(query, key, value, probs, grad_output)
dP = array(grad_output)[0, 0] @ array(value)[0, 0].T  # the weights' gradient, [2, 2]
dS = array(softmax_backward(probs, Tensor(dP.astype(np.float32)[None, None])))[0, 0]
print(f"P  rows: {row(array(probs)[0, 0, 0])} {row(array(probs)[0, 0, 1])}")
print(f"O      : {row(array(output))}")
print(f"dV     : {row(array(grad_value))}")
print(f"dS rows: {row(dS[0])} {row(dS[1])}, row sums {row(dS.sum(axis=-1))}")
print(f"dQ     : {row(array(grad_query))}")
print(f"dK     : {row(array(grad_key))}")

nudged = one_head([0.01, math.log(3)])
moved = array(attention_forward(query, nudged, value)[0])[0, 0, 1, 0] - array(output)[0, 0, 1, 0]
print(
    f"K[0] + 0.01 moves O[1] by {moved:.5f}: dK[0] x 0.01 = {array(grad_key)[0, 0, 0, 0] * 0.01:.5f}"
)

# %% [markdown]
# Finite differences on random inputs, [1, 2, 5, 4]: the loss is
# L = sum(O * dO), so its gradient with respect to O is dO. Twelve entries
# (four each of Q, K and V) are nudged by +-eps, and the worst error,
# relative to the largest gradient, is printed for each eps. The same is
# done with the tensors in float64: there the nudged forwards run in NumPy,
# as the checker's do (the same attention, 216 runs of it in milliseconds),
# and attention_backward runs once. MAX compiles an operation's kernel for
# a dtype the first time it meets it, unless its cache was warmed with it:
# the float64 half says so before it may wait.

# %%
rng = np.random.default_rng(0)
shape = (1, 2, 5, 4)
inputs = [rng.standard_normal(shape) for _ in range(3)]
upstream = rng.standard_normal(shape)
entries = [
    (which, tuple(int(rng.integers(0, n)) for n in shape)) for which in range(3) for _ in range(4)
]
names = ("Q", "K", "V")
epsilons = [1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 1e-5, 1e-6]


def numpy_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, ...]:
    """attention_forward in NumPy, in the arrays' own type: the output and P."""
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    seq = q.shape[-2]
    scores = np.where(np.tri(seq, dtype=bool), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def loss(arrays: list[np.ndarray]) -> float:
    """L = sum(O * dO), the forward computed in the arrays' own type."""
    if arrays[0].dtype == np.float64:
        out = numpy_attention(*arrays)[0]
    else:
        out = array(attention_forward(*(Tensor(a) for a in arrays))[0]).astype(np.float64)
    return float(np.sum(out * upstream))


def gradients(numpy_type: type) -> list[np.ndarray]:
    """attention_backward's (dQ, dK, dV) for the inputs in `numpy_type`."""
    tensors = [Tensor(a.astype(numpy_type)) for a in inputs]
    grad_output = Tensor(upstream.astype(numpy_type))
    if numpy_type == np.float32:
        _, weights = attention_forward(*tensors)
        return [array(g) for g in attention_backward(*tensors, weights, grad_output)]
    # float64: P from NumPy, so that only the backward's operations need
    # float64 kernels.
    print(
        "\nfloat64: attention_backward on float64 tensors. A first run may wait here while "
        "MAX compiles its operations' float64 kernels (minutes on 2 cores, then cached)...",
        flush=True,
    )
    weights = Tensor(numpy_attention(*inputs)[1])
    return [array(g) for g in attention_backward(*tensors, weights, grad_output)]


errors = {}
for dtype, numpy_type in ((DType.float32, np.float32), (DType.float64, np.float64)):
    analytic = gradients(numpy_type)
    largest = max(float(np.abs(analytic[which][index])) for which, index in entries)
    errors[dtype] = []
    for eps in epsilons:
        worst = 0.0
        for which, index in entries:
            up = [a.astype(numpy_type) for a in inputs]
            down = [a.astype(numpy_type) for a in inputs]
            up[which][index] += eps
            down[which][index] -= eps
            numeric = (loss(up) - loss(down)) / (2 * eps)
            worst = max(worst, abs(numeric - analytic[which][index]) / largest)
        errors[dtype].append(worst)
    print(
        f"\n{str(dtype).removeprefix('DType.')}: the worst error of 12 entries, relative to the largest gradient"
    )
    for eps, error in zip(epsilons, errors[dtype], strict=True):
        print(f"  eps {eps:7.0e}: {error:.1e}")
    for which, index in entries[::4]:
        print(f"  d{names[which]}{list(index)} = {analytic[which][index]:+.6f}")

# %% [markdown]
# The errors against eps, and dS of the first head: rows are queries,
# columns keys, and every entry above the diagonal is exactly 0.

# %%
tensors = [Tensor(a.astype(np.float32)) for a in inputs]
_, weights = attention_forward(*tensors)
dP = array(Tensor(upstream.astype(np.float32)) @ tensors[2].T)
head = array(softmax_backward(weights, Tensor(dP)))[0, 0]
print(f"\ndS of head 0, above the diagonal: {np.count_nonzero(np.triu(head, 1))} nonzero entries")
print(f"dS of head 0, row sums: {row(head.sum(axis=-1))}")

plt = pyplot()
if plt:
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    for dtype, marker in ((DType.float32, "o"), (DType.float64, "s")):
        left.loglog(epsilons, errors[dtype], marker=marker, label=str(dtype).removeprefix("DType."))
    left.set(
        xlabel="eps",
        ylabel="worst relative error",
        title="finite differences against attention_backward",
    )
    left.legend()
    limit = np.abs(head).max()
    image = right.imshow(head, cmap="RdBu", vmin=-limit, vmax=limit)
    right.set(xlabel="key", ylabel="query", title="dS, head 0: 0 above the diagonal")
    figure.colorbar(image, ax=right)
    show(figure, "step_26_gradient_check")
