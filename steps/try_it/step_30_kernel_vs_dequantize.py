# %% [markdown]
# # Step 30, try it: the kernel against dequantize-then-matmul, one token
#
# One of SmolLM2-135M's MLP projections, gate_proj [1536, 576], in Q8_0
# blocks, times one token's x [1, 576], two ways: step 27's Q8Linear (the
# blocks widened to a float32 weight in the graph, then MAX's matmul) and
# your kernel (the blocks read as they are). First the bytes each way reads,
# then both compiled and timed, in alternating rounds, then their outputs
# compared. The first run compiles your kernel into two graphs: tens of
# seconds.

# %%
import statistics
import time

import numpy as np
from max.dtype import DType
from max.graph import TensorType

from common import q8_kernel
from solutions.solution_27 import Q8Linear, quantize_q8_0
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(30)  # yours once it passes its check, else the reference
OUT, IN = 1536, 576  # gate_proj
ROUNDS, CALLS = 5, 20

# %%
weights = OUT * IN
print(f"gate_proj [{OUT}, {IN}]: {weights:,} weights")
print(f"  float32 weight read by a matmul: {4 * weights / 2**20:.2f} MiB")
print(f"  Q8_0 blocks read by the kernel:  {34 * weights / 32 / 2**20:.2f} MiB")
print(
    "  step 27's path reads the blocks, writes the float32 weight and reads it back: "
    f"{(34 / 32 + 4 + 4) * weights / 2**20:.2f} MiB"
)

# %%
rng = np.random.default_rng(0)
scales, values = quantize_q8_0((rng.standard_normal((OUT, IN)) * 0.02).astype(np.float32))
KernelLinear = q8_kernel.kernel_linear(q8_kernel.library(code.file), Q8Linear)
layers = {"dequantize, then matmul": Q8Linear(IN, OUT), "your kernel": KernelLinear(IN, OUT)}
started = time.perf_counter()
compiled = {}
for name, layer in layers.items():
    layer.load_state_dict({"scales": scales, "values": values})
    compiled[name] = layer.compile(TensorType(DType.float32, [1, IN], device=layer.scales.device))
print(f"\ncompiled both in {time.perf_counter() - started:.0f} s")

# %%
from max.experimental.tensor import Tensor  # noqa: E402

x = rng.standard_normal((1, IN)).astype(np.float32)
x_tensor = Tensor(x)
outputs = {name: graph(x_tensor).to_numpy() for name, graph in compiled.items()}
times: dict[str, list[float]] = {name: [] for name in compiled}
for round_number in range(ROUNDS):
    order = list(compiled) if round_number % 2 == 0 else list(compiled)[::-1]
    for name in order:
        started = time.perf_counter()
        for _ in range(CALLS):
            compiled[name](x_tensor).to_numpy()
        times[name].append(1e6 * (time.perf_counter() - started) / CALLS)
for name, samples in times.items():
    print(f"{name:<24} {statistics.median(samples):8.0f} µs a token (min {min(samples):.0f})")
ratio = statistics.median(times["dequantize, then matmul"]) / statistics.median(
    times["your kernel"]
)
print(f"the kernel takes {1 / ratio:.2f} of step 27's time")

# %%
weight = (values.astype(np.float64) * scales.astype(np.float64)[..., None]).reshape(OUT, IN)
want = x.astype(np.float64) @ weight.T
for name, out in outputs.items():
    print(f"{name:<24} largest difference from float64: {np.abs(out - want).max():.2e}")
