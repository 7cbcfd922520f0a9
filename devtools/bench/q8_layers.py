"""The GGUF bench's step 27 and step 30 contenders: step 23's model with its
projections as Q8_0 blocks, widened in the graph or read by step 30's kernel."""

from __future__ import annotations


def with_q8_layers(model, linear_class):
    """`model` (step 23's) with each layer's seven projections kept as Q8_0
    blocks, step 27's quantizer run on the widened weights, and multiplied by
    `linear_class`: step 27's Q8Linear or step 30's kernel. The tied head
    stays float32: it is the embedding table, which a token reads one row of."""
    from solutions.solution_27 import quantize_q8_0

    for layer in model.model.layers:
        for parent, names in (
            (layer.self_attn, ("q_proj", "k_proj", "v_proj", "o_proj")),
            (layer.mlp, ("gate_proj", "up_proj", "down_proj")),
        ):
            for name in names:
                weight = getattr(parent, name).weight.to_numpy()
                scales, values = quantize_q8_0(weight)
                blocks = linear_class(weight.shape[1], weight.shape[0])
                blocks.load_state_dict({"scales": scales, "values": values})
                setattr(parent, name, blocks)
    return model


def q8_linear(key: str):
    """The Linear of contender "step 27" (step 27's Q8Linear) or "step 30"
    (step 30's kernel around it)."""
    from solutions.solution_27 import Q8Linear

    if key == "step 27":
        return Q8Linear
    from common import q8_kernel
    from common.steps import step

    return q8_kernel.kernel_linear(q8_kernel.library(step(30).solution), Q8Linear)
