"""Checks for step 07: GPT2QKVProjection."""

import re

import numpy as np

from tests import reference_gpt2 as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.checker.compare import close
from tests.checker.engine import parameter_shapes
from tests.specs.model_parts import BATCH, SEQ, linear_shapes, small_config

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


STEP = Step(
    number=7,
    required={"GPT2QKVProjection": ["__init__", "forward"]},
    checks=[
        Check("c_attn is one Linear(n_embd, 3 * n_embd)", parameters),
        Check(
            "forward returns query, key, value, each [batch, seq, n_embd]",
            projects,
        ),
    ],
)
