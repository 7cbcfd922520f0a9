"""Checks for step 13: MaxGPT2LMHeadModel."""

import numpy as np

from tests import reference as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.mistakes import Mutant, m
from tests.specs.common import BATCH, SEQ, lm_shapes, small_config, tied_lm_weights

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
    out = ctx.call("MaxGPT2LMHeadModel.forward", model, tensor(ids))
    expect_close(
        out,
        want,
        "MaxGPT2LMHeadModel(input_ids)",
        mistakes,
        hint="forward: the transformer on the token ids, then the head on what it returns, "
        "and nothing else.",
    )


# Hint ladders: what to look at; the API or the shapes; the line.
PARAMETERS_HINTS = {
    "not a linear": (
        "`lm_head` must be a layer that maps a hidden state to scores: a `Linear`, not "
        "the embedding module itself (an `Embedding` looks rows up by id).",
        "`Linear(in_dim, out_dim, bias=False)`, from `n_embd` to `vocab_size`; the tie "
        "(next TODO) replaces only its `weight`.",
        "```python\nself.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)\n"
        "self.lm_head.weight = self.transformer.wte.weight\n```",
    ),
    "lm_head has a bias": (
        "The head has a bias, `lm_head.bias`. GPT-2's head has none: it is the "
        "embedding table used backwards, and the table has no bias to share.",
        "`Linear(in_dim, out_dim, bias=...)` adds a bias by default. The head maps "
        "`n_embd` in to `vocab_size` out.",
        "```python\nself.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)\n```",
    ),
    "position table": (
        "The head is tied to the wrong table. `wpe` has one row per *position*; the head "
        "scores *tokens*, so it shares the table with one row per token.",
        "`transformer.wte.weight` is `[vocab_size, n_embd]`, one row per token; "
        "`transformer.wpe.weight` is `[n_positions, n_embd]`.",
        "```python\nself.lm_head.weight = self.transformer.wte.weight\n```",
    ),
    "table transposed": (
        "The head's weight came out `[n_embd, vocab_size]`: the table was transposed "
        "before the tie. Look at the layout `Linear` stores.",
        "`Linear` stores `[out, in]` and computes `x @ weightᵀ`. The head goes from "
        "`n_embd` to `vocab_size`, so its weight is `[vocab_size, n_embd]`: the shape "
        "of `wte`'s table, untouched.",
        "```python\nself.lm_head.weight = self.transformer.wte.weight\n```",
    ),
    "": (
        "The names or shapes of the parameters differ from GPT-2's. The body must be the "
        "attribute `transformer` (every body parameter then starts with `transformer.`), "
        "the head the attribute `lm_head`.",
        "The body is step 12's `GPT2Model`, built from the config. The head is a `Linear` "
        "from `n_embd` to `vocab_size` without bias, so its weight is `[vocab_size, n_embd]`.",
        "```python\nself.transformer = GPT2Model(config)\n"
        "self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)\n```",
    ),
}

TIED_HINTS = {
    "copy": (
        "The head's weight has the right numbers but is a *different tensor*: a copy. "
        "Tied means one tensor under two names, so whatever changes one changes the other "
        "(training, or a checkpoint that stores the table once).",
        "Assigning a tensor to a module attribute (`module.weight = some_tensor`) makes "
        "the module hold that very object. Any operation on the right (`* 1.0`, `+ 0`, "
        "`Tensor(...)`, `.to_numpy()`) makes a new one.",
        "```python\nself.lm_head.weight = self.transformer.wte.weight\n```",
    ),
    "": (
        "A new model's head and embedding table hold different numbers: the tie (the "
        "second TODO of `__init__`) is missing, or it happens before `lm_head` is built, "
        "which then overwrites it.",
        "Replace the head's `weight` attribute by the embedding table's: both are "
        "`[vocab_size, n_embd]`. `transformer.wte` is the `Embedding`; its `weight` is the "
        "table.",
        "```python\nself.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)\n"
        "self.lm_head.weight = self.transformer.wte.weight\n```",
    ),
}

