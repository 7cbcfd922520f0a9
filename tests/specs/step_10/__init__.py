"""Checks for step 10: pre_norm_residual."""

import numpy as np
from max.experimental import functional as F

from solutions.solution_03 import LayerNorm
from solutions.solution_04 import GPT2MLP
from tests import reference_gpt2 as ref
from tests.checker import Check, Context, Step, expect_close, tensor, to_numpy
from tests.specs.model_parts import BATCH, SEQ, linear_shapes, small_config

CONFIG = small_config()
E, INNER = CONFIG.n_embd, CONFIG.n_inner


def parts(ctx: Context):
    """A real LayerNorm and MLP (the solutions') with GPT-2-like weights."""
    with F.lazy():  # typed only: the weights loaded below replace the random ones
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


def wrong_outputs(x, norm, sublayer) -> dict:
    """What the usual residual mistakes compute, for NumPy callables."""
    return {
        "The layer norm is applied after the addition (post-norm, the original Transformer); "
        "GPT-2 normalizes only the sublayer's input: x + sublayer(norm(x)).": norm(x + sublayer(x)),
        "The residual is missing: add the input x to the sublayer's output.": sublayer(norm(x)),
        "The norm is skipped: the sublayer should read norm(x).": x + sublayer(x),
        "The normalized x is added back; the residual stream must carry x itself (did x get "
        "reassigned to norm(x)?).": norm(x) + sublayer(norm(x)),
        "The norm is applied to the sublayer's output instead of its input.": x + norm(sublayer(x)),
        "The norm and the residual trade places: the sublayer reads x unnormalized and the "
        "stream carries norm(x).": norm(x) + sublayer(x),
        "The sum is normalized too: pre-norm normalizes only what the sublayer reads, never the "
        "stream.": norm(x + sublayer(norm(x))),
        "The sublayer's output is subtracted from x: a residual connection adds it.": x
        - sublayer(norm(x)),
        "The sublayer's output is multiplied with x: a residual connection adds it.": x
        * sublayer(norm(x)),
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
        wrong_outputs(x, ref_norm, ref_mlp),
        hint="The sublayer reads a normalized copy of x; its output is added to x itself.",
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
        {
            "A zero update must leave x unchanged, but x comes out normalized: the norm is "
            "applied to the stream (the sum, or the x that is added back), not only to what "
            "the sublayer reads.": ref_norm(x),
            "A zero update must leave x unchanged, but the output is all zeros: the residual "
            "is missing, add x to the sublayer's output.": np.zeros_like(x),
        },
        hint="With a sublayer that adds nothing, the block must pass x through untouched.",
    )


def affine(x: np.ndarray, out: np.ndarray) -> tuple[float, float] | None:
    """(a, b) when out == a * x + b elementwise, else None."""
    if out.shape != x.shape or not np.all(np.isfinite(out)):
        return None
    a, b = np.polyfit(x.ravel().astype(np.float64), out.ravel().astype(np.float64), 1)
    return (float(a), float(b)) if np.allclose(a * x + b, out, atol=1e-4) else None


def formula(a: float, b: float) -> str:
    return f"{round(a, 3):g}x {'+' if b >= 0 else '-'} {round(abs(b), 3):g}"


def uses_the_given_callables(ctx: Context) -> None:
    x = ctx.normal(1, 3, 4)
    fn = ctx.get("pre_norm_residual")
    out = ctx.call("pre_norm_residual", fn, tensor(x), lambda h: h * 2.0, lambda h: h * 3.0 + 1.0)
    what = "pre_norm_residual(x, norm=2*h, sublayer=3*h+1)"
    hint = "Call the norm and sublayer you are given; build nothing new inside."
    fitted = affine(x, to_numpy(out, what))
    if fitted is not None:
        hint = (
            f"With norm(h) = 2h and sublayer(h) = 3h + 1 your function returns "
            f"{formula(*fitted)}; x + sublayer(norm(x)) is x + (6x + 1) = 7x + 1. Work out "
            "which wiring gives yours."
        )
    expect_close(
        out,
        x + (6 * x + 1),
        what,
        wrong_outputs(x, lambda h: 2 * h, lambda h: 3 * h + 1),
        hint=hint,
    )


STEP = Step(
    number=10,
    required={"pre_norm_residual": []},
    checks=[
        Check(
            "calls the given norm, then sublayer, then adds x",
            uses_the_given_callables,
        ),
        Check("a sublayer that adds nothing leaves x unchanged", identity_sublayer),
        Check("x + mlp(layer_norm(x)) matches GPT-2", matches),
    ],
)
