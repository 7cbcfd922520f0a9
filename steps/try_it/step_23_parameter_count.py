# %% [markdown]
# # Step 23, try it: where SmolLM2-135M's parameters are
#
# The page's count, part by part, from the config alone: `LlamaConfig()`'s
# defaults are SmolLM2-135M's. The formula is checked first against modules
# built lazily (`F.lazy`: shapes only, no random numbers): one layer of
# SmolLM2-135M's size, and a whole small model, tied and untied. Then the
# count for SmolLM2-135M, for the same model with a head of its own, and for
# two larger Llamas, and the parts as a figure.

# %%
import math

from max.experimental import functional as F

from solutions.solution_21 import LlamaConfig
from steps.try_it.figures import pyplot, show
from steps.try_it.learner import learner_or_reference

code = learner_or_reference(23)  # yours once it passes its check, else the reference
LlamaDecoderLayer, LlamaForCausalLM = code.LlamaDecoderLayer, code.LlamaForCausalLM


# %%
def layer_parts(config: LlamaConfig) -> dict[str, int]:
    """One decoder layer's parameters, by part."""
    hidden, inter = config.hidden_size, config.intermediate_size
    q_width = config.num_attention_heads * config.head_dim  # q_proj's outputs, o_proj's inputs
    kv_width = config.num_key_value_heads * config.head_dim  # k_proj's and v_proj's outputs
    return {
        "attention": 2 * q_width * hidden + 2 * kv_width * hidden,
        "MLP": 3 * inter * hidden,
        "norms": 2 * hidden,
    }


def model_parts(config: LlamaConfig) -> dict[str, int]:
    """The whole model's parameters, by part; a tied head adds nothing."""
    layers = config.num_hidden_layers
    table = config.vocab_size * config.hidden_size
    return {
        "embed_tokens": table,
        **{name: layers * size for name, size in layer_parts(config).items()},
        "final norm": config.hidden_size,
        "lm_head": 0 if config.tie_word_embeddings else table,
    }


def counted(module) -> tuple[int, int]:
    """(numbers counted by parameter name, numbers in distinct tensors)."""
    by_name, distinct = 0, {}
    for _, parameter in module.parameters:
        size = math.prod(int(d) for d in parameter.shape)
        by_name += size
        distinct[id(parameter)] = size
    return by_name, sum(distinct.values())


# %% [markdown]
# One layer of SmolLM2-135M, its names and shapes as in the checkpoint
# (`model.layers.N.` before each name), against the formula.

# %%
smollm2 = LlamaConfig()  # the defaults are SmolLM2-135M's
with F.lazy():
    layer = LlamaDecoderLayer(smollm2)
for name, parameter in layer.parameters:
    shape = [int(d) for d in parameter.shape]
    print(f"  {name:<33} {str(shape):<12} {math.prod(shape):>9,}")
print(f"one layer, counted: {counted(layer)[0]:,}; formula: {sum(layer_parts(smollm2).values()):,}")

# %% [markdown]
# A whole model, small enough to build in a blink: the formula must give
# what its parameters hold. With a tied head, `model.parameters` lists the
# one table under two names, so counting by name counts it twice.

# %%
for tied in (True, False):
    small = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=tied,
    )
    with F.lazy():
        model = LlamaForCausalLM(small)
    by_name, distinct = counted(model)
    print(
        f"small model, {'tied' if tied else 'untied'}: by name {by_name:,}, distinct tensors "
        f"{distinct:,}, formula {sum(model_parts(small).values()):,}"
    )

# %% [markdown]
# SmolLM2-135M by part, then the same model with a head of its own.

# %%
parts = model_parts(smollm2)
total = sum(parts.values())
print(f"{'part':<14} {'parameters':>12}  share")
for part, size in parts.items():
    print(f"{part:<14} {size:>12,}  {size / total:6.1%}")
print(f"{'total':<14} {total:>12,}  = {total / 1e6:.1f} million")
untied = sum(model_parts(LlamaConfig(tie_word_embeddings=False)).values())
print(f"with a head of its own: {untied:,} = {untied / 1e6:.1f} million")

# %% [markdown]
# The same formula on two larger Llamas, with their published sizes: the
# embedding table's share of the model, and whether the model ties it.

# %%
llama_3_2_1b = LlamaConfig(
    vocab_size=128256,
    hidden_size=2048,
    intermediate_size=8192,
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
    tie_word_embeddings=True,
)
llama_3_8b = LlamaConfig(
    vocab_size=128256,
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    tie_word_embeddings=False,
)
print(f"{'model':<14} {'parameters':>15} {'one table':>13}  share  tied")
for label, config in (
    ("SmolLM2-135M", smollm2),
    ("Llama 3.2 1B", llama_3_2_1b),
    ("Llama 3 8B", llama_3_8b),
):
    size = sum(model_parts(config).values())
    table = config.vocab_size * config.hidden_size
    print(
        f"{label:<14} {size:>15,} {table:>13,}  {table / size:5.1%}  {config.tie_word_embeddings}"
    )

# %% [markdown]
# SmolLM2-135M's parts as bars, the 61 norm scales together, and in grey the
# head it would have if it were not tied.

# %%
plt = pyplot()
if plt:
    layers = smollm2.num_hidden_layers
    bars = {
        "embed_tokens": parts["embed_tokens"],
        f"attention, {layers} layers": parts["attention"],
        f"MLP, {layers} layers": parts["MLP"],
        f"norms, {2 * layers + 1}": parts["norms"] + parts["final norm"],
        "lm_head, tied": parts["lm_head"],
        "lm_head, if untied": smollm2.vocab_size * smollm2.hidden_size,
    }
    figure, axes = plt.subplots(figsize=(7, 3.2), layout="constrained")
    colors = ["C0"] * (len(bars) - 1) + ["lightgrey"]
    drawn = axes.barh(list(bars), [s / 1e6 for s in bars.values()], color=colors)
    axes.bar_label(drawn, [f"{s:,}" for s in bars.values()], padding=3)
    axes.invert_yaxis()
    axes.set(
        xlabel="million parameters",
        title=f"SmolLM2-135M: {total:,} parameters, head tied",
    )
    axes.set_xlim(0, max(bars.values()) / 1e6 * 1.3)
    show(figure, "step_23_parameter_count")