LOGITS_HINTS = {
    FINAL_NORM: (
        "The numbers match GPT-2 with the final layer norm `ln_f` applied a wrong number "
        "of times. Step 12's `GPT2Model` already ends with `ln_f`.",
        "`self.transformer(input_ids)` returns `ln_f`'s output, `[batch, seq, n_embd]`: "
        "hand it to the head as it is, with no norm added or skipped.",
        "```python\nreturn self.lm_head(self.transformer(input_ids))\n```",
    ),
    "softmax": (
        "The output is probabilities, not logits. The model returns raw scores; step 14 "
        "applies the temperature and then the softmax when it samples.",
        "`forward` returns what the head returns: `[batch, seq, vocab_size]` logits, "
        "no `F.softmax`.",
        "```python\nreturn self.lm_head(self.transformer(input_ids))\n```",
    ),
    "hidden states": (
        "`forward` returns the transformer's hidden states, `[batch, seq, n_embd]`. The "
        "head is what turns each of them into `vocab_size` scores.",
        "Call the head module on the hidden states: a `Linear` module is called like a "
        "function, `layer(x)`.",
        "```python\nreturn self.lm_head(self.transformer(input_ids))\n```",
    ),
    "last position": (
        "The model returns the logits of every position, not only the last: during "
        "training each position predicts its next token. Generation picks the last row "
        "itself (step 14).",
        "The output is `[batch, seq, vocab_size]`: no indexing after the head.",
        "```python\nreturn self.lm_head(self.transformer(input_ids))\n```",
    ),
    "": (
        "`forward` is two calls: the body on the token ids, then the head on what the "
        "body returns. Compare the shape in the message with `[batch, seq, vocab_size]`.",
        "`self.transformer(input_ids)` is `[batch, seq, n_embd]`; `self.lm_head(...)` "
        "of that is `[batch, seq, vocab_size]`.",
        "```python\nreturn self.lm_head(self.transformer(input_ids))\n```",
    ),
}


STEP = Step(
    number=13,
    required={"MaxGPT2LMHeadModel": ["__init__", "forward"]},
    checks=[
        Check(
            "transformer.* and lm_head (no bias) named like GPT-2's",
            parameters,
            hints=PARAMETERS_HINTS,
        ),
        Check(
            "lm_head is tied to the token embedding table (one tensor)",
            head_is_tied,
            hints=TIED_HINTS,
        ),
        Check("logits match GPT-2's [batch, seq, vocab_size]", logits, hints=LOGITS_HINTS),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
TIE = "self.lm_head.weight = self.transformer.wte.weight"
FORWARD = "return self.lm_head(self.transformer(input_ids))"
MISTAKES = [
    m("returns hidden states", FORWARD, "return self.transformer(input_ids)", "hidden states"),
    m(
        "head with bias",
        "Linear(config.n_embd, config.vocab_size, bias=False)",
        "Linear(config.n_embd, config.vocab_size, bias=True)",
        "lm_head has a bias",
    ),
    m(
        "head with the default bias",
        "Linear(config.n_embd, config.vocab_size, bias=False)",
        "Linear(config.n_embd, config.vocab_size)",
        "lm_head has a bias",
    ),
    m("not tied", TIE, "pass", "not tied"),
    m("tied to a copy", TIE, f"{TIE} * 1.0", "a copy, not the same tensor"),
    m("tied to wpe", TIE, "self.lm_head.weight = self.transformer.wpe.weight", "position table"),
    m("tied to the transposed table", TIE, f"{TIE}.T", "table transposed"),
    m(
        "head is the embedding module",
        "self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)",
        "self.lm_head = self.transformer.wte",
        "not a Linear",
    ),
    Mutant(
        "softmax applied",
        (
            (
                "from max.experimental.nn import",
                "from max.experimental import functional as F\nfrom max.experimental.nn import",
            ),
            (FORWARD, "return F.softmax(self.lm_head(self.transformer(input_ids)), axis=-1)"),
        ),
        "Softmax",
    ),
    m(
        "ln_f applied again",
        FORWARD,
        "return self.lm_head(self.transformer.ln_f(self.transformer(input_ids)))",
        "ln_f is applied twice",
    ),
    Mutant(
        "ln_f skipped",
        (
            (
                "from max.experimental.tensor import Tensor",
                "from max.dtype import DType\nfrom max.experimental.tensor import Tensor",
            ),
            (
                FORWARD,
                "body = self.transformer\n"
                "        positions = Tensor.arange(input_ids.shape[-1], dtype=DType.int64)\n"
                "        hidden = body.wte(input_ids) + body.wpe(positions)\n"
                "        for block in body.h:\n"
                "            hidden = block(hidden)\n"
                "        return self.lm_head(hidden)",
            ),
        ),
        "ln_f is skipped",
    ),
    m("only the last position", FORWARD, f"{FORWARD}[:, -1]", "only the last position"),
    m(
        "renamed body",
        "self.transformer = GPT2Model(config)\n",
        "self.body = GPT2Model(config)\n        self.transformer = self.body\n",
        "parameter names",
    ),
]
