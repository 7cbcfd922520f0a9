"""Checks for step 13: MaxGPT2LMHeadModel."""

import numpy as np

from tests import reference as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.mutants import Mutant, m
from tests.specs.common import BATCH, SEQ, lm_shapes, small_config, tied_lm_weights

CONFIG = small_config()
SHAPES = lm_shapes(CONFIG)


def tied_weights(ctx: Context) -> dict[str, np.ndarray]:
    return tied_lm_weights(ctx, CONFIG)


def parameters(ctx: Context) -> None:
    ctx.load_weights(ctx.build("MaxGPT2LMHeadModel", CONFIG), SHAPES, tied_weights(ctx))


def head_is_tied(ctx: Context) -> None:
    model = ctx.build("MaxGPT2LMHeadModel", CONFIG)
    params = dict(model.parameters)
    head = np.asarray(params["lm_head.weight"].to_numpy())
    table = np.asarray(params["transformer.wte.weight"].to_numpy())
    if not np.array_equal(head, table):
        raise Fail(
            "A new model's lm_head.weight differs from transformer.wte.weight.",
            "Tie them in __init__: self.lm_head.weight = self.transformer.wte.weight.",
        )


def logits(ctx: Context) -> None:
    model = ctx.build("MaxGPT2LMHeadModel", CONFIG)
    w = ctx.load_weights(model, SHAPES, tied_weights(ctx))
    ids = ctx.token_ids(CONFIG.vocab_size, BATCH, SEQ)
    n, heads, eps = CONFIG.n_layer, CONFIG.n_head, CONFIG.layer_norm_epsilon
    hidden = ref.model(w, ids, n, heads, eps, "transformer.")
    mistakes = {
        "These are the hidden states: apply lm_head to get one logit per vocabulary entry.": hidden,
        "Softmax is applied: the model returns raw logits; sampling applies softmax later.": ref.softmax(
            hidden @ w["lm_head.weight"].T
        ),
    }
    out = ctx.call("MaxGPT2LMHeadModel.forward", model, tensor(ids))
    expect_close(
        out,
        ref.lm_logits(w, ids, n, heads, eps),
        "MaxGPT2LMHeadModel(input_ids)",
        mistakes,
        hint="return self.lm_head(self.transformer(input_ids))",
    )


STEP = Step(
    number=13,
    title="Language model head",
    required={"MaxGPT2LMHeadModel": ["__init__", "forward"]},
    checks=[
        Check("transformer.* and lm_head (no bias) named like GPT-2's", parameters),
        Check("lm_head is tied to the token embedding table", head_is_tied),
        Check("logits match GPT-2's [batch, seq, vocab_size]", logits),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m(
        "returns hidden states",
        "return self.lm_head(self.transformer(input_ids))",
        "return self.transformer(input_ids)",
        "hidden states",
    ),
    m(
        "head with bias",
        "Linear(config.n_embd, config.vocab_size, bias=False)",
        "Linear(config.n_embd, config.vocab_size, bias=True)",
        "lm_head.bias",
    ),
    m("not tied", "self.lm_head.weight = self.transformer.wte.weight", "pass", "tied"),
    m(
        "tied to wpe",
        "self.lm_head.weight = self.transformer.wte.weight",
        "self.lm_head.weight = self.transformer.wpe.weight",
        "lm_head.weight",
    ),
    Mutant(
        "softmax applied",
        (
            (
                "from max.experimental.nn import",
                "from max.experimental import functional as F\nfrom max.experimental.nn import",
            ),
            (
                "return self.lm_head(self.transformer(input_ids))",
                "return F.softmax(self.lm_head(self.transformer(input_ids)), axis=-1)",
            ),
        ),
        "Softmax",
    ),
    m(
        "renamed body",
        "self.transformer = GPT2Model(config)\n",
        "self.body = GPT2Model(config)\n        self.transformer = self.body\n",
        "parameter names",
    ),
]
