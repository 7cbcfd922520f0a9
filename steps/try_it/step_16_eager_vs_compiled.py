# %% [markdown]
# # Step 16: time one forward pass, eager and compiled, for a few lengths
#
# The model is the checker's one-block GPT-2 (random weights, 64-wide), so the
# graph is the one `python -m tests.check 16` compiles: after that check has run
# once, MAX finds the compiled graph on disk and this takes seconds. On a
# machine that never compiled it, the first run compiles it (minutes).

# %%
import time

import numpy as np
from max.experimental.tensor import Tensor

from common.sizes import SMALL_GPT2
from solutions.solution_01 import GPT2Config
from solutions.solution_13 import MaxGPT2LMHeadModel
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(16)  # yours once it passes its check, else the reference
compile_model = code.compile_model

CONFIG = GPT2Config(**{**SMALL_GPT2, "n_layer": 1})  # the checker's model: 1 block, n_embd 64


# %%
def seconds(fn, ids: Tensor, repeats: int) -> float:
    """The median wall time of `repeats` calls, the result read back each time."""
    fn(ids)  # the first call may load kernels: not timed
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(ids)
        np.asarray((out[0] if isinstance(out, (tuple, list)) else out).to_numpy())
        times.append(time.perf_counter() - start)
    return float(np.median(times))


# %%
rng = np.random.default_rng(0)
model = MaxGPT2LMHeadModel(CONFIG)
weights = {
    name: rng.normal(0, 0.02, [int(d) for d in p.shape]).astype(np.float32)
    for name, p in model.parameters
}
weights["lm_head.weight"] = weights["transformer.wte.weight"]  # tied, as in GPT-2
model.load_state_dict(weights)

start = time.perf_counter()
compiled = compile_model(model)
print(f"compile_model took {time.perf_counter() - start:.1f} s")

# %%
print()
print(" tokens | eager (ms) | compiled (ms) | eager / compiled | same logits")
for seq in (1, 4, CONFIG.n_positions):
    ids = Tensor(rng.integers(0, CONFIG.vocab_size, (1, seq)).astype(np.int64))
    eager = seconds(model, ids, 3)
    fast = seconds(compiled, ids, 10)
    same = np.allclose(
        np.asarray(model(ids).to_numpy()), np.asarray(compiled(ids).to_numpy()), atol=1e-5
    )
    print(f" {seq:6d} | {eager * 1e3:10.1f} | {fast * 1e3:13.2f} | {eager / fast:16.0f} | {same}")
