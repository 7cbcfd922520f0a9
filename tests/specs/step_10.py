"""Checks for step 10: pre_norm_residual."""

from solutions.solution_03 import LayerNorm
from solutions.solution_04 import GPT2MLP
from tests import reference as ref
from tests.checker import Check, Context, Step, expect_close, tensor
from tests.mutants import m
from tests.specs.common import BATCH, SEQ, linear_shapes, small_config

CONFIG = small_config()
E, INNER = CONFIG.n_embd, CONFIG.n_inner


def parts(ctx: Context):
    """A real LayerNorm and MLP (the solutions') with GPT-2-like weights."""
    norm, mlp = LayerNorm(E), GPT2MLP(INNER, CONFIG)
    ln = ctx.load_weights(norm, {"weight": (E,), "bias": (E,)})
    w = ctx.load_weights(
        mlp, {**linear_shapes("c_fc", E, INNER), **linear_shapes("c_proj", INNER, E)}
    )
    return (
        norm,
        mlp,
        (lambda x: ref.layer_norm(x, ln["weight"], ln["bias"])),
        (lambda x: ref.mlp(w, x)),
    )


def mistakes(x, norm, sublayer) -> dict:
    """What the usual residual mistakes compute, for NumPy callables."""
    return {
        "The layer norm is applied after the addition (post-norm, the original Transformer); "
        "GPT-2 normalizes only the sublayer's input: x + sublayer(norm(x)).": norm(x + sublayer(x)),
        "The residual is missing: add the input x to the sublayer's output.": sublayer(norm(x)),
        "The norm is skipped: the sublayer should read norm(x).": x + sublayer(x),
        "The normalized x is added back; the residual stream must carry x itself.": norm(x)
        + sublayer(norm(x)),
        "The norm is applied to the sublayer's output instead of its input.": x + norm(sublayer(x)),
    }


def matches(ctx: Context) -> None:
    norm, mlp, ref_norm, ref_mlp = parts(ctx)
    x = ctx.normal(BATCH, SEQ, E) * 2 + 0.5  # a stream that is far from normalized
    fn = ctx.get("pre_norm_residual")
    out = ctx.call("pre_norm_residual(x, norm, sublayer)", fn, tensor(x), norm, mlp)
    expect_close(
        out,
        x + ref_mlp(ref_norm(x)),
        "pre_norm_residual(x, layer_norm, mlp)",
        mistakes(x, ref_norm, ref_mlp),
        hint="return x + sublayer(norm(x))",
    )


def identity_sublayer(ctx: Context) -> None:
    norm, _, ref_norm, _ = parts(ctx)
    x = ctx.normal(BATCH, SEQ, E) * 3
    fn = ctx.get("pre_norm_residual")
    out = ctx.call(
        "pre_norm_residual(x, norm, lambda h: 0 * h)", fn, tensor(x), norm, lambda h: h * 0.0
    )
    expect_close(
        out,
        x,
        "pre_norm_residual with a sublayer that outputs zeros",
        {"A zero update must leave x unchanged: is x normalized on the way through?": ref_norm(x)},
        hint="With a sublayer that adds nothing, the block must pass x through untouched.",
    )


def uses_the_given_callables(ctx: Context) -> None:
    x = ctx.normal(1, 3, 4)
    fn = ctx.get("pre_norm_residual")
    out = ctx.call("pre_norm_residual", fn, tensor(x), lambda h: h * 2.0, lambda h: h * 3.0 + 1.0)
    expect_close(
        out,
        x + (6 * x + 1),
        "pre_norm_residual(x, norm=2*h, sublayer=3*h+1)",
        mistakes(x, lambda h: 2 * h, lambda h: 3 * h + 1),
        hint="Call the norm and sublayer you are given; build nothing new inside.",
    )


STEP = Step(
    number=10,
    title="Residual connections and pre-norm",
    required={"pre_norm_residual": []},
    checks=[
        Check("calls the given norm, then sublayer, then adds x", uses_the_given_callables),
        Check("a sublayer that adds nothing leaves x unchanged", identity_sublayer),
        Check("x + mlp(layer_norm(x)) matches GPT-2", matches),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m("post-norm", "return x + sublayer(norm(x))", "return norm(x + sublayer(x))", "post-norm"),
    m(
        "no residual",
        "return x + sublayer(norm(x))",
        "return sublayer(norm(x))",
        "residual is missing",
    ),
    m("no norm", "return x + sublayer(norm(x))", "return x + sublayer(x)", "norm is skipped"),
    m(
        "normalized residual",
        "return x + sublayer(norm(x))",
        "return norm(x) + sublayer(norm(x))",
        "normalized x",
    ),
    m(
        "norm after sublayer",
        "return x + sublayer(norm(x))",
        "return x + norm(sublayer(x))",
        "output instead of its input",
    ),
    m(
        "subtracts",
        "return x + sublayer(norm(x))",
        "return x - sublayer(norm(x))",
        "wrong values",
    ),
]
