"""Checks for step 03: LayerNorm."""

import numpy as np

from tests import reference as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.mistakes import Mutant, m
from tests.specs.common import BATCH, SEQ

DIM = 64


def new_layer(ctx: Context, *args, **kwargs):
    try:
        return ctx.build("LayerNorm", *args, **kwargs)
    except Fail as failure:
        if "not iterable" in failure.message:
            raise Fail(
                failure.message,
                "A tensor's shape is a list of sizes, even for one axis: Tensor.ones and "
                "Tensor.zeros take [dim], not dim.",
            ) from failure
        raise


def build(ctx: Context, eps: float = 1e-5):
    layer = new_layer(ctx, DIM, eps=eps)
    expect_names(layer)
    return layer, ctx.load_weights(layer, {"weight": (DIM,), "bias": (DIM,)})


def statistics_over(x, g, b, eps, axis) -> np.ndarray:
    """Layer norm with the mean and variance taken over `axis` instead of the last."""
    centered = x - x.mean(axis, keepdims=True)
    return centered / np.sqrt(x.var(axis, keepdims=True) + eps) * g + b


def mistakes(x: np.ndarray, w: dict, eps: float) -> dict[str, np.ndarray]:
    g, b = w["weight"], w["bias"]
    centered = x - x.mean(-1, keepdims=True)
    found = {
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
        "eps is missing: without it the variance of a constant vector gives a division "
        "by zero; divide by sqrt(var + eps).": ref.layer_norm(x, g, b, 0.0),
        "The weight and bias are swapped: gamma is the scale (weight), beta the shift "
        "(bias).": ref.layer_norm(x, b, g, eps),
        "The output is divided by the variance, not by its square root (the standard "
        "deviation): sqrt(var + eps).": centered / (x.var(-1, keepdims=True) + eps) * g + b,
        "The variance is not centered: it is the mean of (x - mean)², not of x².": centered
        / np.sqrt((x**2).mean(-1, keepdims=True) + eps)
        * g
        + b,
    }
    if x.ndim == 3:
        found[
            "The mean and variance are taken over the sequence axis (axis 1), mixing "
            "tokens: normalize each token over its own features, the last axis."
        ] = statistics_over(x, g, b, eps, 1)
        found[
            "The mean and variance are taken over the batch axis (axis 0): that is batch "
            "norm. Normalize each token over its own features, the last axis."
        ] = statistics_over(x, g, b, eps, 0)
    found[
        "The mean and variance are taken over the whole tensor: normalize each token "
        "over its own features, the last axis."
    ] = statistics_over(x, g, b, eps, None)
    return found


def expect_names(layer) -> dict:
    """The layer's parameters by name: exactly `weight` and `bias`."""
    params = dict(layer.parameters) if hasattr(layer, "parameters") else {}
    missing = [name for name in ("weight", "bias") if name not in params]
    if missing:
        others = sorted(set(params) - {"weight", "bias"})
        if others:
            raise Fail(
                f"LayerNorm's parameters are named {', '.join(others)}; GPT-2's checkpoint "
                "names them weight and bias.",
                "F.layer_norm calls them gamma and beta, but a Module names each parameter "
                "after its attribute: store them as self.weight and self.bias.",
            )
        raise Fail(
            f"LayerNorm has no parameter `{missing[0]}`.",
            "Create self.weight and self.bias in __init__, each a tensor of shape [dim].",
        )
    return params


