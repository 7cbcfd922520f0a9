"""Checks for step 07: GPT2QKVProjection."""

import re

import numpy as np

from tests import reference as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.checker.compare import close
from tests.checker.engine import parameter_shapes
from tests.mistakes import Mutant, m
from tests.specs.common import BATCH, SEQ, linear_shapes, small_config

CONFIG = small_config()
E = CONFIG.n_embd
SHAPES = linear_shapes("c_attn", E, 3 * E)
NAMES = ("query", "key", "value")


def build(ctx: Context):
    module = ctx.build("GPT2QKVProjection", CONFIG)
    shapes = parameter_shapes(module)
    square = sorted(n for n, s in shapes.items() if n.endswith(".weight") and s == (E, E))
    if "c_attn.weight" not in shapes and len(square) >= 3:
        raise Fail(
            f"GPT2QKVProjection has {len(square)} separate [n_embd, n_embd] projections "
            f"({', '.join(square)}) and no c_attn: GPT-2 computes query, key and value with "
            "one Linear three times as wide.",
            "GPT-2's checkpoint holds the three projections stacked in one c_attn.weight of "
            "shape [3 * n_embd, n_embd]: build one Linear named c_attn and split its output.",
        )
    rows, columns = shapes.get("c_attn.weight", (3 * E, E))
    if columns == E and rows % E == 0 and rows != 3 * E:
        raise Fail(
            f"c_attn.weight has shape [{rows}, {E}], expected [{3 * E}, {E}]: c_attn is "
            f"{rows // E} * n_embd wide.",
            "c_attn computes three things at once, query, key and value, n_embd features "
            "each: its output is 3 * n_embd wide.",
        )
    return module, ctx.load_weights(module, SHAPES)


def parameters(ctx: Context) -> None:
    build(ctx)


SPLIT = re.compile(r"x\.shape\[axis\]=Dim\((\d+)\) != sum\(sizes=\[([\d, ]*)\]\)")


def split_failure(failure: Fail) -> Fail | None:
    """Why F.split raised, in the terms of this step; None if it did not."""
    found = SPLIT.search(failure.message)
    if found:
        length = int(found.group(1))
        total = sum(int(s) for s in found.group(2).split(",") if s.strip())
        features = (
            f"query, key and value sit side by side along the features, the last axis "
            f"(3 * n_embd = {3 * E})"
        )
        if length == BATCH:
            said = (
                f"F.split cut along the batch axis (length {BATCH}), the axis it uses when "
                f"none is given: {features}."
            )
        elif length == SEQ:
            said = f"F.split cut along the sequence axis (length {SEQ}), the tokens: {features}."
        elif length == 3 * E:
            said = (
                f"F.split's sizes add up to {total}, but the features are {3 * E} wide: the "
                f"three pieces are n_embd = {E} each."
            )
        elif length == E:
            said = (
                f"F.split got a tensor n_embd = {E} wide: split c_attn's output, "
                f"{3 * E} wide, not the hidden state."
            )
        else:
            return None
        return Fail(failure.message, said)
    if "values to unpack (expected 3)" in failure.message:
        return Fail(
            failure.message,
            "F.split did not return three pieces. With an int, F.split(x, n, axis) cuts pieces "
            "of n features each, not n pieces: give the size of each piece (or a list of the "
            "three sizes).",
        )
    return None


def call(ctx: Context, module, x: np.ndarray):
    try:
        return ctx.call("GPT2QKVProjection.forward", module, tensor(x))
    except Fail as failure:
        raise (split_failure(failure) or failure) from failure


