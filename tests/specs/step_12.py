"""Checks for step 12: GPT2Model."""

from tests import reference as ref
from tests.checker import Check, Context, Step, expect_close, tensor
from tests.mutants import m
from tests.specs.common import BATCH, SEQ, model_shapes, small_config

# Not LayerNorm's default epsilon, so a layer norm built without config's shows.
CONFIG = small_config(n_layer=3, layer_norm_epsilon=1e-3)


def build(ctx: Context, config=CONFIG):
    model = ctx.build("GPT2Model", config)
    return model, ctx.load_weights(model, model_shapes(config))


def parameters(ctx: Context) -> None:
    build(ctx)


def forward(ctx: Context, seq: int = SEQ) -> None:
    model, w = build(ctx)
    ids = ctx.token_ids(CONFIG.vocab_size, BATCH, seq)
    n, heads, eps = CONFIG.n_layer, CONFIG.n_head, CONFIG.layer_norm_epsilon

    def without_ln_f():
        x = ref.embeddings(w, ids)
        for i in range(n):
            x = ref.block(w, x, heads, eps, f"h.{i}.")
        return x

    def blocks(order, ln_f_eps=eps):
        x = ref.embeddings(w, ids)
        for i in order:
            x = ref.block(w, x, heads, eps, f"h.{i}.")
        return ref.layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], ln_f_eps)

    mistakes = {
        "ln_f is not applied after the last block.": without_ln_f(),
        "Only the first block runs: loop over every block in self.h.": blocks([0]),
        "The last block is skipped.": blocks(range(n - 1)),
        "The blocks run in reverse order.": blocks(reversed(range(n))),
        "ln_f uses LayerNorm's default epsilon: pass eps=config.layer_norm_epsilon.": blocks(
            range(n), ln_f_eps=1e-5
        ),
        "Position embeddings are missing: add wpe(positions) to wte(input_ids).": ref.layer_norm(
            (lambda x: [x := ref.block(w, x, heads, eps, f"h.{i}.") for i in range(n)][-1])(
                w["wte.weight"][ids]
            ),
            w["ln_f.weight"],
            w["ln_f.bias"],
            eps,
        ),
    }
    out = ctx.call("GPT2Model.forward", model, tensor(ids))
    expect_close(
        out,
        ref.model(w, ids, n, heads, eps),
        f"GPT2Model(input_ids [{BATCH}, {seq}])",
        mistakes,
        hint="embeddings -> every block of self.h in order -> ln_f",
    )


def one_token(ctx: Context) -> None:
    forward(ctx, seq=1)


STEP = Step(
    number=12,
    title="Stacking blocks into GPT2Model",
    typical=4,  # seconds, slowest check: its 12-layer forward: 1-2 s warm, 7.6 s measured on 2 very busy cores
    required={"GPT2Model": ["__init__", "forward"]},
    checks=[
        Check("wte, wpe, h.0 ... h.N, ln_f named and shaped like GPT-2's", parameters),
        Check("forward matches GPT-2's transformer", forward),
        Check("works for a single token", one_token),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m(
        "ln_f without the config's epsilon",
        "self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)",
        "self.ln_f = LayerNorm(config.n_embd)",
        "default epsilon",
    ),
    m(
        "no ln_f",
        "return self.ln_f(hidden_states)",
        "return hidden_states",
        "ln_f is not applied",
    ),
    m(
        "first block only",
        "for block in self.h:",
        "for block in list(self.h)[:1]:",
        "Only the first block",
    ),
    m(
        "one block too few",
        "for _ in range(config.n_layer)",
        "for _ in range(config.n_layer - 1)",
        "parameter names",
    ),
    m(
        "reversed blocks",
        "for block in self.h:",
        "for block in reversed(list(self.h)):",
        "reverse order",
    ),
    m(
        "no positions",
        "hidden_states = self.wte(input_ids) + self.wpe(positions)",
        "hidden_states = self.wte(input_ids)",
        "Position embeddings are missing",
    ),
    m(
        "ln_f default eps",
        "self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)",
        "self.ln_f = LayerNorm(config.n_embd, eps=0.1)",
        "wrong values",
    ),
]
