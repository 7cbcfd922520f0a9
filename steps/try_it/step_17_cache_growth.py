# %% [markdown]
# # Step 17: how big the KV cache gets, and what growing it by concatenation costs
#
# First from GPT-2 124M's shapes alone (no weights): the cache's bytes after each
# generated token, and the bytes `F.concat` copies to grow it. Then a tiny cached
# model with random weights generates a few tokens, and the cache it returns is
# measured after every call: the same formula, on real tensors.

# %%
import numpy as np
from max.experimental.tensor import Tensor

from common.sizes import SMALL_GPT2
from solutions.solution_01 import GPT2Config
from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(17)  # yours once it passes its check, else the reference
CachedGPT2LMHeadModel, generate_cached = code.CachedGPT2LMHeadModel, code.generate_cached

FLOAT32 = 4  # bytes


# %%
def bytes_per_token(config: GPT2Config) -> int:
    """Keys and values, every layer, every head: one token's share of the cache."""
    head_dim = config.n_embd // config.n_head
    return 2 * config.n_layer * config.n_head * head_dim * FLOAT32


def mib(n: float) -> str:
    return f"{n / 2**20:10,.1f} MiB"


# %%
config = GPT2Config()  # GPT-2 124M
per_token = bytes_per_token(config)
prompt = 16
# After each generated token: the tokens in context, and the bytes of all concat copies so far.
tokens = np.arange(prompt + 1, config.n_positions + 1)
copied = np.cumsum((tokens - 1) * per_token)  # each step copies the old cache into a bigger one

print(f"GPT-2 124M: {per_token:,} bytes of cache per token of context")
print(f"after a {prompt}-token prompt, generating up to the {config.n_positions}-token window:")
print("  generated |   tokens |     cache size | copied by concat, in all")
for generated, (context, total) in enumerate(zip(tokens, copied, strict=True), start=1):
    if generated in (1, 2, 3, 10, 100, 500) or context == config.n_positions:
        print(f"  {generated:9d} | {context:8d} | {mib(context * per_token)} | {mib(total)}")

# %% [markdown]
# The cache grows by the same amount with every token; the copies grow with the
# cache, so their total grows with the square of the tokens.

# %%
plt = pyplot()
if plt:
    figure, (cache, copies) = plt.subplots(1, 2, figsize=(10, 3.5), layout="constrained")
    cache.plot(tokens, tokens * per_token / 2**20)
    cache.set(title="the KV cache (MiB)", xlabel="tokens in context")
    copies.plot(tokens, copied / 2**30, color="C3")
    copies.set(title="copied by concat, in all (GiB)", xlabel="tokens in context")
    for axes in (cache, copies):
        axes.grid(alpha=0.3)
    show(figure, "step_17_cache_growth")

# %% [markdown]
# A tiny cached model: `forward` wraps it to measure the keys and values it
# returns after every call of `generate_cached`.

# %%
tiny = GPT2Config(**{**SMALL_GPT2, "n_layer": 2, "n_positions": 32})
model = CachedGPT2LMHeadModel(tiny)
print()
print(
    f"a tiny cached model (n_layer={tiny.n_layer}, n_head={tiny.n_head}, "
    f"n_embd={tiny.n_embd}): {bytes_per_token(tiny):,} bytes per token"
)
print("  call | tokens fed | returned keys shape  | keys + values bytes | formula")
calls: list[int] = []


def forward(input_ids: Tensor, past_keys: Tensor, past_values: Tensor):
    logits, keys, values = model(input_ids, past_keys, past_values)
    size = sum(np.asarray(t.to_numpy()).nbytes for t in (keys, values))
    cached = int(keys.shape[3])
    shape = str([int(d) for d in keys.shape])
    print(
        f"  {len(calls) + 1:4d} | {int(input_ids.shape[-1]):10d} | {shape:19s} | "
        f"{size:19,d} | {cached * bytes_per_token(tiny):,}"
    )
    calls.append(cached)
    return logits, keys, values


generated = list(generate_cached(forward, tiny, [3, 14, 15, 92, 65], 4))
