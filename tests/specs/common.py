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
