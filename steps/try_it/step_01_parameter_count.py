# %% [markdown]
# # Step 01, try it: every weight shape follows from the config
#
# Counts the parameters of the four published GPT-2 sizes from their configs
# alone (no tensor is made), then maps a config.json-like dictionary, with keys
# `GPT2Config` does not know, onto the dataclass.

# %%
import dataclasses

from steps.try_it.learner import learner_or_reference

code = learner_or_reference(1)  # yours once it passes its check, else the reference
GPT2Config = code.GPT2Config

SIZES = {  # the four GPT-2 checkpoints differ only in these three numbers
    "gpt2": dict(n_embd=768, n_layer=12, n_head=12),
    "gpt2-medium": dict(n_embd=1024, n_layer=24, n_head=16),
    "gpt2-large": dict(n_embd=1280, n_layer=36, n_head=20),
    "gpt2-xl": dict(n_embd=1600, n_layer=48, n_head=25),
}


# %%
def count(config: GPT2Config) -> dict[str, int]:
    e, inner = config.n_embd, config.n_inner
    layer_norm = 2 * e  # weight and bias
    attention = (e * 3 * e + 3 * e) + (e * e + e)  # c_attn, c_proj
    mlp = (e * inner + inner) + (inner * e + e)  # c_fc, c_proj
    block = 2 * layer_norm + attention + mlp
    counts = {
        "embeddings": config.vocab_size * e + config.n_positions * e,  # wte, wpe
        "blocks": config.n_layer * block,
        "ln_f": layer_norm,
    }
    return {**counts, "total": sum(counts.values())}


# %%
print(f"{'model':<12} {'n_inner':>7} {'head width':>10} {'blocks':>14} {'total':>15}")
for name, sizes in SIZES.items():
    config = GPT2Config(**sizes)
    counts = count(config)
    head_width = config.n_embd // config.n_head
    print(
        f"{name:<12} {config.n_inner:>7} {head_width:>10} "
        f"{counts['blocks']:>14,} {counts['total']:>15,}"
    )

# %% [markdown]
# A checkpoint's config.json has more keys than we need: keep ours.

# %%
config_json = {
    "activation_function": "gelu_new",
    "n_ctx": 1024,
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 1024,
    "resid_pdrop": 0.1,
    "vocab_size": 50257,
}
known = {f.name for f in dataclasses.fields(GPT2Config)}
config = GPT2Config(**{k: v for k, v in config_json.items() if k in known})
print("\nignored keys:", sorted(set(config_json) - known))
print(config)
