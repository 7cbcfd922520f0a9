# %% [markdown]
# # Step 12, try it: where GPT-2 124M's parameters are, and what one repeated block does
#
# Builds `GPT2Model` with GPT-2 124M's config lazily (`F.lazy`: shapes only, no
# random numbers computed), adds up its parameters by part, and compares the
# total with the "124M" of the name. Then builds a list holding one block
# twelve times and counts its parameters by name and by distinct tensor,
# beside the model's own h.

# %%
import math

from max.experimental import functional as F
from max.experimental.nn import ModuleList

from solutions.solution_01 import GPT2Config
from solutions.solution_11 import GPT2Block
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(12)  # yours once it passes its check, else the reference
GPT2Model = code.GPT2Model


# %%
def count(module) -> tuple[int, int]:
    """(numbers counted by parameter name, numbers in distinct tensors)."""
    by_name, distinct = 0, {}
    for _, parameter in module.parameters:
        size = math.prod(int(d) for d in parameter.shape)
        by_name += size
        distinct[id(parameter)] = size
    return by_name, sum(distinct.values())


# %%
config = GPT2Config()  # GPT-2 124M
with F.lazy():
    model = GPT2Model(config)
parts: dict[str, int] = {}
for name, parameter in model.parameters:
    part = "h (all blocks)" if name.startswith("h.") else name.split(".")[0]
    parts[part] = parts.get(part, 0) + math.prod(int(d) for d in parameter.shape)
total = sum(parts.values())
print(f"{'part':<16} {'numbers':>12}  share")
for part, size in parts.items():
    print(f"{part:<16} {size:>12,}  {size / total:6.1%}")
print(f"{'total':<16} {total:>12,}  = {total / 1e6:.1f} million")
print(f"parameter tensors: {sum(1 for _ in model.parameters)}, blocks in h: {len(model.h)}")

# %%
with F.lazy():
    repeated = ModuleList([GPT2Block(config)] * config.n_layer)  # the classic mistake
print("\n12 blocks               counted by name   in distinct tensors")
for label, blocks in (("one block, repeated", repeated), ("the model's h", model.h)):
    by_name, distinct = count(blocks)
    print(f"{label:<22} {by_name:>16,}   {distinct:>19,}")
