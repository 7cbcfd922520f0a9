"""Checks for step 16: compile_model.

The model handed to the learner's compile_model records the input types its
`compile` is given and refuses, before any compiling, a type the model cannot
be compiled for usefully (not int64, not [batch, seq], a fixed size): the
mistake is named in a second instead of after minutes of compiling.
"""

import numpy as np

from solutions.solution_13 import MaxGPT2LMHeadModel as EagerModel
from tests.checker import Check, Context, Fail, Step, as_one_graph, expect_close, tensor
from tests.specs.model_parts import small_config, tied_lm_weights

CONFIG = small_config(n_layer=1)
DIMENSIONS = ("batch", "seq")


class MaxGPT2LMHeadModel(EagerModel):
    """Step 13's model, whose `compile` first checks the input types it gets.

    Same name and qualified name as step 13's class: Module.compile names the
    graph after the class, so the graph (and MAX's cache of it on disk) is the
    one the learner's own model would give."""

    __qualname__ = "MaxGPT2LMHeadModel"
    calls = []  # the input types of every compile call, reset per run  # noqa: RUF012

    def compile(self, *input_types, **options):
        type(self).calls.append(input_types)
        refuse_input_types(self, input_types)
        return super().compile(*input_types, **options)


def refuse_input_types(model, input_types: tuple) -> None:
    """Fail, naming the mistake, if `input_types` cannot be forward's right types."""
    from max.dtype import DType
    from max.graph import DeviceRef, StaticDim, TensorType

    if not input_types:
        raise Fail(
            "compile_model called the model's compile with no input type: MAX cannot trace "
            "forward without knowing what its argument, the token ids, looks like.",
            "Pass one TensorType, the type of forward's one argument (input_ids).",
        )
    if len(input_types) > 1:
        raise Fail(
            f"compile_model gave the model's compile {len(input_types)} input types; forward "
            "takes one argument (input_ids), so it takes one type.",
            "Pass one TensorType: int64 token ids of shape [batch, seq].",
        )
    (given,) = input_types
    if isinstance(given, (list, tuple)):
        raise Fail(
            "compile_model gave the model's compile a list of types: it takes one type per "
            "argument of forward, each as its own argument, not a list.",
            "Pass the TensorType itself.",
        )
    if not isinstance(given, TensorType):
        raise Fail(
            f"compile_model gave the model's compile a {type(given).__name__}, not a "
            "TensorType describing the token ids.",
            "Build a TensorType(dtype, shape, device=...) and pass it.",
        )
    if given.dtype != DType.int64:
        raise Fail(
            f"The input type says {given.dtype} token ids; token ids are int64: the "
            "embedding looks its rows up by integer index, and the checker and generation "
            "feed int64 ids.",
            "Make the TensorType's dtype DType.int64.",
        )
    shape = [str(dim) for dim in given.shape]
    shown = "[" + ", ".join(shape) + "]"
    if given.rank != 2:
        raise Fail(
            f"The input type has shape {shown}, {given.rank} dimension(s); token ids are "
            "[batch, seq]: two dimensions.",
            'Give the shape two entries, one per dimension: ["batch", "seq"].',
        )
    why = {
        "batch": "the checker calls it with 3 sequences",
        "seq": "generation calls it with one more token every time",
    }
    fixed = [
        (name, int(dim))
        for name, dim in zip(DIMENSIONS, given.shape, strict=True)
        if isinstance(dim, StaticDim)
    ]
    if fixed:
        which = " and ".join(f"the {name} dimension is fixed at {size}" for name, size in fixed)
        sizes = "that size" if len(fixed) == 1 else "those sizes"
        callers = " and ".join(why[name] for name, _ in fixed)
        raise Fail(
            f"The input type has shape {shown}: {which}. The graph would take only {sizes}, "
            f"but {callers}.",
            "Name the dimension with a string instead of a number: a named dimension is "
            "symbolic, one graph for every size.",
        )
    if shape[0] == shape[1]:
        raise Fail(
            f"The input type has shape {shown}: both dimensions have the same name, and "
            "dimensions with one name must have one size, so the graph would take only "
            f"[n, n] inputs ([1, 5] fails).",
            'Give each dimension its own name: ["batch", "seq"].',
        )
    want = DeviceRef.from_device(model.device)
    if given.device != want:
        raise Fail(
            f"The input type puts the token ids on {given.device}; the model's parameters "
            f"are on {want}. The graph runs where its inputs are.",
            "Use the model's device: device=model.device.",
        )


def compiled(ctx: Context):
    """(eager model, the learner's compiled callable), compiled once per run."""
    return ctx.once("compiled", lambda: compile_once(ctx))


def compile_once(ctx: Context):
    MaxGPT2LMHeadModel.calls = []
    model = MaxGPT2LMHeadModel(CONFIG)
    weights = tied_lm_weights(ctx, CONFIG)
    model.load_state_dict(weights)
    return model, ctx.call("compile_model(model)", ctx.get("compile_model"), model)


def is_compiled(ctx: Context) -> None:
    from max.experimental.compilation import CompiledCallable
    from max.experimental.nn import Module

    model, result = compiled(ctx)
    called_compile = bool(MaxGPT2LMHeadModel.calls)
    if result is None:
        raise Fail(
            "compile_model returned None"
            + (
                ": it compiled the model but did not return the compiled graph."
                if called_compile
                else ", and never compiled the model."
            ),
            "Return the callable that the model's compile method gives back.",
        )
    if result is model or isinstance(result, Module):
        raise Fail(
            "compile_model returned a Module: the model itself, not a compiled graph. "
            "Calling it runs eagerly, operation by operation.",
            "Compile the model (its compile method, with the input's type) and return what "
            "that gives back.",
        )
    if getattr(result, "__self__", None) is model:
        raise Fail(
            "compile_model returned the model's forward method: calling it runs eagerly, "
            "operation by operation, not a compiled graph.",
            "Compile the model (its compile method, with the input's type) and return what "
            "that gives back.",
        )
    if not isinstance(result, CompiledCallable):
        raise Fail(
            f"compile_model returned a {type(result).__name__}, not a compiled graph"
            + ("" if called_compile else ", and never called the model's compile method")
            + ".",
            "Return what the model's compile method returns: calling the model eagerly is "
            "what we replace.",
        )


def same_logits(ctx: Context, batch: int, seq: int) -> None:
    model, result = compiled(ctx)
    ids = ctx.token_ids(CONFIG.vocab_size, batch, seq)
    eager = np.asarray(as_one_graph(model, tensor(ids)).to_numpy())
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
    required={"compile_model": []},
    seconds=1800,  # a machine's first compile of a graph takes minutes
    checks=[
        Check(
            "compile_model returns a compiled graph (the first compile on a machine takes minutes)",
            is_compiled,
        ),
        Check("compiled logits equal eager logits", matches_eager),
        Check(
            "one compiled graph serves other lengths (9, 1, n_positions tokens)",
            any_length,
        ),
        Check("and other batch sizes", any_batch),
    ],
)
