# %% [markdown]
# # Step 18: what a paged KV cache holds, from GPT-2 124M's shapes (no weights)
#
# One request's cache as it grows, exact and in pages of 16 or 128 tokens; then
# a batch of requests of different lengths at one moment, in pages against one
# tensor per request.

# %%
import math

from solutions.solution_01 import GPT2Config
from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(18)  # yours once it passes its check, else the reference
cache_shape = code.cache_shape

FLOAT32 = 4  # bytes


# %%
def mib(n: float) -> str:
    return f"{n / 2**20:8.1f} MiB"


def paged(tokens: int, page: int) -> int:
    """Tokens' worth of cache held in pages of `page` tokens: whole pages only."""
    return math.ceil(tokens / page) * page


# %%
config = GPT2Config()  # GPT-2 124M
shape = cache_shape(config)
per_token = 2 * shape.num_layers * shape.n_kv_heads * shape.head_dim * FLOAT32
print(
    f"cache_shape: {shape.num_layers} layers x {shape.n_kv_heads} key/value heads x "
    f"{shape.head_dim} per head -> {per_token:,} bytes per token (keys and values)"
)
print()
print("one request, growing:")
print("  tokens |        exact |  pages of 16 | pages of 128 | one 1024-token tensor")
for tokens in (1, 16, 17, 100, 128, 129, 500, 1024):
    print(
        f"  {tokens:6d} | {mib(tokens * per_token)} | "
        f"{mib(paged(tokens, 16) * per_token)} | {mib(paged(tokens, 128) * per_token)} | "
        f"{mib(config.n_positions * per_token)}"
    )

# %%
lengths = [40, 300, 600, 7, 128, 450, 15, 90]
exact = sum(lengths) * per_token
layouts = {
    "one 1024-token tensor each": len(lengths) * config.n_positions * per_token,
    "padded to the longest": len(lengths) * max(lengths) * per_token,
    "pages of 128 tokens": sum(paged(n, 128) for n in lengths) * per_token,
    "pages of 16 tokens": sum(paged(n, 16) for n in lengths) * per_token,
    "exact": exact,
}
print()
print(f"{len(lengths)} requests of {lengths} tokens, at one moment:")
for name, size in layouts.items():
    print(f"  {name:27s} {mib(size)}   {100 * (size - exact) / size:5.1f}% unused")

# %%
plt = pyplot()
if plt:
    figure, axes = plt.subplots(figsize=(8, 2.8), layout="constrained")
    names, used = list(layouts)[::-1], exact / 2**20  # the largest on top
    axes.barh(names, used, label="keys and values")
    axes.barh(names, [layouts[n] / 2**20 - used for n in names], left=used, label="unused")
    axes.set(xlabel="MiB", title=f"{len(lengths)} requests at one moment")
    axes.legend()
    show(figure, "step_18_paged_memory")
