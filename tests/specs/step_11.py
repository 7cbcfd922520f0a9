"""Checks for step 11: GPT2Block."""

from tests import reference as ref
from tests.checker import Check, Context, Step, expect_close, tensor
from tests.mutants import Mutant, m
from tests.specs.common import BATCH, SEQ, block_shapes, small_config

CONFIG = small_config()


def build(ctx: Context, config=CONFIG):
    block = ctx.build("GPT2Block", config)
    return block, ctx.load_weights(block, block_shapes(config))


def parameters(ctx: Context) -> None:
    build(ctx)


def forward(ctx: Context) -> None:
    block, w = build(ctx)
    x = ctx.normal(BATCH, SEQ, CONFIG.n_embd)
    eps, heads = CONFIG.layer_norm_epsilon, CONFIG.n_head

    def ln(name, h):
        return ref.layer_norm(h, w[f"{name}.weight"], w[f"{name}.bias"], eps)

    def attn(h):
        return ref.multi_head_attention(w, h, heads, "attn.")

    def mlp(h):
        return ref.mlp(w, h, "mlp.")

    after_attn = x + attn(ln("ln_1", x))
    mistakes = {
        "Only the attention half runs: add the MLP sublayer, x + mlp(ln_2(x)).": after_attn,
        "Only the MLP half runs: the attention sublayer comes first.": x + mlp(ln("ln_2", x)),
        "The MLP comes before attention; GPT-2 attends first.": (lambda h: h + attn(ln("ln_1", h)))(
            x + mlp(ln("ln_2", x))
        ),
        "ln_1 and ln_2 are swapped: ln_1 feeds attention, ln_2 feeds the MLP.": (
            lambda h: h + mlp(ln("ln_1", h))
        )(x + attn(ln("ln_2", x))),
        "The MLP reads the block's input x instead of the output of the attention half.": after_attn
        + mlp(ln("ln_2", x)),
        "The norms are applied after the additions (post-norm); GPT-2 is pre-norm.": ln(
            "ln_2", (lambda h: h + mlp(h))(ln("ln_1", x + attn(x)))
        ),
    }
    out = ctx.call("GPT2Block.forward", block, tensor(x))
    expect_close(
        out,
        ref.block(w, x, heads, eps),
        "GPT2Block(x)",
        mistakes,
        hint="h = x + attn(ln_1(x)); return h + mlp(ln_2(h))",
    )


def uses_config_eps(ctx: Context) -> None:
    config = small_config(layer_norm_epsilon=0.5)  # huge, so using the default shows
    block, w = build(ctx, config)
    x = ctx.normal(1, 3, config.n_embd, std=0.1)
    expected = ref.block(w, x, config.n_head, 0.5)
    mistakes = {
        "The layer norms ignore config.layer_norm_epsilon: pass eps=... to LayerNorm.": ref.block(
            w, x, config.n_head, 1e-5
        )
    }
    out = ctx.call("GPT2Block.forward", block, tensor(x))
    expect_close(out, expected, "GPT2Block(x) with layer_norm_epsilon=0.5", mistakes)


STEP = Step(
    number=11,
    title="The transformer block",
    required={"GPT2Block": ["__init__", "forward"]},
    checks=[
        Check("ln_1, attn, ln_2, mlp named and shaped like GPT-2's", parameters),
        Check("forward: x + attn(ln_1(x)), then + mlp(ln_2(.))", forward),
        Check("the layer norms use config.layer_norm_epsilon", uses_config_eps),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m(
        "no MLP half",
        "return pre_norm_residual(hidden_states, self.ln_2, self.mlp)",
        "return hidden_states",
        "Only the attention half",
    ),
    m(
        "norms swapped",
        "pre_norm_residual(hidden_states, self.ln_1, self.attn)",
        "pre_norm_residual(hidden_states, self.ln_2, self.attn)",
        "wrong values",
    ),
    m(
        "default eps",
        "self.ln_1 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)",
        "self.ln_1 = LayerNorm(config.n_embd)",
        "layer_norm_epsilon",
    ),
    m(
        "MLP width n_embd",
        "GPT2MLP(config.n_inner, config)",
        "GPT2MLP(config.n_embd, config)",
        "mlp.c_fc.weight",
    ),
    Mutant(
        "MLP first",
        (
            (
                "        hidden_states = pre_norm_residual(hidden_states, self.ln_1, self.attn)\n",
                "",
            ),
            (
                "return pre_norm_residual(hidden_states, self.ln_2, self.mlp)",
                "hidden_states = pre_norm_residual(hidden_states, self.ln_2, self.mlp)\n"
                "        return pre_norm_residual(hidden_states, self.ln_1, self.attn)",
            ),
        ),
        "MLP comes before attention",
    ),
    m("renamed attention", "self.attn = ", "self.attention = ", "parameter names"),
]