def projects(ctx: Context) -> None:
    module, w = build(ctx)
    x = ctx.normal(BATCH, SEQ, E)
    result = call(ctx, module, x)
    if not isinstance(result, (tuple, list)):
        shape = [int(d) for d in getattr(result, "shape", ())]
        if shape == [BATCH, SEQ, 3 * E]:
            raise Fail(
                f"forward returned one tensor of shape {shape}: c_attn's output in one piece.",
                "Split it into query, key and value and return the three as a tuple.",
            )
        raise Fail(
            f"forward returned {type(result).__name__}, expected a tuple (query, key, value).",
            "Split the c_attn output into three and return all three.",
        )
    if len(result) != 3:
        raise Fail(
            f"forward returned {len(result)} values, expected a tuple (query, key, value).",
            "Split the c_attn output into three and return all three.",
        )
    expected = ref.qkv(w, x)
    arrays = [np.asarray(r.to_numpy()) if hasattr(r, "to_numpy") else r for r in result]
    found = [
        next((j for j in range(3) if isinstance(a, np.ndarray) and close(a, expected[j])), None)
        for a in arrays
    ]
    if None not in found and found != [0, 1, 2]:
        order = ", ".join(NAMES[j] for j in found)
        first = next(i for i in range(3) if found[i] != i)
        raise Fail(
            f"query, key and value come back in the wrong order: forward returns ({order}).",
            f"This is the {NAMES[found[first]]} where the {NAMES[first]} should be: c_attn's "
            "output holds query, key, value side by side in this order (the checkpoint's), "
            "and forward returns them in the same order.",
        )
    no_bias = ref.linear(x, w["c_attn.weight"], None)
    for index, (name, actual) in enumerate(zip(NAMES, result, strict=True)):
        mistakes = {
            f"This is the {other}: return query, key, value in that order (the checkpoint's "
            "order).": expected[j]
            for j, other in enumerate(NAMES)
            if j != index
        }
        mistakes["c_attn's bias is not added: the projection is c_attn(x), bias included."] = (
            np.split(no_bias, 3, -1)[index]
        )
        expect_close(
            actual,
            expected[index],
            name,
            mistakes,
            hint=f"The {name} is piece {index + 1} of 3 of c_attn's output, n_embd features "
            "each along the last axis.",
        )


# Hint ladders: what to look at; the API or the shapes; the line.
INIT_LINE = "```python\nself.c_attn = Linear(self.embed_dim, 3 * self.embed_dim, bias=True)\n```"
FORWARD_LINES = (
    "```python\nqkv = self.c_attn(hidden_states)\n"
    "query, key, value = F.split(qkv, [self.embed_dim] * 3, axis=-1)\n```"
)
SPLIT_LINE = "```python\nquery, key, value = F.split(qkv, [self.embed_dim] * 3, axis=-1)\n```"

PARAMETERS_HINTS = {
    "has no bias": (
        "`c_attn` was built without its bias. GPT-2's projections all add one, and the "
        "checkpoint has a `c_attn.bias` to load.",
        "`Linear(in_dim, out_dim, bias=...)` has a `bias` of shape `[out_dim]` unless "
        "built with `bias=False`.",
        INIT_LINE,
    ),
    "swapped": (
        "`c_attn.weight` comes out transposed: the layer's input and output sizes are "
        "exchanged. It goes from the hidden state to three times as wide.",
        "`Linear(in_dim, out_dim)` stores its weight as `[out_dim, in_dim]`: here "
        "`[3 * n_embd, n_embd]`.",
        INIT_LINE,
    ),
    "* n_embd wide": (
        "`c_attn` has the wrong width. It computes three things at once, each as wide as "
        "the hidden state.",
        "`Linear(in_dim, out_dim, bias=...)` from `embed_dim` to `3 * embed_dim`: weight "
        "`[3 * n_embd, n_embd]`.",
        INIT_LINE,
    ),
    "separate": (
        "Three projections give the same math, but not GPT-2's parameters: its checkpoint "
        "has one `c_attn` holding all three, stacked.",
        "One `Linear(in_dim, out_dim, bias=...)` with `out_dim = 3 * embed_dim`; `forward` "
        "then cuts its output in three.",
        INIT_LINE,
    ),
    "": (
        "The parameters differ from GPT-2's: one layer named `c_attn`, three times as wide "
        "as the hidden state, with a bias.",
        "`Linear(in_dim, out_dim, bias=...)`: from `embed_dim` to `3 * embed_dim`; weight "
        "`[3 * n_embd, n_embd]`, bias `[3 * n_embd]`.",
        INIT_LINE,
    ),
}

