# %% [markdown]
# # Step 13, try it: how many parameters does the tie save?
#
# Builds GPT-2 124M's `MaxGPT2LMHeadModel` without computing its weights
# (`F.lazy()`: only the shapes exist), then counts its parameters twice: once per
# name, as if the head had a matrix of its own, and once per tensor, which is
# what the tie leaves. Then, on a small model, it shows that the tie is one
# object under two names, and what `load_state_dict` does to it.

# %%
import numpy as np
from max.experimental import functional as F

from solutions.solution_01 import GPT2Config
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(13)  # yours once it passes its check, else the reference
MaxGPT2LMHeadModel = code.MaxGPT2LMHeadModel


# %%
def count(model) -> tuple[int, int]:
    """(entries summed over the parameter names, entries summed over distinct tensors)."""
    by_name, by_tensor = 0, {}
    for _, tensor in model.parameters:
        size = int(np.prod([int(d) for d in tensor.shape]))
        by_name += size
        by_tensor[id(tensor)] = size
    return by_name, sum(by_tensor.values())


# %%
with F.lazy():  # shapes only: nothing is computed
    gpt2 = MaxGPT2LMHeadModel(GPT2Config())
by_name, by_tensor = count(gpt2)
print("GPT-2 124M                         parameters")
print(f"  counted per name (untied head)   {by_name:>12,}")
print(f"  counted per tensor (tied head)   {by_tensor:>12,}")
print(f"  saved by the tie                 {by_name - by_tensor:>12,}")

# %%
small = MaxGPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=8, n_embd=16, n_layer=1, n_head=2))
params = dict(small.parameters)
print("\nA small model:")
print(
    "  lm_head.weight is transformer.wte.weight:",
    params["lm_head.weight"] is params["transformer.wte.weight"],
)
arrays = {name: np.asarray(t.to_numpy()) for name, t in small.parameters}
small.load_state_dict(arrays)  # both names get the same numbers, as two tensors
params = dict(small.parameters)
print(
    "  after load_state_dict, still one tensor:",
    params["lm_head.weight"] is params["transformer.wte.weight"],
)