def parameters_initialized(ctx: Context) -> None:
    params = expect_names(new_layer(ctx, DIM))
    for name, value in (("weight", 1.0), ("bias", 0.0)):
        array = np.asarray(params[name].to_numpy())
        if array.shape != (DIM,):
            raise Fail(
                f"A new LayerNorm({DIM})'s {name} has shape {list(array.shape)}, expected "
                f"[{DIM}]: one value per feature.",
                "Its shape is [dim]: the layer's own dim argument.",
            )
        if not np.all(array == value):
            raise Fail(
                f"A new LayerNorm's {name} should be {int(value)} everywhere, with shape [{DIM}].",
                "A new layer starts as a plain normalization: the scale (weight) all ones, "
                "the shift (bias) all zeros.",
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


# Hint ladders: what to look at; the API or the shapes; the line.
LAYER_NORM_CALL = (
    "```python\nreturn F.layer_norm(x, gamma=self.weight, beta=self.bias, epsilon=self.eps)\n```"
)
INIT_LINES = (
    "```python\nself.weight = Tensor.ones([dim])\nself.bias = Tensor.zeros([dim])\n"
    "self.eps = eps\n```"
)
FORMULA = (
    "Written out, per token and over its `dim` features: `mean`, then "
    "`var = mean((x - mean)²)` (divided by n), then "
    "`(x - mean) / sqrt(var + eps) * weight + bias`. `F.layer_norm(x, gamma, beta, "
    "epsilon)` computes exactly that over the last axis."
)

PARAMETERS_HINTS = {
    "names them": (
        "The parameters have other names than GPT-2's. A `Module` names each parameter "
        "after the attribute that holds it, and the checkpoint has `ln_1.weight` and "
        "`ln_1.bias`.",
        "`F.layer_norm` calls its arguments `gamma` and `beta`; your attributes must still "
        "be `self.weight` (the scale) and `self.bias` (the shift).",
        INIT_LINES,
    ),
    "list of sizes": (
        "Creating the parameters raised: the shape argument is not a shape.",
        "`Tensor.ones(shape)` and `Tensor.zeros(shape)` take a list of sizes, one per axis; "
        "a vector of `dim` numbers has the shape `[dim]`.",
        INIT_LINES,
    ),
    "has shape": (
        "A parameter has the wrong shape: layer norm learns one scale and one shift per feature.",
        "Both vectors have shape `[dim]`, from the constructor's `dim` argument.",
        INIT_LINES,
    ),
    "": (
        "A new layer should be a plain normalization: scale 1 and shift 0 for every "
        "feature. Training or a checkpoint moves them from there. Check which vector starts "
        "at which value, and that `eps` is kept.",
        "`Tensor.ones([n])` and `Tensor.zeros([n])` make the two starting vectors; the "
        "attributes are `self.weight`, `self.bias` and `self.eps`.",
        INIT_LINES,
    ),
}

NORMALIZES_HINTS = {
    "axis": (
        "The statistics are taken over the wrong axis. Each token is normalized on its "
        "own, over its features; other tokens and other sequences never enter.",
        "The features are the last axis of `[batch, seq, dim]`. `F.layer_norm` always "
        "normalizes the last axis; by hand, reduce over `axis=-1`. " + FORMULA,
        LAYER_NORM_CALL,
    ),
    "swapped": (
        "The scale and the shift are exchanged: `weight` multiplies, `bias` is added.",
        "`F.layer_norm(x, gamma=..., beta=..., epsilon=...)`: `gamma` is the scale, "
        "`beta` the shift.",
        LAYER_NORM_CALL,
    ),
    "bias is not added": (
        "The output is not shifted by the learned `bias`: the last term of the formula is missing.",
        "`F.layer_norm`'s `beta` argument is the shift: pass the layer's own bias vector.",
        LAYER_NORM_CALL,
    ),
    "weight does not scale": (
        "The output is not scaled by the learned `weight`.",
        "`F.layer_norm`'s `gamma` argument is the scale: pass the layer's own weight vector.",
        LAYER_NORM_CALL,
    ),
    "mean is not subtracted": (
        "Only the scale is normalized: the mean is never subtracted. That is RMSNorm, "
        "which later models use; GPT-2 uses layer norm.",
        FORMULA,
        LAYER_NORM_CALL,
    ),
    "": (
        "The numbers differ from layer norm's. Compare your formula with the page's, term "
        "by term: the mean, the variance (divided by n, not n - 1), the square root, eps "
        "under it, then the scale and the shift.",
        FORMULA,
        LAYER_NORM_CALL,
    ),
}

EPS_HINTS = {
    "missing": (
        "With a large eps and inputs of tiny variance, eps dominates the denominator: "
        "yours has none.",
        "eps is added to the variance, under the square root: `sqrt(var + eps)`. "
        "`F.layer_norm` takes it as `epsilon=`.",
        LAYER_NORM_CALL,
    ),
    "after the square root": (
        "eps is in the wrong place: it belongs under the square root, added to the variance.",
        "`(x - mean) / sqrt(var + eps)`, not `/ (sqrt(var) + eps)`. `F.layer_norm` puts it "
        "in the right place for you (`epsilon=`).",
        LAYER_NORM_CALL,
    ),
    "": (
        "The layer was built with `eps=0.01` but computes with another eps. The value "
        "passed to the constructor must be stored and used: GPT-2's config sets it.",
        "Keep the constructor's `eps` in `self.eps` (not a constant), and pass it to "
        "`F.layer_norm` as `epsilon=`.",
        "```python\nself.eps = eps\n...\n"
        "return F.layer_norm(x, gamma=self.weight, beta=self.bias, epsilon=self.eps)\n```",
    ),
}

STEP = Step(
    number=3,
    required={"LayerNorm": ["__init__", "forward"]},
    checks=[
        Check("weight starts at 1, bias at 0", parameters_initialized, PARAMETERS_HINTS),
        Check("normalizes the last axis, then scales and shifts", normalizes, NORMALIZES_HINTS),
        Check("uses the eps it was given", uses_its_eps, EPS_HINTS),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
FORWARD = "return F.layer_norm(x, gamma=self.weight, beta=self.bias, epsilon=self.eps)"


def by_hand(
    axis: int = -1,
    var: str = "(centered * centered).mean(axis={axis})",
    out: str = "centered * F.rsqrt(var + self.eps)",
) -> str:
    """The layer norm written out with MAX operations, in a variant."""
    return (
        f"mean = x.mean(axis={axis})\n"
        "        centered = x - mean\n"
        f"        var = {var.format(axis=axis)}\n"
        f"        return {out} * self.weight + self.bias"
    )


MISTAKES = [
    m("bias ignored", "beta=self.bias", "beta=self.bias * 0", "bias is not added"),
    m("weight ignored", "gamma=self.weight", "gamma=self.weight * 0 + 1", "weight does not scale"),
    m("eps hard-coded", "epsilon=self.eps", "epsilon=1e-5", "eps is not the one passed"),
    m(
        "weight starts at 0",
        "self.weight = Tensor.ones([dim])",
        "self.weight = Tensor.zeros([dim])",
        "weight should be 1",
    ),
    m(
        "bias starts at 1",
        "self.bias = Tensor.zeros([dim])",
        "self.bias = Tensor.ones([dim])",
        "bias should be 0",
    ),
    m(
        "shape given as an int",
        "self.weight = Tensor.ones([dim])",
        "self.weight = Tensor.ones(dim)",
        "list of sizes",
    ),
    m("eps not stored", "self.eps = eps", "self.eps = 1e-5", "eps is not the one passed"),
    Mutant(
        "named gamma and beta",
        (
            ("self.weight = Tensor.ones([dim])", "self.gamma = Tensor.ones([dim])"),
            ("self.bias = Tensor.zeros([dim])", "self.beta = Tensor.zeros([dim])"),
            ("gamma=self.weight, beta=self.bias", "gamma=self.gamma, beta=self.beta"),
        ),
        "names them weight and bias",
    ),
    m(
        "weight and bias swapped",
        "gamma=self.weight, beta=self.bias",
        "gamma=self.bias, beta=self.weight",
        "weight and bias are swapped",
    ),
    m(
        "RMSNorm instead",
        FORWARD,
        "return x * F.rsqrt((x * x).mean(axis=-1) + self.eps) * self.weight + self.bias",
        "mean is not subtracted",
    ),
    m("statistics over the sequence axis", FORWARD, by_hand(axis=1), "sequence axis"),
    m("statistics over the batch axis", FORWARD, by_hand(axis=0), "batch axis"),
    m(
        "eps missing",
        FORWARD,
        by_hand(out="centered * F.rsqrt(var)"),
        "eps is missing",
    ),
    m(
        "sample variance (n - 1)",
        FORWARD,
        by_hand(var="(centered * centered).sum(axis=-1) / (int(x.shape[-1]) - 1)"),
        "divide by n-1",
    ),
    m(
        "divided by the variance",
        FORWARD,
        by_hand(out="centered / (var + self.eps)"),
        "not by its square root",
    ),
    m(
        "variance not centered",
        FORWARD,
        by_hand(var="(x * x).mean(axis=-1)"),
        "not centered",
    ),
    m(
        "eps after the square root",
        FORWARD,
        by_hand(out="centered / (F.sqrt(var) + self.eps)"),
        "eps is added after the square root",
    ),
]
