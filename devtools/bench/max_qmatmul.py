"""MAX's own quantized matmul as a contender of the GGUF bench: step 23's
model with each layer's seven projections kept as the file's blocks (Q4_0,
Q4_K or Q6_K, the encodings `max.graph.ops.qmatmul` takes) and multiplied by
`F.qmatmul`, which quantizes the activations to 8 bits, multiplies block by
block and hands back float32. The rest of the model (norms, embedding, the
tied head) stays float32, as step 23 holds it."""

from __future__ import annotations

import numpy as np
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.tensor import Tensor
from max.graph.quantization import QuantizationEncoding

# llama.cpp's projection names -> step 23's (module, attribute).
PROJECTIONS = {
    "attn_q": ("self_attn", "q_proj"),
    "attn_k": ("self_attn", "k_proj"),
    "attn_v": ("self_attn", "v_proj"),
    "attn_output": ("self_attn", "o_proj"),
    "ffn_gate": ("mlp", "gate_proj"),
    "ffn_up": ("mlp", "up_proj"),
    "ffn_down": ("mlp", "down_proj"),
}
ENCODINGS = {"Q4_0": QuantizationEncoding.Q4_0, "Q4_K": QuantizationEncoding.Q4_K}
ENCODINGS["Q6_K"] = QuantizationEncoding.Q6_K


class QuantizedLinear(Module[[Tensor], Tensor]):
    """A Linear without bias whose weight is ggml blocks, `blocks` [out,
    bytes a row], as stored in the file; forward is MAX's qmatmul."""

    def __init__(self, encoding: QuantizationEncoding, out_dim: int, row_bytes: int) -> None:
        self.encoding = encoding
        self.blocks = Tensor.zeros([out_dim, row_bytes], dtype=DType.uint8)

    def forward(self, x: Tensor) -> Tensor:
        return F.qmatmul(self.encoding, None, x, self.blocks)


def projection_kinds(gguf) -> set[str]:
    """The block types of the file's projections (step 29's GGUFFile)."""
    return {
        info.kind
        for name, info in gguf.tensors.items()
        if name.startswith("blk.") and name.split(".")[-2] in PROJECTIONS
    }


def unsupported(gguf) -> str | None:
    """Why qmatmul cannot take this file's projections; None when it can."""
    kinds = projection_kinds(gguf)
    if not kinds or not kinds <= set(ENCODINGS):
        return (
            f"its projections are {', '.join(sorted(kinds))}; qmatmul takes {', '.join(ENCODINGS)}"
        )
    return None


def raw_blocks(gguf, name: str) -> np.ndarray:
    """Tensor `name`'s bytes as stored, one row of blocks a row."""
    from solutions.solution_29 import byte_count

    info = gguf.tensors[name]
    size = byte_count(info, gguf.path)
    rows = int(np.prod(info.shape[:-1]))
    return np.frombuffer(gguf.data, np.uint8, size, info.offset).reshape(rows, size // rows)


def with_quantized_layers(model, gguf):
    """`model` (step 23's, loaded from `gguf`) with its projections replaced by
    QuantizedLinear on the file's own blocks. q's and k's rows are put back in
    step 19's order as step 29 does for the widened weights: a row of blocks
    is a row of numbers, so the same reordering of rows applies."""
    from solutions.solution_29 import unpermute

    config = model.config
    heads = {"attn_q": config.num_attention_heads, "attn_k": config.num_key_value_heads}
    for index, layer in enumerate(model.model.layers):
        for short, (module, attribute) in PROJECTIONS.items():
            name = f"blk.{index}.{short}.weight"
            blocks = raw_blocks(gguf, name)
            if short in heads:
                blocks = np.ascontiguousarray(unpermute(blocks, heads[short]))
            linear = QuantizedLinear(ENCODINGS[gguf.tensors[name].kind], *blocks.shape)
            linear.load_state_dict({"blocks": blocks})
            setattr(getattr(layer, module), attribute, linear)
    return model
