"""Checks for step 07: GPT2QKVProjection."""

import numpy as np

from tests import reference as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.mutants import m
from tests.specs.common import BATCH, SEQ, linear_shapes, small_config

CONFIG = small_config()
E = CONFIG.n_embd
SHAPES = linear_shapes("c_attn", E, 3 * E)


def parameters(ctx: Context) -> None:
    ctx.load_weights(ctx.build("GPT2QKVProjection", CONFIG), SHAPES)


def projects(ctx: Context) -> None:
    module = ctx.build("GPT2QKVProjection", CONFIG)
    w = ctx.load_weights(module, SHAPES)
    x = ctx.normal(BATCH, SEQ, E)
    result = ctx.call("GPT2QKVProjection.forward", module, tensor(x))
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        raise Fail(
            f"forward returned {type(result).__name__}, expected a tuple (query, key, value).",
            "Split the c_attn output into three and return all three.",
        )
    expected = ref.qkv(w, x)
    no_bias = ref.linear(x, w["c_attn.weight"], None)
    names = ("query", "key", "value")
    for index, (name, actual) in enumerate(zip(names, result, strict=True)):
        mistakes = {
            f"This is the {other}: return query, key, value in that order (the checkpoint's order).": expected[
                j
            ]
            for j, other in enumerate(names)
            if j != index
        }
        mistakes["c_attn has no bias: use Linear(n_embd, 3 * n_embd) with its bias."] = np.split(
            no_bias, 3, -1
        )[index]
        expect_close(
            actual,
            expected[index],
            name,
            mistakes,
            hint="One Linear(n_embd, 3*n_embd), then F.split(qkv, [n_embd]*3, axis=-1).",
        )


STEP = Step(
    number=7,
    title="Query/key/value projections",
    required={"GPT2QKVProjection": ["__init__", "forward"]},
    checks=[
        Check("c_attn is one Linear(n_embd, 3 * n_embd)", parameters),
        Check("forward returns query, key, value, each [batch, seq, n_embd]", projects),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m(
        "k, q, v order",
        "return query, key, value",
        "return key, query, value",
        "This is the key",
    ),
    m(
        "no bias",
        "Linear(self.embed_dim, 3 * self.embed_dim, bias=True)",
        "Linear(self.embed_dim, 3 * self.embed_dim, bias=False)",
        "c_attn.bias",
    ),
    m(
        "split the wrong axis",
        "[self.embed_dim] * 3, axis=-1",
        "[self.embed_dim] * 3, axis=1",
        "split",
    ),
    m(
        "two-way projection",
        "3 * self.embed_dim, bias=True",
        "2 * self.embed_dim, bias=True",
        "c_attn.weight",
    ),
    m(
        "q, v, k unpacked",
        "query, key, value = F.split",
        "query, value, key = F.split",
        "This is the",
    ),
    m("returns a list", "return query, key, value", "return [query, key]", "tuple"),
]
