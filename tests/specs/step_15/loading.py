"""Step 15's checks of check_against and load_pretrained: a loaded model gives GPT-2's logits, a mismatch is named, a whole checkpoint loads end to end."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from solutions.solution_01 import GPT2Config
from solutions.solution_13 import MaxGPT2LMHeadModel
from tests import reference_gpt2 as ref
from tests.checker import Context, Fail, expect_close, tensor
from tests.specs.model_parts import BATCH, SEQ, model_shapes, small_config, tied_lm_weights

from .layout import (
    CONFIG,
    TRANSPOSE,
    checkpoint_error,
    hub,
    hugging_face,
    styles,
    weights,
    write_checkpoint,
)


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
        out = ctx.run_lazily("model(input_ids)", model, tensor(ids))
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
    out = ctx.run_lazily("model(input_ids)", model, tensor(ids))
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
