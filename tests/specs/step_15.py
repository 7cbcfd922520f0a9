"""Checks for step 15: loading a Hugging Face checkpoint.

No torch or transformers here (learners do not have them): the checkpoints are
written with safetensors' NumPy API, in Hugging Face's layout. Conv1D weights
are [in, out]. The hub's gpt2 names its tensors without the `transformer.`
prefix and carries `h.N.attn.bias` mask buffers; save_pretrained writes the
prefix and no buffers. Neither stores the tied lm_head.weight, but some
converted checkpoints do.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from solutions.solution_01 import GPT2Config
from solutions.solution_13 import MaxGPT2LMHeadModel
from tests import reference as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.fixtures import hugging_face_layout, write_safetensors_checkpoint
from tests.mistakes import Mutant, m
from tests.specs.common import BATCH, SEQ, lm_shapes, model_shapes, small_config, tied_lm_weights

CONFIG = small_config()
BODY = model_shapes(CONFIG, "transformer.")
SHAPES = lm_shapes(CONFIG)
CONV1D = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
BUFFERS = (".attn.bias", ".attn.masked_bias")
HUB = "the hub's gpt2 (no `transformer.` prefix, mask buffers)"
SAVED = "save_pretrained's layout (`transformer.` prefix)"
WITH_HEAD = "a checkpoint that stores lm_head.weight"

TRANSPOSE = (
    "Transpose the weights of the Conv1D layers (CONV1D_LAYERS): Hugging Face stores "
    "them [in, out], MAX's Linear wants [out, in]. Transpose, then copy into C order with "
    "np.ascontiguousarray (MAX copies only contiguous arrays)."
)
TIE = (
    "GPT-2's head is tied to the token embedding table, which the checkpoint stores once: "
    "when the state has no lm_head.weight after the loop, give it the array of "
    "transformer.wte.weight."
)


def is_conv1d(name: str) -> bool:
    return name.endswith(".weight") and any(f".{layer}." in name for layer in CONV1D)


# -- checkpoints ---------------------------------------------------------------


def weights(ctx: Context) -> dict[str, np.ndarray]:
    """GPT-2-like weights in MAX's layout (lm_head tied), one set per check run."""
    return ctx.once("weights", lambda: tied_lm_weights(ctx, CONFIG))


def hugging_face(
    w: dict[str, np.ndarray],
    *,
    prefix: bool,
    head: bool,
    buffers: bool,
    dtype: type = np.float32,
) -> dict[str, np.ndarray]:
    """The tensors as a Hugging Face checkpoint holds them."""
    return hugging_face_layout(w, prefix=prefix, head=head, buffers=buffers, dtype=dtype)


def own_head(ctx: Context) -> dict[str, np.ndarray]:
    """The weights with an lm_head.weight of its own, not wte's table: a
    checkpoint saved with untied embeddings."""

    def build() -> dict[str, np.ndarray]:
        head = ctx.normal(CONFIG.vocab_size, CONFIG.n_embd, std=0.02)
        return {**weights(ctx), "lm_head.weight": head}

    return ctx.once("own head", build)


def hub(ctx: Context, dtype: type = np.float32) -> dict[str, np.ndarray]:
    return hugging_face(weights(ctx), prefix=False, head=False, buffers=True, dtype=dtype)


def saved(ctx: Context, head: bool = False) -> dict[str, np.ndarray]:
    return hugging_face(weights(ctx), prefix=True, head=head, buffers=False)


def styles(ctx: Context) -> list[tuple[str, dict[str, np.ndarray]]]:
    return [(HUB, hub(ctx)), (SAVED, saved(ctx)), (WITH_HEAD, saved(ctx, head=True))]


def write_checkpoint(directory: Path, config: GPT2Config, tensors: dict[str, np.ndarray]) -> Path:
    """config.json with Hugging Face's field names, and model.safetensors."""
    return write_safetensors_checkpoint(directory, config, tensors)


# -- calling the learner's functions -------------------------------------------


