"""Sizes and helpers the module steps share.

Small enough for eager MAX to answer in a blink, large enough that a wrong
transpose or a missing scale cannot hide (seq != head_dim != heads).
"""

from solutions.solution_01 import GPT2Config

BATCH, SEQ = 2, 7


def small_config(**overrides: float) -> GPT2Config:
    sizes = dict(vocab_size=97, n_positions=16, n_embd=64, n_layer=2, n_head=4)
    return GPT2Config(**{**sizes, **overrides})


def linear_shapes(name: str, in_dim: int, out_dim: int, bias: bool = True) -> dict:
    shapes = {f"{name}.weight": (out_dim, in_dim)}
    if bias:
        shapes[f"{name}.bias"] = (out_dim,)
    return shapes


def layer_norm_shapes(name: str, dim: int) -> dict:
    return {f"{name}.weight": (dim,), f"{name}.bias": (dim,)}


def block_shapes(config: GPT2Config, prefix: str = "") -> dict:
    e, inner = config.n_embd, config.n_inner
    return {
        **layer_norm_shapes(f"{prefix}ln_1", e),
        **linear_shapes(f"{prefix}attn.c_attn", e, 3 * e),
        **linear_shapes(f"{prefix}attn.c_proj", e, e),
        **layer_norm_shapes(f"{prefix}ln_2", e),
        **linear_shapes(f"{prefix}mlp.c_fc", e, inner),
        **linear_shapes(f"{prefix}mlp.c_proj", inner, e),
    }


def model_shapes(config: GPT2Config, prefix: str = "") -> dict:
    shapes = {
        f"{prefix}wte.weight": (config.vocab_size, config.n_embd),
        f"{prefix}wpe.weight": (config.n_positions, config.n_embd),
    }
    for i in range(config.n_layer):
        shapes.update(block_shapes(config, f"{prefix}h.{i}."))
    return {**shapes, **layer_norm_shapes(f"{prefix}ln_f", config.n_embd)}


def lm_shapes(config: GPT2Config) -> dict:
    """MaxGPT2LMHeadModel's parameters: the transformer and the (tied) head."""
    return {
        **model_shapes(config, "transformer."),
        "lm_head.weight": (config.vocab_size, config.n_embd),
    }


def tied_lm_weights(
    ctx, config: GPT2Config, wte_scale: float = 1.0, wpe_scale: float = 1.0
) -> dict:
    """GPT-2-like weights for lm_shapes(config), the head tied to wte as in GPT-2.

    wte_scale > 1 makes the logits peaked, so greedy decoding picks varied
    tokens instead of repeating one. With the head tied, a large wte alone
    makes the model predict the token it just saw; a larger wpe on top makes
    the prediction depend on the position too, so the greedy continuation
    changes as the context grows.
    """
    weights = ctx.weights_for(lm_shapes(config))
    weights["transformer.wte.weight"] *= wte_scale
    weights["transformer.wpe.weight"] *= wpe_scale
    weights["lm_head.weight"] = weights["transformer.wte.weight"]  # one matrix
    return weights
