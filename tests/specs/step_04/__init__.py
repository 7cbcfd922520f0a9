"""Checks for step 04: GPT2MLP."""

import numpy as np

from tests import reference_gpt2 as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.checker.engine import parameter_shapes
from tests.specs.model_parts import BATCH, SEQ, linear_shapes, small_config

CONFIG = small_config()
INNER = 4 * CONFIG.n_embd
SHAPES = {
    **linear_shapes("c_fc", CONFIG.n_embd, INNER),
    **linear_shapes("c_proj", INNER, CONFIG.n_embd),
}


def activations(x: np.ndarray) -> dict[str, np.ndarray]:
    """Activations people use instead of GPT-2's, by what the checker says."""
    return {
        "This is the exact (erf) GELU; GPT-2 uses the tanh approximation: "
        "F.gelu(x, approximate='tanh').": ref.gelu(x, approximate="none"),
        "This is the 'quick' (sigmoid) GELU, x * sigmoid(1.702 x); GPT-2 uses the tanh "
        "approximation.": x / (1 + np.exp(-1.702 * x)),
        "This is SiLU, x * sigmoid(x), the activation of later models; GPT-2 uses GELU with "
        "the tanh approximation.": x / (1 + np.exp(-x)),
        "This looks like ReLU; GPT-2 uses GELU with the tanh approximation.": x.clip(0),
        "The activation is missing between c_fc and c_proj.": x,
    }


def build(ctx: Context, width: int = INNER):
    mlp = ctx.build("GPT2MLP", width, CONFIG)
    shapes = parameter_shapes(mlp)
    if width != INNER and shapes.get("c_fc.weight") == (INNER, CONFIG.n_embd):
        raise Fail(
            f"GPT2MLP({width}, config) is {INNER} wide (c_fc.weight is [{INNER}, "
            f"{CONFIG.n_embd}]): the width is 4 * n_embd, not the intermediate_size argument.",
            "Use the constructor's intermediate_size for the hidden width: the block that "
            "builds the MLP decides it (from config.n_inner), GPT2MLP does not recompute it.",
        )
    return mlp


def parameters(ctx: Context) -> None:
    ctx.load_weights(build(ctx), SHAPES)


def intermediate_size_is_used(ctx: Context) -> None:
    wide = {
        **linear_shapes("c_fc", CONFIG.n_embd, 96),
        **linear_shapes("c_proj", 96, CONFIG.n_embd),
    }
    ctx.load_weights(build(ctx, 96), wide)


def run(ctx: Context, mlp, x: np.ndarray):
    try:
        return ctx.call("GPT2MLP.forward", mlp, tensor(x))
    except Fail as failure:
        raise Fail(
            failure.message,
            "forward is c_fc (n_embd -> intermediate_size), then GELU, then c_proj "
            "(intermediate_size -> n_embd): is the order right, and is each layer applied "
            "to the previous result?",
        ) from failure


def forward(ctx: Context) -> None:
    mlp = build(ctx)
    w = ctx.load_weights(mlp, SHAPES)
    x = ctx.normal(BATCH, SEQ, CONFIG.n_embd)
    no_bias = {k: (0 * v if k.endswith("bias") else v) for k, v in w.items()}
    hidden = ref.linear(x, w["c_fc.weight"], w["c_fc.bias"])

    def c_proj(h: np.ndarray) -> np.ndarray:
        return ref.linear(h, w["c_proj.weight"], w["c_proj.bias"])

    mistakes = {why: c_proj(wrong) for why, wrong in activations(hidden).items()}
    mistakes |= {
        "The biases are missing: create both Linears with bias=True.": ref.mlp(no_bias, x),
        "GELU is applied after c_proj as well: the MLP's output is c_proj's, with no "
        "activation on it.": ref.gelu(ref.mlp(w, x)),
        "GELU is applied after c_proj instead of between the layers: c_fc, GELU, then "
        "c_proj.": ref.gelu(c_proj(hidden)),
        "GELU is applied to the input, before c_fc: it goes between the two layers.": c_proj(
            ref.linear(ref.gelu(x), w["c_fc.weight"], w["c_fc.bias"])
        ),
    }
    out = run(ctx, mlp, x)
    shape = tuple(int(d) for d in getattr(out, "shape", ()))
    if shape == (BATCH, SEQ, INNER):
        raise Fail(
            f"GPT2MLP(x) has shape {list(shape)}, intermediate_size wide: c_proj is not applied.",
            "After the GELU, c_proj projects back to n_embd so the output can be added to "
            "the residual stream.",
        )
    expect_close(
        out,
        ref.mlp(w, x),
        "GPT2MLP(x)",
        mistakes,
        hint="forward is c_fc, then GELU (tanh), then c_proj.",
    )


def gelu_is_tanh_approximation(ctx: Context) -> None:
    # Weights that make the MLP compute GELU(x) itself: c_fc copies x into each
    # of 4 blocks, c_proj averages them back. Inputs cover [-4, 4], where the
    # tanh approximation and the exact GELU differ by up to 5e-4.
    E = CONFIG.n_embd
    identity = np.eye(E, dtype=np.float32)
    weights = {
        "c_fc.weight": np.tile(identity, (4, 1)),
        "c_fc.bias": np.zeros(INNER, np.float32),
        "c_proj.weight": np.tile(identity, (1, 4)) / 4,
        "c_proj.bias": np.zeros(E, np.float32),
    }
    mlp = build(ctx)
    ctx.load_weights(mlp, SHAPES, weights)
    x = np.linspace(-4, 4, 3 * E, dtype=np.float32).reshape(1, 3, E)
    out = run(ctx, mlp, x)
    expect_close(
        out,
        ref.gelu(x.astype(np.float64)),
        "GPT2MLP(x) with c_fc, c_proj set to pass x through",
        activations(x.astype(np.float64)),
        rtol=1e-5,
    )


STEP = Step(
    number=4,
    required={"GPT2MLP": ["__init__", "forward"]},
    checks=[
        Check("c_fc and c_proj are Linears shaped like GPT-2's", parameters),
        Check("the hidden width is intermediate_size", intermediate_size_is_used),
        Check("forward: c_fc -> GELU -> c_proj", forward),
        Check("GELU is the tanh approximation GPT-2 uses", gelu_is_tanh_approximation),
    ],
)
