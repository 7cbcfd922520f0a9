"""Step 15's checks of to_max_layout: names, buffers, the tied head, Conv1D transposes, dtypes, and the errors for a checkpoint that does not fit."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from common.random_checkpoint import hugging_face_layout, write_safetensors_checkpoint
from solutions.solution_01 import GPT2Config
from tests.checker import Context, Fail
from tests.specs.model_parts import lm_shapes, model_shapes, small_config, tied_lm_weights

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
) -> str:
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
    return message


# A shape as a message may write it: [64, 256], (64, 256), 64x256, 64 × 256.
SHAPE_IN_TEXT = re.compile(r"\d+(?:\s*(?:,|x|×)\s*\d+)+")


def shapes_in(message: str) -> set[tuple[int, ...]]:
    return {tuple(int(d) for d in re.findall(r"\d+", m)) for m in SHAPE_IN_TEXT.findall(message)}


def expect_both_shapes(message: str, what: str, found: tuple, wanted: tuple) -> None:
    """The message of a shape mismatch gives the checkpoint's shape and the model's."""
    given = shapes_in(message)
    left_out = [
        f"the shape {whose} ({list(shape)})"
        for whose, shape in (("the checkpoint has", found), ("the model expects", wanted))
        if tuple(shape) not in given
    ]
    if left_out:
        raise Fail(
            f"for {what}, check_against raised CheckpointError({message!r}), which names the "
            f"tensor but leaves out {' and '.join(left_out)}.",
            "Give both shapes in the message, the one the checkpoint has and the one the "
            "model expects: with only the name, the reader cannot tell a transposed weight "
            "from a checkpoint of another size.",
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
    what = f"{bad} of shape {list(w[bad].T.shape)} where the model wants {list(w[bad].shape)}"
    message = expect_rejected(
        ctx,
        {**w, bad: np.ascontiguousarray(w[bad].T)},
        what,
        [bad],
        "Compare the state's shape with the expected one, both as tuples (a list never "
        "equals a tuple; the same number of entries in another arrangement is another "
        "shape), and raise CheckpointError naming the tensor, with both shapes.",
    )
    expect_both_shapes(message, what, w[bad].T.shape, w[bad].shape)


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
