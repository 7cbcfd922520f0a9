# %% [markdown]
# # Step 11, try it: the parameters of one GPT-2 124M block, counted from their shapes
#
# Builds `GPT2Block` with GPT-2 124M's config lazily (`F.lazy`: the parameters
# get their shapes, but no random numbers are computed), lists every parameter
# with its shape and size, and checks the total against the formula
# 12 * n_embd**2 + 13 * n_embd. No checkpoint is needed: the count depends only
# on the shapes.

# %%
import math

from max.experimental import functional as F

from solutions.solution_01 import GPT2Config
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(11)  # yours once it passes its check, else the reference
GPT2Block = code.GPT2Block

# %%
config = GPT2Config()  # GPT-2 124M: n_embd 768, n_inner 3072
with F.lazy():
    block = GPT2Block(config)
shapes = {name: [int(d) for d in p.shape] for name, p in block.parameters}

print(f"{'parameter':<22} {'shape':<14} {'numbers':>11}")
for name, shape in shapes.items():
    print(f"{name:<22} {str(shape):<14} {math.prod(shape):>11,}")
total = sum(math.prod(shape) for shape in shapes.values())
print(f"{'total':<37} {total:>11,}")

# %%
e = config.n_embd
print(f"\n12 * n_embd**2 + 13 * n_embd = {12 * e * e + 13 * e:,}")
print(f"the same as the block: {12 * e * e + 13 * e == total}")
for part in ("ln_1", "attn", "ln_2", "mlp"):
    count = sum(math.prod(s) for n, s in shapes.items() if n.startswith(part + "."))
    print(f"  {part:<5} {count:>10,}  {count / total:7.2%}")
print(f"\n{config.n_layer} blocks: {config.n_layer * total:,} numbers of GPT-2 124M's 124,439,808")
