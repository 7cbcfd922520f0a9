"""Checks for step 16: compile_model."""

import numpy as np

from solutions.solution_13 import MaxGPT2LMHeadModel
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.mutants import m
from tests.specs.common import small_config, tied_lm_weights

CONFIG = small_config(n_layer=1)


def compiled(ctx: Context):
    """(eager model, the learner's compiled callable), compiled once per run."""
    return ctx.once("compiled", lambda: compile_once(ctx))


def compile_once(ctx: Context):
    model = MaxGPT2LMHeadModel(CONFIG)
    weights = tied_lm_weights(ctx, CONFIG)
    model.load_state_dict(weights)
    return model, ctx.call("compile_model(model)", ctx.get("compile_model"), model)


def is_compiled(ctx: Context) -> None:
    from max.experimental.compilation import CompiledCallable
    from max.experimental.nn import Module

    model, result = compiled(ctx)
    if result is model or isinstance(result, Module):
        raise Fail(
            "compile_model returned a Module: the model itself, not a compiled graph.",
            "Return model.compile(input_type).",
        )
    if not isinstance(result, CompiledCallable):
        raise Fail(
            f"compile_model returned {type(result).__name__}, not a compiled graph.",
            "Return what model.compile(...) returns: calling the model eagerly is what we replace.",
        )


def same_logits(ctx: Context, batch: int, seq: int) -> None:
    model, result = compiled(ctx)
    ids = ctx.token_ids(CONFIG.vocab_size, batch, seq)
    eager = np.asarray(model(tensor(ids)).to_numpy())
    out = ctx.call(f"the compiled model on [{batch}, {seq}] token ids", result, tensor(ids))
    if isinstance(out, (tuple, list)):
        out = out[0]
    expect_close(
        out,
        eager,
        f"compiled logits for [{batch}, {seq}] tokens",
        hint="Compile the model itself; the compiled graph must compute what forward does.",
    )


def matches_eager(ctx: Context) -> None:
    same_logits(ctx, 1, 5)


def any_length(ctx: Context) -> None:
    for seq in (9, 1, CONFIG.n_positions):
        try:
            same_logits(ctx, 1, seq)
        except Fail as failure:
            raise Fail(
                f"{failure.message}",
                'Name the sequence dimension ("seq") instead of fixing '
                "a number: one graph then serves every length, with no recompiling.",
            ) from None


def any_batch(ctx: Context) -> None:
    try:
        same_logits(ctx, 3, 4)
    except Fail as failure:
        raise Fail(failure.message, 'Name the batch dimension too (["batch", "seq"]).') from None


STEP = Step(
    number=16,
    title="Compile the model",
    required={"compile_model": []},
    seconds=1800,  # a machine's first compile of a graph takes minutes
    checks=[
        Check(
            "compile_model returns a compiled graph (the first compile on a machine takes minutes)",
            is_compiled,
        ),
        Check("compiled logits equal eager logits", matches_eager),
        Check("one compiled graph serves other lengths (9, 1, n_positions tokens)", any_length),
        Check("and other batch sizes", any_batch),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m("returns the eager model", "return model.compile(input_type)", "return model", "Module"),
    m(
        "an eager wrapper",
        "return model.compile(input_type)",
        "return lambda ids: model(ids)",
        "compiled graph",
    ),
    m("float token ids", "TensorType(DType.int64,", "TensorType(DType.float32,", "raised"),
    m("no input type", "return model.compile(input_type)", "return model.compile()", "raised"),
    m("one axis only", '["batch", "seq"]', '["seq"]', "raised"),
    m("fixed length", '["batch", "seq"]', '["batch", 5]', "other lengths"),
]
