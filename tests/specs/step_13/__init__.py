"""Checks for step 13: MaxGPT2LMHeadModel."""

import numpy as np

from tests import reference_gpt2 as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.specs.model_parts import BATCH, SEQ, lm_shapes, small_config, tied_lm_weights

CONFIG = small_config()
SHAPES = lm_shapes(CONFIG)


def tied_weights(ctx: Context) -> dict[str, np.ndarray]:
    return tied_lm_weights(ctx, CONFIG)


def model_parts(ctx: Context):
    """A fresh model, its lm_head, and its parameters by name."""
    model = ctx.build("MaxGPT2LMHeadModel", CONFIG)
    head = getattr(model, "lm_head", None)
    if head is None or getattr(model, "transformer", None) is None:
        raise Fail(
            "MaxGPT2LMHeadModel has no `transformer` or no `lm_head` attribute.",
            "Keep the attribute names of the skeleton: the checkpoint's tensors are named "
            "transformer.* and lm_head.weight.",
        )
    return model, head, ctx.call("model.parameters", lambda: dict(model.parameters))


def article(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def parameters(ctx: Context) -> None:
    from max.experimental.nn import Linear

    model, head, params = model_parts(ctx)
    if not isinstance(head, Linear):
        raise Fail(
            f"lm_head is {article(type(head).__name__)}, not a Linear: the head maps each hidden "
            "state (n_embd) to one score per vocabulary entry (vocab_size).",
            "Build lm_head as a Linear from n_embd to vocab_size without a bias; the tie "
            "then replaces only its weight.",
        )
    if "lm_head.bias" in params:
        raise Fail(
            "lm_head has a bias (lm_head.bias): GPT-2's head has none, and a tied head "
            "could not share one with the embedding table.",
            "Linear adds a bias unless it is built with bias=False.",
        )
    head_weight = params.get("lm_head.weight")
    if head_weight is not None and head_weight is params.get("transformer.wpe.weight"):
        raise Fail(
            "lm_head.weight is the position table (transformer.wpe.weight), one row per "
            "position: the head scores tokens, so it shares the token table, wte.",
            "Tie the head to transformer.wte's weight, the table with one row per token.",
        )
    shape = tuple(int(d) for d in getattr(head_weight, "shape", ()))
    if shape == (CONFIG.n_embd, CONFIG.vocab_size):
        raise Fail(
            f"lm_head.weight has shape {list(shape)}, the embedding table transposed; "
            f"Linear stores its weight as [out, in] = [{CONFIG.vocab_size}, {CONFIG.n_embd}].",
            "The table is already [vocab_size, n_embd], exactly Linear's [out, in] layout "
            "for a head from n_embd to vocab_size: tie it as it is, not transposed.",
        )
    ctx.load_weights(model, SHAPES, tied_weights(ctx))


def head_is_tied(ctx: Context) -> None:
    """Tied means one tensor under two names: equal numbers are not enough."""
    _, _, params = model_parts(ctx)
    head, table = params["lm_head.weight"], params["transformer.wte.weight"]
    if head is table:
        return
    same_numbers = ctx.call(
        "reading the weights",
        lambda: np.array_equal(np.asarray(head.to_numpy()), np.asarray(table.to_numpy())),
    )
    if same_numbers:
        raise Fail(
            "A new model's lm_head.weight holds the same numbers as transformer.wte.weight, "
            "but it is a copy, not the same tensor: the two are not tied.",
            "Any arithmetic (a * 1.0, a + 0) or a new Tensor makes a copy. Assign the table "
            "tensor itself to the head's weight, with no operation on it, so that both "
            "names hold one object.",
        )
    raise Fail(
        "A new model's lm_head.weight differs from transformer.wte.weight: the head is not "
        "tied to the token embedding table.",
        "After building lm_head, replace its weight by the embedding table's weight tensor "
        "(an assignment in __init__).",
    )


FINAL_NORM = "final layer norm"


def logits(ctx: Context) -> None:
    model = ctx.build("MaxGPT2LMHeadModel", CONFIG)
    w = ctx.load_weights(model, SHAPES, tied_weights(ctx))
    ids = ctx.token_ids(CONFIG.vocab_size, BATCH, SEQ)
    n, heads, eps = CONFIG.n_layer, CONFIG.n_head, CONFIG.layer_norm_epsilon
    hidden = ref.model(w, ids, n, heads, eps, "transformer.")
    table = w["lm_head.weight"].T
    want = ref.lm_logits(w, ids, n, heads, eps)
    ln_f = w["transformer.ln_f.weight"], w["transformer.ln_f.bias"]
    unnormalized = ref.embeddings(w, ids, "transformer.")
    for i in range(n):
        unnormalized = ref.block(w, unnormalized, heads, eps, f"transformer.h.{i}.")
    mistakes = {
        "These are the hidden states: apply lm_head to get one logit per vocabulary entry.": hidden,
        "Softmax is applied: the model returns raw logits; sampling applies softmax later.": ref.softmax(
            want
        ),
        f"The {FINAL_NORM} ln_f is applied twice: the transformer already ends with it, so "
        "its output goes to the head as it is.": ref.layer_norm(hidden, *ln_f, eps) @ table,
        f"The {FINAL_NORM} ln_f is skipped: the head reads the blocks' output before ln_f. "
        "Call the transformer itself, which ends with ln_f.": unnormalized @ table,
        "These are only the last position's logits ([batch, vocab_size]): the model returns "
        "logits for every position, [batch, seq, vocab_size]; generation (step 14) picks the "
        "last row.": want[:, -1],
    }
    out = ctx.run_lazily("MaxGPT2LMHeadModel.forward", model, tensor(ids))
    expect_close(
        out,
        want,
        "MaxGPT2LMHeadModel(input_ids)",
        mistakes,
        hint="forward: the transformer on the token ids, then the head on what it returns, "
        "and nothing else.",
    )


STEP = Step(
    number=13,
    required={"MaxGPT2LMHeadModel": ["__init__", "forward"]},
    checks=[
        Check(
            "transformer.* and lm_head (no bias) named like GPT-2's",
            parameters,
        ),
        Check(
            "lm_head is tied to the token embedding table (one tensor)",
            head_is_tied,
        ),
        Check("logits match GPT-2's [batch, seq, vocab_size]", logits),
    ],
)
