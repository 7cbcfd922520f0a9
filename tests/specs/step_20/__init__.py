"""Checks for step 20: RMSNorm and the SwiGLU MLP."""

import numpy as np

from tests import reference_gpt2 as gpt2
from tests import reference_llama as ref
from tests.checker import (
    Check,
    Context,
    Fail,
    Step,
    expect_close,
    parameter_shapes,
    tensor,
    to_numpy,
)
from tests.checker.compare import close
from tests.specs.model_parts import BATCH, SEQ

DIM, INTERMEDIATE = 64, 96
MLP_SHAPES = {
    "gate_proj.weight": (INTERMEDIATE, DIM),
    "up_proj.weight": (INTERMEDIATE, DIM),
    "down_proj.weight": (DIM, INTERMEDIATE),
}


# -- RMSNorm ----------------------------------------------------------------


def new_norm(ctx: Context, eps: float | None = None):
    layer = ctx.build("RMSNorm", DIM) if eps is None else ctx.build("RMSNorm", DIM, eps=eps)
    shapes = parameter_shapes(layer)
    if "bias" in shapes:
        raise Fail(
            "RMSNorm has a parameter `bias`; Llama's RMSNorm has none.",
            "RMSNorm only scales: keep self.weight and drop the shift.",
        )
    if set(shapes) != {"weight"}:
        raise Fail(
            f"RMSNorm's parameters are {sorted(shapes) or 'none'}; Llama's checkpoint has "
            "exactly one, `weight`.",
            "Store the scale as self.weight: a Module names each parameter after its attribute.",
        )
    return layer


def norm_starts_as_identity(ctx: Context) -> None:
    weight = np.asarray(dict(new_norm(ctx).parameters)["weight"].to_numpy())
    if weight.shape != (DIM,):
        raise Fail(
            f"A new RMSNorm({DIM})'s weight has shape {list(weight.shape)}, expected [{DIM}].",
            "One scale per feature: the shape is [dim].",
        )
    if not np.all(weight == 1.0):
        raise Fail(
            "A new RMSNorm's weight should be 1 everywhere, so the layer only normalizes.",
            "Start the scale at ones.",
        )


AFTER_THE_DIVISION = "; it scales each feature of the normalized x, after the division."


def wrong_norms(x: np.ndarray, weight: np.ndarray, eps: float) -> dict[str, np.ndarray]:
    mean_square = (x**2).mean(-1, keepdims=True)
    centered = x - x.mean(-1, keepdims=True)
    return {
        "The mean is subtracted: that is LayerNorm. RMSNorm divides x itself by its root "
        "mean square.": centered / np.sqrt((centered**2).mean(-1, keepdims=True) + eps) * weight,
        "eps is added after the square root; it belongs under it: sqrt(mean(x²) + eps).": x
        / (np.sqrt(mean_square) + eps)
        * weight,
        "eps is missing: add it to the mean square, under the root.": ref.rms_norm(x, weight, 0.0),
        "eps is not the one passed to the constructor: store it and use it.": ref.rms_norm(
            x, weight, 1e-6
        ),
        "x is divided by the mean square, not by its square root.": x
        / (mean_square + eps)
        * weight,
        "The squares are summed, not averaged: divide by the number of features.": x
        / np.sqrt((x**2).sum(-1, keepdims=True) + eps)
        * weight,
        "The learned weight does not scale the output.": ref.rms_norm(x, 1 + 0 * weight, eps),
        "The weight is applied under the root, to the mean square" + AFTER_THE_DIVISION: x
        / np.sqrt(mean_square * weight + eps),
        "The weight is applied under the root, to the mean square plus eps" + AFTER_THE_DIVISION: x
        / np.sqrt((mean_square + eps) * weight),
        "The weight is added to the normalized x; it multiplies it, feature by feature.": (
            ref.rms_norm(x, 1 + 0 * weight, eps) + weight
        ),
        "The weight scales x before its mean square is taken, so the division undoes most of "
        "it: scale the normalized x.": ref.rms_norm(x * weight, 1 + 0 * weight, eps),
        "The mean square is taken over the sequence axis (axis 1), mixing tokens: each token "
        "is normalized over its own features, the last axis.": x
        / np.sqrt((x**2).mean(1, keepdims=True) + eps)
        * weight,
        "The mean square is taken over the whole tensor: each token is normalized over its "
        "own features, the last axis.": x / np.sqrt((x**2).mean() + eps) * weight,
    }


def expect_norm(ctx: Context, eps: float, x: np.ndarray) -> None:
    layer = new_norm(ctx, eps)
    weight = 1.0 + ctx.normal(DIM, std=0.1)
    what = f"RMSNorm({DIM}, eps={eps:g})(x)"
    got = normalized(ctx, layer, weight, x, what)
    want, wrongs = ref.rms_norm(x, weight, eps), wrong_norms(x, weight, eps)
    if not close(got, want) and not any(close(got, wrong) for wrong in wrongs.values()):
        name_the_piece(ctx, layer, eps, x)
    expect_close(got, want, what, wrongs, model="Llama")


def normalized(ctx: Context, layer, weight: np.ndarray, x: np.ndarray, what: str) -> np.ndarray:
    ctx.call("load_state_dict", layer.load_state_dict, {"weight": weight.astype(np.float32)})
    return to_numpy(ctx.call("RMSNorm.forward", layer, tensor(x)), what)


