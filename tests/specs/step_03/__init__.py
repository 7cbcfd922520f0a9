"""Checks for step 03: LayerNorm."""

import numpy as np

from tests import reference_gpt2 as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.specs.model_parts import BATCH, SEQ

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


def wrong_outputs(x: np.ndarray, w: dict, eps: float) -> dict[str, np.ndarray]:
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
    expect_close(out, expected, "LayerNorm(x)", wrong_outputs(x, w, 1e-5))


def uses_its_eps(ctx: Context) -> None:
    eps = 1e-2  # large, and inputs with tiny variance, so eps dominates
    layer, w = build(ctx, eps)
    x = ctx.normal(3, DIM, std=0.05)
    expected = ref.layer_norm(x, w["weight"], w["bias"], eps)
    out = ctx.call("LayerNorm.forward", layer, tensor(x))
    expect_close(out, expected, f"LayerNorm({DIM}, eps={eps})(x)", wrong_outputs(x, w, eps))


STEP = Step(
    number=3,
    required={"LayerNorm": ["__init__", "forward"]},
    checks=[
        Check("weight starts at 1, bias at 0", parameters_initialized),
        Check("normalizes the last axis, then scales and shifts", normalizes),
        Check("uses the eps it was given", uses_its_eps),
    ],
)
