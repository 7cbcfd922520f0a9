"""Checks for step 16: compile_model.

The model handed to the learner's compile_model records the input types its
`compile` is given and refuses, before any compiling, a type the model cannot
be compiled for usefully (not int64, not [batch, seq], a fixed size): the
mistake is named in a second instead of after minutes of compiling.
"""

import numpy as np

from solutions.solution_13 import MaxGPT2LMHeadModel as EagerModel
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.mistakes import m
from tests.specs.common import small_config, tied_lm_weights

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


# Hint ladders: what to look at; the API or the shapes; the line.
LINES = (
    "```python\n"
    'input_type = TensorType(DType.int64, ["batch", "seq"], device=model.device)\n'
    "return model.compile(input_type)\n"
    "```"
)
TYPE_API = (
    "`TensorType(dtype, shape, device=...)` from `max.graph`: the dtype is a `DType` "
    "member, the shape a list with one entry per dimension (an `int` fixes it, a `str` "
    "names it), the device the model's (`model.device`)."
)
COMPILED_HINTS = {
    "int64": (
        "The dtype of the input type is wrong. `forward` starts with the embedding "
        "lookup of step 05, which needs integer token ids, and everything that calls "
        "the graph feeds int64 ids.",
        TYPE_API + " Token ids are `DType.int64`.",
        LINES,
    ),
    "dimension(s)": (
        "The shape of the input type has the wrong number of entries. `forward` takes a "
        "batch of token sequences: one dimension for the sequences, one for the tokens.",
        TYPE_API + " The shape has two entries, batch then seq.",
        LINES,
    ),
    "fixed at": (
        "A number in the input type's shape fixes that dimension: the graph then takes "
        "exactly that size and nothing else. Generation calls the model with one more "
        "token every time.",
        TYPE_API + " A string in the shape, such as a name for the sequence length, "
        "makes the dimension symbolic: any size, one graph.",
        LINES,
    ),
    "same name": (
        "Two dimensions with one name are one size: MAX assumes they are equal, and the "
        "graph refuses inputs where they are not.",
        TYPE_API + " Use two different names.",
        LINES,
    ),
    "device": (
        "The input type names another device than the model's. The graph runs where "
        "its inputs are, and its parameters are where the model put them.",
        TYPE_API,
        LINES,
    ),
    "list of types": (
        "The model's compile takes one type per argument of `forward`, each as its own "
        "argument, the way you would call `forward` itself: not a list.",
        "`model.compile(*input_types)`: with one argument in `forward`, one `TensorType`.",
        LINES,
    ),
    "input type": (
        "The model's compile needs the type of each argument of `forward`: that is how "
        "MAX traces it with symbolic tensors. `forward` has one argument, the token ids.",
        "`model.compile(*input_types)` takes one type per argument of `forward`, each as "
        "its own argument. " + TYPE_API,
        LINES,
    ),
    "": (
        "`compile_model` must return what the model's `compile` method returns: a "
        "compiled callable. The model itself, its `forward`, or a function that calls "
        "the model all run eagerly; `None` means nothing was returned.",
        "`Module.compile(*input_types)` traces `forward` and returns a `CompiledCallable` "
        "with forward's signature. Build the input type first (the first TODO), then "
        "compile with it and return the result.",
        LINES,
    ),
}
MATCHES_HINTS = (
    "The compiled graph runs, but its logits are not the eager model's. The graph is "
    "what `forward` computes for the types you gave: compile the model you were given, "
    "with its weights loaded, and nothing around it.",
    "`model.compile(input_type)` returns a callable; calling it with a `Tensor` of "
    "token ids [1, 5] must give the same [1, 5, vocab_size] logits as `model(ids)`.",
    LINES,
)
LENGTHS_HINTS = (
    "One graph must serve every sequence length: 9, 1 and a full context here, and one "
    "more token at every step of generation. A dimension that is a number in the input "
    "type accepts only that size.",
    "In `TensorType`'s shape, a `str` entry is a symbolic dimension (its size is known "
    "only when the graph is called); an `int` entry is static.",
    LINES,
)
BATCH_HINTS = (
    "One graph must serve every batch size too: the check calls it with 3 sequences.",
    "The first entry of the shape is the batch dimension: a `str` makes it symbolic, "
    "with a name of its own, not the sequence's.",
    LINES,
)


STEP = Step(
    number=16,
    required={"compile_model": []},
    seconds=1800,  # a machine's first compile of a graph takes minutes
    checks=[
        Check(
            "compile_model returns a compiled graph (the first compile on a machine takes minutes)",
            is_compiled,
            hints=COMPILED_HINTS,
        ),
        Check("compiled logits equal eager logits", matches_eager, hints=MATCHES_HINTS),
        Check(
            "one compiled graph serves other lengths (9, 1, n_positions tokens)",
            any_length,
            hints=LENGTHS_HINTS,
        ),
        Check("and other batch sizes", any_batch, hints=BATCH_HINTS),
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
    m(
        "returns forward",
        "return model.compile(input_type)",
        "return model.forward",
        "forward method",
    ),
    m(
        "compiled but not returned",
        "return model.compile(input_type)",
        "model.compile(input_type)",
        "did not return the compiled graph",
    ),
    m("float token ids", "TensorType(DType.int64,", "TensorType(DType.float32,", "int64"),
    m("int32 token ids", "TensorType(DType.int64,", "TensorType(DType.int32,", "int64"),
    m(
        "no input type",
        "return model.compile(input_type)",
        "return model.compile()",
        "no input type",
    ),
    m(
        "types in a list",
        "return model.compile(input_type)",
        "return model.compile([input_type])",
        "list of types",
    ),
    m("one axis only", '["batch", "seq"]', '["seq"]', "1 dimension(s)"),
    m("fixed length", '["batch", "seq"]', '["batch", 5]', "seq dimension is fixed at 5"),
    m("fixed batch", '["batch", "seq"]', '[1, "seq"]', "batch dimension is fixed at 1"),
    m("one name for both", '["batch", "seq"]', '["seq", "seq"]', "same name"),
]