def layout(ctx: Context, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    fn = ctx.get("to_max_layout")
    state = ctx.call("to_max_layout(tensors)", fn, dict(tensors))
    if not isinstance(state, dict):
        raise Fail(
            f"to_max_layout returned {type(state).__name__}, expected a dict of name -> array."
        )
    return state


def checkpoint_error(ctx: Context, what: str, run: Callable[[], object], hint: str) -> str | None:
    """The message of the CheckpointError that `run` raises, or None if it returns.
    Any other exception fails the check with `hint`: a CheckpointError was due."""
    error_class = ctx.get("CheckpointError")

    def attempt() -> str | None:
        try:
            run()
        except error_class as error:
            return str(error)
        return None

    try:
        return ctx.call(what, attempt)
    except Fail as failure:
        raise Fail(f"{failure.message}\n   (expected a CheckpointError)", hint) from None


def expect_rejected(
    ctx: Context, state: dict[str, np.ndarray], what: str, bad: list[str], hint: str
) -> None:
    fn = ctx.get("check_against")
    message = checkpoint_error(
        ctx, "check_against(state, expected)", lambda: fn(state, dict(SHAPES)), hint
    )
    if message is None:
        raise Fail(f"check_against accepted {what}.", hint)
    if not any(name in message for name in bad):
        raise Fail(
            f"for {what}, check_against raised CheckpointError({message!r}), which does "
            f"not name {bad[0]}.",
            "Put the tensor's name in the message: that is what the reader must fix.",
        )


# -- to_max_layout -------------------------------------------------------------


def buffers_are_skipped(ctx: Context) -> None:
    kept = sorted(name for name in layout(ctx, hub(ctx)) if name.endswith(BUFFERS))
    if kept:
        raise Fail(
            f"to_max_layout kept {kept[0]}, a buffer (an old causal mask), not a parameter.",
            "Skip (`continue`) the names that end with one of NOT_PARAMETERS: the model has "
            "no such parameter, and builds its own mask.",
        )


def names_get_the_prefix(ctx: Context) -> None:
    want = set(BODY)
    for style, tensors in styles(ctx):
        state = layout(ctx, tensors)
        names = {n for n in state if not n.endswith(BUFFERS)} - {"lm_head.weight"}
        if names == want:
            continue
        bare = sorted(n for n in names if f"transformer.{n}" in want)
        doubled = sorted(n for n in names if n.startswith("transformer.transformer."))
        if bare:
            raise Fail(
                f"from {style}, to_max_layout kept the name {bare[0]}; the model's "
                f"parameter is transformer.{bare[0]}.",
                'Add the "transformer." prefix to every name that starts with neither '
                '"transformer." nor "lm_head.": the hub\'s gpt2 leaves it out.',
            )
        if doubled:
            raise Fail(
                f"from {style}, to_max_layout made the name {doubled[0]}.",
                'Add the "transformer." prefix only where it is missing: save_pretrained '
                "writes it.",
            )
        if "transformer.lm_head.weight" in names:
            raise Fail(
                f"from {style}, to_max_layout renamed lm_head.weight to "
                "transformer.lm_head.weight.",
                'The head is not part of the transformer: leave names that start with "lm_head." '
                "as they are.",
            )
        missing, extra = sorted(want - names), sorted(names - want)
        if missing and not extra:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise Fail(
                f"from {style}, to_max_layout dropped {missing[0]}{more}: a parameter of "
                "the model, not a mask buffer.",
                "Skip only the names that end with one of NOT_PARAMETERS, the dot included: "
                "h.0.attn.c_attn.bias contains attn.bias but is c_attn's bias, a parameter "
                "(a test with `in`, or a suffix without its leading dot, drops it too).",
            )
        raise Fail(
            f"from {style}, to_max_layout's names differ from the model's: "
            + "; ".join(
                part
                for part in (
                    f"missing {', '.join(missing[:3])}" if missing else "",
                    f"unexpected {', '.join(extra[:3])}" if extra else "",
                )
                if part
            ),
            'Only rename: add the "transformer." prefix where it is missing.',
        )


def head_is_tied(ctx: Context) -> None:
    for style, tensors in styles(ctx):
        state = layout(ctx, tensors)
        if "lm_head.weight" not in state:
            raise Fail(
                f"from {style}, to_max_layout returns no lm_head.weight: the model needs one.",
                TIE,
            )
        table = state.get("transformer.wte.weight", weights(ctx)["transformer.wte.weight"])
        if not np.array_equal(np.asarray(state["lm_head.weight"]), np.asarray(table)):
            raise Fail(f"from {style}, lm_head.weight is not the token embedding table.", TIE)
    own = own_head(ctx)
    state = layout(ctx, hugging_face(own, prefix=True, head=True, buffers=False))
    head = np.asarray(state.get("lm_head.weight"))
    if head.shape == own["lm_head.weight"].shape and np.array_equal(head, own["lm_head.weight"]):
        return
    what = "a checkpoint that stores its own lm_head.weight, different from wte.weight"
    if "lm_head.weight" not in state:
        raise Fail(
            f"from {what}, to_max_layout returns no lm_head.weight.",
            'Keep names that start with "lm_head." as they are.',
        )
    if head.shape == own["transformer.wte.weight"].shape and np.array_equal(
        head, own["transformer.wte.weight"]
    ):
        raise Fail(
            f"from {what}, to_max_layout replaced it by the token embedding table: the "
            "checkpoint's own head is lost.",
            "Tie only when the checkpoint has no lm_head.weight and has wte.weight (`and`): "
            "a head the checkpoint stores is its own, and stays as it is.",
        )
    if head.shape == own["lm_head.weight"].T.shape and np.array_equal(
        head, own["lm_head.weight"].T
    ):
        raise Fail(
            f"from {what}, to_max_layout transposed lm_head.weight to {list(head.shape)}; "
            f"the model's is {list(own['lm_head.weight'].shape)}.",
            "Transpose only the Conv1D weights (CONV1D_LAYERS): the head, like the "
            "embedding tables, is stored [vocab_size, n_embd] in both layouts.",
        )
    raise Fail(
        f"from {what}, to_max_layout changed lm_head.weight (shape {list(head.shape)}).",
        "lm_head.weight is [vocab_size, n_embd] in both layouts: only convert it to float32.",
    )


def conv1d_weights_are_transposed(ctx: Context) -> None:
    state = layout(ctx, hub(ctx))
    for name, want in weights(ctx).items():
        if name == "lm_head.weight" or name not in state:
            continue
        got = np.asarray(state[name])
        if got.shape == want.shape and np.array_equal(got, want):
            continue
        if got.shape == want.T.shape and np.array_equal(got, want.T):
            if not is_conv1d(name):
                raise Fail(
                    f"{name} was transposed to {list(got.shape)}; the model's is {list(want.shape)}.",
                    "Transpose only the Conv1D weights (CONV1D_LAYERS). The embedding tables, "
                    "the biases and the layer norms are stored as the model wants them.",
                )
            if got.shape == want.shape:
                raise Fail(
                    f"{name} holds the checkpoint's [in, out] matrix, not transposed. "
                    "It is square, so the shape could not tell.",
                    TRANSPOSE,
                )
            raise Fail(
                f"{name} has Hugging Face's Conv1D shape [in, out] = {list(got.shape)}; the "
                f"model's Linear is [out, in] = {list(want.shape)}.",
                TRANSPOSE,
            )
        if is_conv1d(name) and np.array_equal(got, np.reshape(want.T, want.shape)):
            raise Fail(
                f"{name} has the right shape, {list(got.shape)}, but its numbers are in the "
                "wrong places: the [in, out] matrix was reshaped, not transposed.",
                "A reshape keeps the numbers in their memory order and only regroups them; a "
                "transpose moves entry [i, j] to [j, i]. " + TRANSPOSE,
            )
        raise Fail(
            f"{name} differs from the checkpoint's tensor (shape {list(got.shape)}, "
            f"expected {list(want.shape)}).",
            "Convert to float32 and transpose the Conv1D weights; change nothing else.",
        )


def everything_is_float32(ctx: Context) -> None:
    for dtype in (np.float32, np.float16):
        state = layout(ctx, hub(ctx, dtype))
        for name, array in state.items():
            got = np.asarray(array).dtype
            if got != np.float32:
                raise Fail(
                    f"from a {np.dtype(dtype).name} checkpoint, to_max_layout returned {name} "
                    f"as {got}; the model's parameters are float32.",
                    "Convert every tensor, whatever its name, to float32 (np.asarray with "
                    "dtype=): checkpoints are also saved in float16, and MAX does not "
                    "convert when loading.",
                )


# -- check_against -------------------------------------------------------------


def accepts_a_fit_and_names_a_missing_tensor(ctx: Context) -> None:
    w = weights(ctx)
    fn = ctx.get("check_against")
    fits = (
        "Raise only for a missing tensor, a shape that differs or an extra tensor; "
        "compare the shapes as tuples: tuple(state[name].shape) != tuple(shape)."
    )
    message = checkpoint_error(
        ctx, "check_against(state, expected)", lambda: fn(dict(w), dict(SHAPES)), fits
    )
    if message is not None:
        raise Fail(f"check_against rejected a checkpoint that fits the model: {message}", fits)
    gone = "transformer.h.1.mlp.c_fc.bias"
    expect_rejected(
        ctx,
        {n: a for n, a in w.items() if n != gone},
        f"a checkpoint without {gone}",
        [gone],
        "Test `name not in state` first (before reading state[name]) and raise "
        "CheckpointError naming the tensor.",
    )


def names_a_tensor_of_the_wrong_shape(ctx: Context) -> None:
    w = weights(ctx)
    bad = "transformer.h.0.mlp.c_fc.weight"
    expect_rejected(
        ctx,
        {**w, bad: np.ascontiguousarray(w[bad].T)},
        f"{bad} of shape {list(w[bad].T.shape)} where the model wants {list(w[bad].shape)}",
        [bad],
        "Compare the state's shape with the expected one, both as tuples (a list never "
        "equals a tuple; the same number of entries in another arrangement is another "
        "shape), and raise CheckpointError naming the tensor, with both shapes.",
    )


def names_an_extra_tensor(ctx: Context) -> None:
    w = weights(ctx)
    deeper = ctx.weights_for(model_shapes(small_config(n_layer=3), "transformer."))
    extra = {n: a for n, a in deeper.items() if n.startswith("transformer.h.2.")}
    expect_rejected(
        ctx,
        {**w, **extra},
        "a checkpoint with a third layer (transformer.h.2.*) for a 2-layer model",
        sorted(extra),
        "The names in the state that the model lacks are set(state) - set(expected): "
        "raise CheckpointError naming the first of them (sorted).",
    )


# -- load_into, end to end -----------------------------------------------------


def fresh_model(config: GPT2Config) -> MaxGPT2LMHeadModel:
    from max.experimental import functional as F

    with F.lazy():  # its random weights are replaced at once: skip computing them
        return MaxGPT2LMHeadModel(config)


def load(ctx: Context, model: MaxGPT2LMHeadModel, directory: Path, style: str) -> None:
    try:
        ctx.call(f"load_into(model, <{style}>)", ctx.get("load_into"), model, directory)
    except Fail as failure:
        hint = "load_into runs to_max_layout, then check_against, then load_state_dict."
        if "contiguous" in failure.message:
            hint = (
                "MAX copies only C-contiguous arrays, and array.T is a view of the same "
                "memory read in another order: np.ascontiguousarray makes the copy."
            )
        raise Fail(failure.message, hint) from None


def logits_match(ctx: Context) -> None:
    w = weights(ctx)
    ids = ctx.token_ids(CONFIG.vocab_size, BATCH, SEQ)
    n, heads, eps = CONFIG.n_layer, CONFIG.n_head, CONFIG.layer_norm_epsilon
    square = {name: a.T if name.endswith(".attn.c_proj.weight") else a for name, a in w.items()}
    mistakes = {
        "attn.c_proj.weight is not transposed: it is square ([n_embd, n_embd]), so its shape "
        "fits either way. " + TRANSPOSE: ref.lm_logits(square, ids, n, heads, eps),
    }
    want = ref.lm_logits(w, ids, n, heads, eps)
    for style, tensors in styles(ctx):
        with tempfile.TemporaryDirectory() as folder:
            directory = write_checkpoint(Path(folder), CONFIG, tensors)
            model = fresh_model(CONFIG)
            load(ctx, model, directory, style)
        out = ctx.call("model(input_ids)", model, tensor(ids))
        expect_close(out, want, f"model(input_ids) after load_into from {style}", mistakes)


def mismatch_is_reported(ctx: Context) -> None:
    narrow = small_config(n_embd=32)
    tensors = hugging_face(
        ctx.weights_for(model_shapes(narrow, "transformer.")),
        prefix=False,
        head=False,
        buffers=True,
    )
    message = load_into_error(
        ctx,
        tensors,  # config.json says n_embd=64
        "<checkpoint>",
        "check_against must compare every shape, so that a checkpoint that does not fit "
        "raises CheckpointError before load_state_dict sees it.",
    )
    expect_first_named(message, "a checkpoint of n_embd=32 whose config.json says n_embd=64")
    # Without wte.weight there is nothing to tie lm_head to: to_max_layout must
    # leave both out, so that check_against names the missing one.
    message = load_into_error(
        ctx,
        {k: v for k, v in hub(ctx).items() if k != "wte.weight"},
        "<checkpoint without wte.weight>",
        "Tie lm_head to wte only when wte.weight is there and lm_head.weight is not "
        "(`and`): without wte.weight, check_against reports it missing.",
    )
    expect_first_named(message, "a checkpoint without wte.weight")


def load_into_error(
    ctx: Context, tensors: dict[str, np.ndarray], what: str, hint: str
) -> str | None:
    """The CheckpointError message of load_into on a CONFIG checkpoint of `tensors`."""
    with tempfile.TemporaryDirectory() as folder:
        directory = write_checkpoint(Path(folder), CONFIG, tensors)
        model = fresh_model(CONFIG)
        load_into = ctx.get("load_into")
        return checkpoint_error(
            ctx, f"load_into(model, {what})", lambda: load_into(model, directory), hint
        )


def expect_first_named(message: str | None, what: str) -> None:
    """load_into refused `what`, naming transformer.wte.weight (the first that does not fit)."""
    if message is None:
        raise Fail(f"load_into accepted {what}.", "check_against must compare every shape.")
    first = "transformer.wte.weight"
    if first not in message:
        raise Fail(
            f"for {what}, load_into raised CheckpointError({message!r}), which does not name "
            f"{first}, the model's first tensor that does not fit.",
            "Go through `expected` in order and raise at the first tensor that is missing or "
            "of the wrong shape, naming it.",
        )


# -- the given code: load_config and load_pretrained ---------------------------

# Unlike CONFIG in every field load_config reads, so a config.json ignored or
# read wrongly shows in the logits.
OTHER = small_config(
    vocab_size=89, n_positions=12, n_embd=32, n_layer=1, n_head=2, layer_norm_epsilon=1e-4
)


GIVEN = (
    "load_pretrained and load_config are given code, written for you: compare your copies "
    "with the skeleton's (steps/step_15.py as it came)."
)


def load_pretrained_works(ctx: Context) -> None:
    """The functions the file gives (it did not ask for them) still work: a
    checkpoint directory becomes a model of its config.json's size, with its
    weights, and a directory without a config.json is refused by name."""
    try:
        load_pretrained_end_to_end(ctx)
    except Fail as failure:
        raise Fail(failure.message, failure.hint or GIVEN) from None


def load_pretrained_end_to_end(ctx: Context) -> None:
    w = tied_lm_weights(ctx, OTHER)
    tensors = hugging_face(w, prefix=False, head=False, buffers=True)
    ids = ctx.token_ids(OTHER.vocab_size, BATCH, 5)
    with tempfile.TemporaryDirectory() as folder:
        directory = write_checkpoint(Path(folder), OTHER, tensors)
        model = ctx.call("load_pretrained(directory)", ctx.get("load_pretrained"), directory)
        (directory / "config.json").unlink()
        message = checkpoint_error(
            ctx,
            "load_config(<a directory without config.json>)",
            lambda: ctx.get("load_config")(directory),
            GIVEN,
        )
    out = ctx.call("model(input_ids)", model, tensor(ids))
    want = ref.lm_logits(w, ids, OTHER.n_layer, OTHER.n_head, OTHER.layer_norm_epsilon)
    expect_close(
        out,
        want,
        "logits of load_pretrained(<checkpoint of another size>)",
        hint=GIVEN,
    )
    if message is None or "config.json" not in message:
        raise Fail(
            f"load_config on a directory without config.json raised {message!r}, which does "
            "not name config.json.",
            GIVEN,
        )


# Hint ladders: what to look at; the API or the shapes; the line.
LAYOUT_LOOP = """```python
for name, array in tensors.items():
    if name.endswith(NOT_PARAMETERS):
        continue
    if not name.startswith(("transformer.", "lm_head.")):
        name = "transformer." + name
    array = np.asarray(array, dtype=np.float32)
    if name.endswith(".weight") and any(f".{layer}." in name for layer in CONV1D_LAYERS):
        array = np.ascontiguousarray(array.T)
    state[name] = array
```"""
TIE_LINES = """```python
if "lm_head.weight" not in state and "transformer.wte.weight" in state:
    state["lm_head.weight"] = state["transformer.wte.weight"]
```"""
SHAPE_LOOP = """```python
for name, shape in expected.items():
    if name not in state:
        raise CheckpointError(f"the checkpoint has no tensor {name} (shape {list(shape)}).")
    found = tuple(state[name].shape)
    if found != tuple(shape):
        raise CheckpointError(f"tensor {name} has shape {list(found)}, expected {list(shape)}.")
```"""
EXTRA_LINES = """```python
extra = sorted(set(state) - set(expected))
if extra:
    raise CheckpointError(f"the checkpoint has a tensor the model does not: {extra[0]}.")
```"""
BUFFER_HINTS = (
    "A mask buffer (`h.N.attn.bias`, `h.N.attn.masked_bias`) came through. Buffers are not "
    "parameters: the model has no such name, and builds its own causal mask (step 02).",
    "`str.endswith` accepts a tuple of suffixes and is true when any of them matches; "
    "`NOT_PARAMETERS` is that tuple. `continue` goes on with the next name of the loop.",
    LAYOUT_LOOP,
)
PREFIX_HINTS = {
    "dropped": (
        "A parameter went missing: the test that skips the mask buffers skips more than "
        "them. Which names end with `.attn.bias`, and which only contain `attn.bias`?",
        "`h.0.attn.c_attn.bias` is c_attn's bias, a parameter. Only a full suffix, dot "
        "included, picks out the buffers: `str.endswith` with the `NOT_PARAMETERS` tuple.",
        LAYOUT_LOOP,
    ),
    "transformer.transformer": (
        "The prefix was added twice: save_pretrained's files already carry it.",
        "Add `transformer.` only to a name that starts with neither `transformer.` nor "
        "`lm_head.`; `str.startswith` accepts a tuple too.",
        LAYOUT_LOOP,
    ),
    "transformer.lm_head": (
        "The head got the body's prefix. `lm_head` is not part of `transformer`: the "
        "model calls it `lm_head.weight`.",
        "Leave names that start with `lm_head.` as they are: test both prefixes, "
        "`str.startswith` with a tuple.",
        LAYOUT_LOOP,
    ),
    "": (
        "The names must be the model's parameter names. The hub's gpt2 stores `wte.weight`, "
        "`h.0.ln_1.weight`...; the model's body is the attribute `transformer`, so its "
        "names start with `transformer.`.",
        'Add the prefix where it is missing: `"transformer." + name` for a name that starts '
        "with neither `transformer.` nor `lm_head.` (`str.startswith` takes a tuple).",
        LAYOUT_LOOP,
    ),
}
CONV1D_HINTS = {
    "reshaped": (
        "The shape is right but the numbers moved to the wrong places: a reshape is not "
        "a transpose.",
        "Reshaping `[in, out]` to `[out, in]` keeps the memory order and regroups it; "
        "transposing (`array.T`) moves entry `[i, j]` to `[j, i]`. Then "
        "`np.ascontiguousarray` copies it into C order.",
        LAYOUT_LOOP,
    ),
    "was transposed to": (
        "A tensor that is not a Conv1D weight was transposed. Only the weights of the "
        "four layers of `CONV1D_LAYERS` are stored `[in, out]`; the embedding tables, "
        "biases and layer norms already have the model's layout.",
        "Transpose when the name ends in `.weight` and contains `.{layer}.` for one "
        "`layer` of `CONV1D_LAYERS` (`any(...)` over the tuple).",
        LAYOUT_LOOP,
    ),
    "": (
        "Hugging Face's GPT-2 stores its four projections as Conv1D, weights `[in, out]`; "
        "MAX's `Linear` wants `[out, in]`. `attn.c_proj` is square, so only its values "
        "tell.",
        "Transpose the weights (not the biases) of the layers in `CONV1D_LAYERS`, then "
        "`np.ascontiguousarray` (MAX copies only C-contiguous arrays).",
        LAYOUT_LOOP,
    ),
}
HEAD_HINTS = {
    "transposed lm_head": CONV1D_HINTS["was transposed to"],
    "replaced it": (
        "A checkpoint that stores its own `lm_head.weight` lost it: the tie overwrote it "
        "with the embedding table. Tie only what the checkpoint does not store.",
        "After the loop: when `lm_head.weight` is not in the state *and* "
        "`transformer.wte.weight` is, the head is the table. Both conditions, joined by "
        "`and`.",
        TIE_LINES,
    ),
    "": (
        "The model needs `lm_head.weight`, and most checkpoints do not store it: it is "
        "the token embedding table, stored once as `wte.weight`.",
        "After the loop, when the state has no `lm_head.weight` (and has the table), put "
        "the state's `transformer.wte.weight` array under that name too.",
        TIE_LINES,
    ),
}
FLOAT32_HINTS = (
    "Every tensor must come out float32, the dtype of the model's parameters, also from "
    "a float16 checkpoint: `load_state_dict` does not convert.",
    "`np.asarray(a, dtype=...)` converts (and copies nothing when the dtype is already "
    "right). Convert every tensor, before the transpose, not only some of them.",
    LAYOUT_LOOP,
)
MISSING_HINTS = {
    "rejected a checkpoint that fits": (
        "`check_against` refused a checkpoint that fits. Which comparison is true when it "
        "should not be?",
        "The shapes come as tuples in `expected`; compare them with the state's shapes as "
        "tuples too (a list never equals a tuple). Raise only for a missing name, a "
        "different shape or an extra name.",
        SHAPE_LOOP,
    ),
    "does not name": (
        "The error is raised, but its message does not say which tensor. The reader has "
        "to know what to fix.",
        "Put the name (and the shapes) in the message with an f-string: "
        '`CheckpointError(f"... {name} ...")`.',
        SHAPE_LOOP,
    ),
    "": (
        "A tensor the model needs is missing from the state, and `check_against` must say "
        "so with a `CheckpointError` naming it, before anything reads `state[name]` (a "
        "`KeyError` says nothing about the checkpoint).",
        "Go through `expected` (name -> shape) in order; test `name not in state` first.",
        SHAPE_LOOP,
    ),
}
SHAPE_HINTS = {
    "does not name": MISSING_HINTS["does not name"],
    "": (
        "A tensor of the wrong shape was accepted. Loading it would fail later, inside "
        "MAX, or (a square matrix) load wrong numbers.",
        "For each expected name: the state's array's `.shape` as a tuple against the "
        "expected tuple; raise `CheckpointError` with the name and both shapes.",
        SHAPE_LOOP,
    ),
}
EXTRA_HINTS = {
    "does not name": MISSING_HINTS["does not name"],
    "": (
        "A tensor the model does not have was accepted: a checkpoint of a deeper or "
        "different model. After the loop over `expected`, look at the names left over.",
        "Set difference: the state's names minus the expected names; `sorted` gives the "
        "first of them to name.",
        EXTRA_LINES,
    ),
}
LOAD_HINTS = {
    "contiguous": (
        "MAX refused an array that is not C-contiguous. `array.T` is a view: the same "
        "memory read in another order.",
        "`np.ascontiguousarray(a)` copies `a` into C order (and does nothing if it already is).",
        LAYOUT_LOOP,
    ),
    "square": CONV1D_HINTS[""],
    "": (
        "After `load_into`, the model's logits differ from GPT-2's. The checks above test "
        "`to_max_layout` and `check_against` one by one; this one loads three layouts end "
        "to end.",
        "`load_into` is given: `to_max_layout`, `check_against` with the model's shapes, "
        "`load_state_dict`. Each tensor must reach the model renamed, float32, Conv1D "
        "weights transposed, nothing else changed.",
        LAYOUT_LOOP,
    ),
}
MISMATCH_HINTS = {
    "(`and`)": (
        "Without `wte.weight` in the checkpoint, `to_max_layout` still tried to tie the "
        "head. The tie needs two conditions.",
        "Tie when the state has no `lm_head.weight` *and* has `transformer.wte.weight`; "
        "otherwise leave it, and `check_against` reports the missing table by name.",
        TIE_LINES,
    ),
    "": (
        "A checkpoint whose tensors do not fit its `config.json` must be refused, with a "
        "`CheckpointError` naming the first tensor that does not fit.",
        "`check_against` goes through `expected` in the model's order and compares every shape.",
        SHAPE_LOOP,
    ),
}
GIVEN_HINTS = (
    "`load_pretrained` and `load_config` are given code: the file did not ask you to "
    "change them. Compare yours with the skeleton's.",
    "`load_config` keeps the fields of `config.json` that `GPT2Config` has; "
    "`load_pretrained` builds the model under `F.lazy()` from that config, then "
    "`load_into`.",
    "Restore them from the skeleton: `git diff steps/step_15.py`, or "
    "`pixi run reset 15` after saving your own lines.",
)

STEP = Step(
    number=15,
    typical=3,  # seconds, slowest check: writing and loading three checkpoints
    required={
        "CheckpointError": [],
        "to_max_layout": [],
        "check_against": [],
        "load_into": [],
    },
    checks=[
        Check("mask buffers (h.N.attn.bias) are not loaded", buffers_are_skipped, BUFFER_HINTS),
        Check(
            "names get the transformer. prefix where it is missing",
            names_get_the_prefix,
            PREFIX_HINTS,
        ),
        Check(
            "lm_head.weight is tied to wte.weight when absent, kept when stored",
            head_is_tied,
            HEAD_HINTS,
        ),
        Check(
            "Conv1D weights are transposed to [out, in], nothing else",
            conv1d_weights_are_transposed,
            CONV1D_HINTS,
        ),
        Check(
            "every tensor comes out float32 (also from float16)",
            everything_is_float32,
            FLOAT32_HINTS,
        ),
        Check(
            "check_against accepts a fit and names a missing tensor",
            accepts_a_fit_and_names_a_missing_tensor,
            MISSING_HINTS,
        ),
        Check(
            "check_against names a tensor of the wrong shape",
            names_a_tensor_of_the_wrong_shape,
            SHAPE_HINTS,
        ),
        Check("check_against names an extra tensor", names_an_extra_tensor, EXTRA_HINTS),
        Check("logits after load_into match GPT-2's, for each layout", logits_match, LOAD_HINTS),
        Check(
            "a checkpoint that does not fit its config.json is refused",
            mismatch_is_reported,
            MISMATCH_HINTS,
        ),
        Check(
            "load_pretrained builds a model from a checkpoint's config.json",
            load_pretrained_works,
            GIVEN_HINTS,
        ),
    ],
)

MISTAKES = [
    m(
        "lm_head tied with `or`",
        '"lm_head.weight" not in state and "transformer.wte.weight" in state',
        '"lm_head.weight" not in state or "transformer.wte.weight" in state',
        "(`and`)",
    ),
    m(
        "given load_config drops a field",
        "if k in known}",
        'if k in known and k != "n_layer"}',
        "given code",
    ),
    m(
        "no transpose",
        "array = np.ascontiguousarray(array.T)",
        "array = np.ascontiguousarray(array)",
        "[in, out]",
    ),
    m(
        "every 2-D weight transposed",
        'if name.endswith(".weight") and any(f".{layer}." in name for layer in CONV1D_LAYERS):',
        "if array.ndim == 2:",
        "only the Conv1D weights",
    ),
    m(
        "attn.c_proj left out",
        'CONV1D_LAYERS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")',
        'CONV1D_LAYERS = ("attn.c_attn", "mlp.c_fc", "mlp.c_proj")',
        "square",
    ),
    m(
        "transposed view, not contiguous",
        "array = np.ascontiguousarray(array.T)",
        "array = array.T",
        "contiguous",
    ),
    m(
        "no prefix",
        'name = "transformer." + name',
        "pass",
        "prefix",
    ),
    m(
        "prefix on lm_head too",
        'if not name.startswith(("transformer.", "lm_head.")):',
        'if not name.startswith("transformer."):',
        "lm_head",
    ),
    m(
        "buffers kept",
        "continue  # a mask buffer",
        "pass  # a mask buffer",
        "buffer",
    ),
    m(
        "head not tied",
        'state["lm_head.weight"] = state["transformer.wte.weight"]',
        "pass",
        "tied",
    ),
    m(
        "float64",
        "np.asarray(array, dtype=np.float32)",
        "np.asarray(array, dtype=np.float64)",
        "float32",
    ),
    m(
        "dtype kept",
        "np.asarray(array, dtype=np.float32)",
        "np.asarray(array)",
        "float16",
    ),
    m("shapes not compared", "if found != tuple(shape):", "if False:", "shape"),
    m(
        "missing tensor not caught",
        "if name not in state:",
        "if False:",
        "name not in state",
    ),
    m("extra tensors ignored", "if extra:", "if False:", "set(state) - set(expected)"),
    m(
        "message without the name",
        'f"the checkpoint has no tensor {name} (shape {list(shape)})."',
        '"a tensor is missing."',
        "does not name",
    ),
    m(
        "own head replaced by wte",
        '"lm_head.weight" not in state and "transformer.wte.weight" in state',
        '"transformer.wte.weight" in state',
        "replaced it by the token embedding table",
    ),
    m(
        "every bias skipped",
        "if name.endswith(NOT_PARAMETERS):",
        'if name.endswith("bias"):',
        "dropped",
    ),
    m(
        "buffers matched with `in`",
        "if name.endswith(NOT_PARAMETERS):",
        'if "attn.bias" in name or "masked_bias" in name:',
        "dropped transformer.h.0.attn.c_attn.bias",
    ),
    m(
        "reshaped, not transposed",
        "array = np.ascontiguousarray(array.T)",
        "array = array.reshape(array.shape[::-1])",
        "reshaped, not transposed",
    ),
    Mutant(
        "float32 only for the Conv1D weights",
        (
            ("np.asarray(array, dtype=np.float32)", "np.asarray(array)"),
            ("np.ascontiguousarray(array.T)", "np.ascontiguousarray(array.T, dtype=np.float32)"),
        ),
        "from a float16 checkpoint",
    ),
    m(
        "shapes compared by size",
        "if found != tuple(shape):",
        "if np.prod(found) != np.prod(shape):",
        "accepted transformer.h.0.mlp.c_fc.weight",
    ),
]
