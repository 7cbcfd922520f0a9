"""Checks for step 03: LayerNorm."""

import numpy as np

from tests import reference as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.mutants import m
from tests.specs.common import BATCH, SEQ

DIM = 64


def build(ctx: Context, eps: float = 1e-5):
    layer = ctx.build("LayerNorm", DIM, eps=eps)
    return layer, ctx.load_weights(layer, {"weight": (DIM,), "bias": (DIM,)})


def mistakes(x: np.ndarray, w: dict, eps: float) -> dict[str, np.ndarray]:
    g, b = w["weight"], w["bias"]
    centered = x - x.mean(-1, keepdims=True)
    return {
        "The learned bias is not added (beta).": ref.layer_norm(x, g, 0 * b, eps),
        "The learned weight does not scale the output (gamma).": ref.layer_norm(
            x, 1 + 0 * g, b, eps
        ),
        "eps is not the one passed to the constructor: store it and use it.": ref.layer_norm(
            x, g, b, 1e-5
        ),
        "The mean is not subtracted (that is RMSNorm, not LayerNorm).": x
        / np.sqrt((x**2).mean(-1, keepdims=True) + eps)
        * g
        + b,
        "The unbiased variance (divide by n-1) is used; layer norm divides by n.": centered
        / np.sqrt(x.var(-1, ddof=1, keepdims=True) + eps)
        * g
        + b,
        "eps is added after the square root; it belongs under it: sqrt(var + eps).": centered
        / (np.sqrt(x.var(-1, keepdims=True)) + eps)
        * g
        + b,
    }


def parameters_initialized(ctx: Context) -> None:
    layer = ctx.build("LayerNorm", DIM)
    params = dict(layer.parameters) if hasattr(layer, "parameters") else {}
    for name, value in (("weight", 1.0), ("bias", 0.0)):
        if name not in params:
            raise Fail(
                f"LayerNorm has no parameter `{name}`.",
                "Create self.weight and self.bias in __init__.",
            )
        array = np.asarray(params[name].to_numpy())
        if array.shape != (DIM,) or not np.all(array == value):
            raise Fail(
                f"A new LayerNorm's {name} should be {int(value)} everywhere, with shape [{DIM}].",
                "Tensor.ones([dim]) and Tensor.zeros([dim]) start it as the identity.",
            )


def normalizes(ctx: Context) -> None:
    layer, w = build(ctx)
    x = ctx.normal(BATCH, SEQ, DIM) * 3 + 1.5
    expected = ref.layer_norm(x, w["weight"], w["bias"])
    out = ctx.call("LayerNorm.forward", layer, tensor(x))
    expect_close(out, expected, "LayerNorm(x)", mistakes(x, w, 1e-5))


def uses_its_eps(ctx: Context) -> None:
    eps = 1e-2  # large, and inputs with tiny variance, so eps dominates
    layer, w = build(ctx, eps)
    x = ctx.normal(3, DIM, std=0.05)
    expected = ref.layer_norm(x, w["weight"], w["bias"], eps)
    out = ctx.call("LayerNorm.forward", layer, tensor(x))
    expect_close(out, expected, f"LayerNorm({DIM}, eps={eps})(x)", mistakes(x, w, eps))


STEP = Step(
    number=3,
    title="Layer normalization",
    required={"LayerNorm": ["__init__", "forward"]},
    checks=[
        Check("weight starts at 1, bias at 0", parameters_initialized),
        Check("normalizes the last axis, then scales and shifts", normalizes),
        Check("uses the eps it was given", uses_its_eps),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m("bias ignored", "beta=self.bias", "beta=self.bias * 0", "bias"),
    m("weight ignored", "gamma=self.weight", "gamma=self.weight * 0 + 1", "weight"),
    m("eps hard-coded", "epsilon=self.eps", "epsilon=1e-5", "eps"),
    m(
        "weight starts at 0",
        "self.weight = Tensor.ones([dim])",
        "self.weight = Tensor.zeros([dim])",
        "weight",
    ),
    m("eps not stored", "self.eps = eps", "self.eps = 1e-5", "eps"),
    m(
        "RMSNorm instead",
        "return F.layer_norm(x, gamma=self.weight, beta=self.bias, epsilon=self.eps)",
        "return x * F.rsqrt((x * x).mean(axis=-1) + self.eps) * self.weight + self.bias",
        "mean is not subtracted",
    ),
]