def name_the_piece(ctx: Context, layer, eps: float, x: np.ndarray) -> None:
    """The layer is wrong in a way no known mistake explains: run it with weight 1
    to say whether the normalization or the weight's part differs."""
    ones = np.ones(DIM, np.float32)
    what = f"RMSNorm({DIM}, eps={eps:g})(x) with weight 1, the normalization alone"
    alone = normalized(ctx, layer, ones, x, what)
    if close(alone, ref.rms_norm(x, ones, eps)):
        raise Fail(
            f"RMSNorm({DIM}, eps={eps:g})(x) matches Llama's with weight 1 and not with a "
            "learned weight: the normalization is right, the weight is applied wrongly.",
            "The weight multiplies the normalized x, feature by feature, "
            "once the division is done.",
        )
    expect_close(
        alone,
        ref.rms_norm(x, ones, eps),
        what,
        wrong_norms(x, ones, eps),
        "With weight 1 the layer is x divided by its root mean square: the difference is "
        "before the weight.",
        model="Llama",
    )


def norm_divides_by_root_mean_square(ctx: Context) -> None:
    expect_norm(ctx, 1e-6, ctx.normal(BATCH, SEQ, DIM) * 3 + 1.5)


def norm_uses_its_eps(ctx: Context) -> None:
    # Tiny features and a large eps, so eps dominates the root.
    expect_norm(ctx, 1e-2, ctx.normal(BATCH, SEQ, DIM, std=0.05))


# -- the SwiGLU MLP ---------------------------------------------------------


def mlp(ctx: Context):
    layer = ctx.build("SwiGLUMLP", DIM, INTERMEDIATE)
    shapes = parameter_shapes(layer)
    biases = sorted(name for name in shapes if name.endswith(".bias"))
    if biases:
        raise Fail(
            f"The MLP has biases ({', '.join(biases)}); Llama's projections have none.",
            "Build each Linear with bias=False.",
        )
    weights = ctx.weights_for(MLP_SHAPES)
    ctx.load_weights(layer, MLP_SHAPES, weights)
    return layer, weights


def mlp_has_three_projections(ctx: Context) -> None:
    mlp(ctx)


def wrong_mlps(w: dict, x: np.ndarray) -> dict[str, np.ndarray]:
    gate = gpt2.linear(x, w["gate_proj.weight"], None)
    up = gpt2.linear(x, w["up_proj.weight"], None)

    def down(h: np.ndarray) -> np.ndarray:
        return gpt2.linear(h, w["down_proj.weight"], None)

    return {
        "SiLU is applied to up_proj's output; it belongs on gate_proj's: silu(gate(x)) * up(x).": (
            down(gate * ref.silu(up))
        ),
        "GELU is used where Llama uses SiLU (x * sigmoid(x)).": down(gpt2.gelu(gate) * up),
        "GELU (exact) is used where Llama uses SiLU (x * sigmoid(x)).": down(
            gpt2.gelu(gate, "none") * up
        ),
        "The gate is a plain sigmoid; SiLU is x * sigmoid(x).": down(
            1.0 / (1.0 + np.exp(-gate)) * up
        ),
        "The gate has no activation: apply SiLU, x * sigmoid(x), to gate_proj's output.": down(
            gate * up
        ),
        "The two projections are added; the gate multiplies: silu(gate(x)) * up(x).": down(
            ref.silu(gate) + up
        ),
        "up_proj is left out: the gate multiplies up_proj's output.": down(ref.silu(gate)),
        "gate_proj's output is used twice and up_proj's never: SiLU of gate_proj's output "
        "multiplies up_proj's.": down(ref.silu(gate) * gate),
        "up_proj's output is used twice and gate_proj's never: SiLU of gate_proj's output "
        "multiplies up_proj's.": down(ref.silu(up) * up),
        "SiLU is applied to the product; it gates before it: SiLU of gate_proj's output, then "
        "times up_proj's.": down(ref.silu(gate * up)),
        "SiLU is applied after down_proj, to the MLP's output; it gates inside: SiLU of "
        "gate_proj's output, then times up_proj's, then down_proj.": ref.silu(down(gate * up)),
        "down_proj is applied to each factor before the product; it projects the product "
        "back to hidden_size, once, after the gate has multiplied.": down(ref.silu(gate))
        * down(up),
    }


def expect_projected_back(out: np.ndarray) -> None:
    """An output with intermediate_size features: down_proj never ran."""
    if out.shape == (BATCH, SEQ, INTERMEDIATE):
        raise Fail(
            f"SwiGLUMLP(x) has shape {list(out.shape)}: intermediate_size = {INTERMEDIATE} "
            f"features per token, expected hidden_size = {DIM}. down_proj is not applied: it "
            "projects the gated product back to hidden_size.",
            "The gated product is the input of down_proj, and down_proj's output is the MLP's.",
        )


def mlp_gates_with_silu(ctx: Context) -> None:
    layer, w = mlp(ctx)
    # Inputs large enough that the gate leaves SiLU's nearly linear middle.
    x = ctx.normal(BATCH, SEQ, DIM, std=5.0)
    out = to_numpy(ctx.call("SwiGLUMLP.forward", layer, tensor(x)), "SwiGLUMLP(x)")
    expect_projected_back(out)
    expect_close(out, ref.swiglu_mlp(w, x), "SwiGLUMLP(x)", wrong_mlps(w, x), model="Llama")


STEP = Step(
    number=20,
    required={"RMSNorm": ["__init__", "forward"], "SwiGLUMLP": ["__init__", "forward"]},
    checks=[
        Check("RMSNorm's weight starts at 1, one per feature", norm_starts_as_identity),
        Check(
            "RMSNorm divides by the root mean square, then scales", norm_divides_by_root_mean_square
        ),
        Check("RMSNorm uses the eps it was given", norm_uses_its_eps),
        Check(
            "the MLP has gate, up and down projections without biases", mlp_has_three_projections
        ),
        Check("the MLP computes down(silu(gate(x)) * up(x))", mlp_gates_with_silu),
    ],
)