ORDER_HINTS = (
    "The right three pieces, in the wrong order. Nothing in the math fixes the order: "
    "GPT-2's checkpoint does, with the query first, then the key, then the value.",
    "`F.split` returns the pieces in the order they sit along the axis: the first `n_embd` "
    "features are the query, the next the key, the last the value. Unpack and return them "
    "in that order.",
    SPLIT_LINE,
)
SPLIT_HINTS = (
    "`F.split` cut along the wrong axis, or with sizes that do not add up. The three "
    "pieces sit side by side along the *features*.",
    "`F.split(x, split_sizes, axis)`: `split_sizes` lists each piece's length (they must "
    "sum to the axis' length), `axis` is where to cut; it defaults to 0, the batch. "
    "`c_attn`'s output is `[batch, seq, 3 * n_embd]`.",
    SPLIT_LINE,
)
FORWARD_HINTS = {
    "wrong order": ORDER_HINTS,
    "this is the": ORDER_HINTS,
    "f.split": SPLIT_HINTS,
    "one piece": (
        "`forward` returns c_attn's output whole. The attention needs the three parts separately.",
        "`F.split(x, split_sizes, axis)` returns a list of tensors; the class promises a "
        "tuple `(query, key, value)`, each `[batch, seq, n_embd]`.",
        FORWARD_LINES,
    ),
    "": (
        "`forward` is two stages: project the hidden state with `c_attn`, then cut the "
        "result into three equal pieces along the features.",
        "`[batch, seq, n_embd]` -> `c_attn` -> `[batch, seq, 3 * n_embd]` -> "
        "`F.split(x, split_sizes, axis)` -> three `[batch, seq, n_embd]`.",
        FORWARD_LINES,
    ),
}

STEP = Step(
    number=7,
    required={"GPT2QKVProjection": ["__init__", "forward"]},
    checks=[
        Check("c_attn is one Linear(n_embd, 3 * n_embd)", parameters, PARAMETERS_HINTS),
        Check(
            "forward returns query, key, value, each [batch, seq, n_embd]",
            projects,
            FORWARD_HINTS,
        ),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
C_ATTN = "Linear(self.embed_dim, 3 * self.embed_dim, bias=True)"
SPLIT_CALL = "F.split(qkv, [self.embed_dim] * 3, axis=-1)"
MISTAKES = [
    m("k, q, v order", "return query, key, value", "return key, query, value", "This is the key"),
    m("no bias", C_ATTN, "Linear(self.embed_dim, 3 * self.embed_dim, bias=False)", "c_attn.bias"),
    m(
        "split the wrong axis",
        "[self.embed_dim] * 3, axis=-1",
        "[self.embed_dim] * 3, axis=1",
        "sequence axis",
    ),
    m(
        "two-way projection",
        "3 * self.embed_dim, bias=True",
        "2 * self.embed_dim, bias=True",
        "c_attn.weight has shape [128, 64], expected [192, 64]: c_attn is 2 * n_embd wide",
    ),
    m(
        "q, v, k unpacked",
        "query, key, value = F.split",
        "query, value, key = F.split",
        "This is the",
    ),
    m("returns a list", "return query, key, value", "return [query, key]", "tuple"),
    m("split without an axis", SPLIT_CALL, "F.split(qkv, [self.embed_dim] * 3)", "batch axis"),
    m("split into pieces of 3", SPLIT_CALL, "F.split(qkv, 3, axis=-1)", "pieces of n features"),
    m(
        "sizes a third of n_embd",
        SPLIT_CALL,
        "F.split(qkv, [self.embed_dim // 3] * 3, axis=-1)",
        "add up to 63",
    ),
    m(
        "v, k, q unpacked",
        "query, key, value = F.split",
        "value, key, query = F.split",
        "forward returns (value, key, query)",
    ),
    m(
        "c_attn sizes swapped",
        C_ATTN,
        "Linear(3 * self.embed_dim, self.embed_dim, bias=True)",
        "swapped",
    ),
    m("returns qkv whole", "return query, key, value", "return qkv", "one piece"),
    Mutant(
        "three separate projections",
        (
            (
                "self.c_attn = " + C_ATTN,
                "self.q_proj = Linear(self.embed_dim, self.embed_dim, bias=True)\n"
                "        self.k_proj = Linear(self.embed_dim, self.embed_dim, bias=True)\n"
                "        self.v_proj = Linear(self.embed_dim, self.embed_dim, bias=True)",
            ),
            ("qkv = self.c_attn(hidden_states)", "pass"),
            (
                "query, key, value = " + SPLIT_CALL,
                "query = self.q_proj(hidden_states)\n"
                "        key = self.k_proj(hidden_states)\n"
                "        value = self.v_proj(hidden_states)",
            ),
        ),
        "one Linear three times as wide",
    ),
]
