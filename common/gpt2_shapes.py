"""GPT-2's parameters by name, with their shapes as the tutorial's model holds
them (MAX's Linear: weight [out, in]), for any config with GPT2Config's fields.
The checks expect them, and the local random checkpoints are written in them.
"""

from __future__ import annotations

from typing import Any


def linear_shapes(name: str, in_dim: int, out_dim: int, bias: bool = True) -> dict:
    shapes = {f"{name}.weight": (out_dim, in_dim)}
    if bias:
        shapes[f"{name}.bias"] = (out_dim,)
    return shapes


def layer_norm_shapes(name: str, dim: int) -> dict:
    return {f"{name}.weight": (dim,), f"{name}.bias": (dim,)}


def block_shapes(config: Any, prefix: str = "") -> dict:
    e, inner = config.n_embd, config.n_inner
    return {
        **layer_norm_shapes(f"{prefix}ln_1", e),
        **linear_shapes(f"{prefix}attn.c_attn", e, 3 * e),
        **linear_shapes(f"{prefix}attn.c_proj", e, e),
        **layer_norm_shapes(f"{prefix}ln_2", e),
        **linear_shapes(f"{prefix}mlp.c_fc", e, inner),
        **linear_shapes(f"{prefix}mlp.c_proj", inner, e),
    }


def model_shapes(config: Any, prefix: str = "") -> dict:
    shapes = {
        f"{prefix}wte.weight": (config.vocab_size, config.n_embd),
        f"{prefix}wpe.weight": (config.n_positions, config.n_embd),
    }
    for i in range(config.n_layer):
        shapes.update(block_shapes(config, f"{prefix}h.{i}."))
    return {**shapes, **layer_norm_shapes(f"{prefix}ln_f", config.n_embd)}


def lm_shapes(config: Any) -> dict:
    """MaxGPT2LMHeadModel's parameters: the transformer and the (tied) head."""
    return {
        **model_shapes(config, "transformer."),
        "lm_head.weight": (config.vocab_size, config.n_embd),
    }
