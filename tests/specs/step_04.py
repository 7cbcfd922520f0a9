"""Checks for step 04: GPT2MLP."""

import numpy as np

from tests import reference as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.checker.engine import parameter_shapes
from tests.mistakes import Mutant, m
from tests.specs.common import BATCH, SEQ, linear_shapes, small_config

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


# Hint ladders: what to look at; the API or the shapes; the line.
INIT_LINES = (
    "```python\nself.c_fc = Linear(embed_dim, intermediate_size, bias=True)\n"
    "self.c_proj = Linear(intermediate_size, embed_dim, bias=True)\n```"
)
FORWARD_LINES = (
    "```python\nhidden_states = self.c_fc(hidden_states)\n"
    'hidden_states = F.gelu(hidden_states, approximate="tanh")\n'
    "return self.c_proj(hidden_states)\n```"
)
GELU_LINE = '```python\nhidden_states = F.gelu(hidden_states, approximate="tanh")\n```'

PARAMETERS_HINTS = {
    "has no bias": (
        "A layer was built without its bias. Every `Linear` of GPT-2 adds one, and the "
        "checkpoint has a `c_fc.bias` and a `c_proj.bias` to load.",
        "`Linear(in_dim, out_dim, bias=...)`: the `bias` argument decides whether the layer "
        "has a `bias` parameter of shape `[out_dim]`.",
        INIT_LINES,
    ),
    "swapped": (
        "A weight comes out transposed: the layer's input and output sizes are exchanged. "
        "`c_fc` widens, `c_proj` narrows.",
        "`Linear(in_dim, out_dim)` stores its weight as `[out_dim, in_dim]`. `c_fc` goes "
        "from `embed_dim` to `intermediate_size`, `c_proj` the other way.",
        INIT_LINES,
    ),
    "": (
        "The parameter names or shapes differ from GPT-2's. The two layers must be the "
        "attributes `c_fc` and `c_proj`: pretrained weights load by those names.",
        "Two `Linear(in_dim, out_dim, bias=...)`: `c_fc` from `embed_dim` to "
        "`intermediate_size`, `c_proj` back; weights `[intermediate_size, embed_dim]` and "
        "`[embed_dim, intermediate_size]`.",
        INIT_LINES,
    ),
}

WIDTH_HINTS = (
    "`GPT2MLP(96, config)` must be 96 wide: the hidden width is the constructor's "
    "`intermediate_size` argument, not a number computed from the config.",
    "`c_fc`'s output size and `c_proj`'s input size are both `intermediate_size`; only "
    "`embed_dim` comes from the config.",
    INIT_LINES,
)

GELU_VARIANT = (
    "The activation is a GELU, but not the variant GPT-2 was trained with.",
    '`F.gelu(x, approximate=...)` offers `"none"` (exact, the default), `"tanh"` '
    'and `"quick"` (sigmoid). GPT-2 uses the tanh one, Hugging Face\'s `gelu_new`.',
    GELU_LINE,
)

FORWARD_HINTS = {
    "is the order right": (
        "`forward` raised: a layer received a tensor of the wrong width. Follow the "
        "shapes through the three stages.",
        "`c_fc` takes `n_embd` features and returns `intermediate_size`; `c_proj` takes "
        "`intermediate_size` and returns `n_embd`. Each stage is applied to the previous "
        "stage's result.",
        FORWARD_LINES,
    ),
    "c_proj is not applied": (
        "The output is as wide as the hidden layer: the second layer never runs.",
        "A `Linear` module is called like a function, `layer(x)`. The output must be "
        "`[batch, seq, n_embd]`, like the input.",
        FORWARD_LINES,
    ),
    "after c_proj": (
        "The activation is in the wrong place: GELU goes between the two layers, and the "
        "MLP's output is `c_proj`'s, untouched.",
        "Three stages in order: `c_fc` (widen), `F.gelu(..., approximate=...)`, `c_proj` (narrow).",
        FORWARD_LINES,
    ),
    "before c_fc": (
        "The activation is applied to the input. GELU acts on the *wide* hidden layer, "
        "between `c_fc` and `c_proj`.",
        "Three stages in order: `c_fc` (widen), `F.gelu(..., approximate=...)`, `c_proj` (narrow).",
        FORWARD_LINES,
    ),
    "activation is missing": (
        "Nothing happens between the two layers. Two linear layers in a row are one linear "
        "layer: the non-linearity is what lets the MLP compute something.",
        "`F.gelu(x, approximate=...)` on `c_fc`'s output, before `c_proj`.",
        FORWARD_LINES,
    ),
    "relu": (
        "The activation is ReLU. GPT-2 uses GELU, which is smooth around 0 and lets small "
        "negative values through.",
        "`F.gelu(x, approximate=...)`: GPT-2 was trained with the tanh approximation.",
        GELU_LINE,
    ),
    "silu": (
        "The activation is SiLU (`x * sigmoid(x)`), the one of LLaMA-style MLPs. GPT-2 uses GELU.",
        "`F.gelu(x, approximate=...)`: GPT-2 was trained with the tanh approximation.",
        GELU_LINE,
    ),
    "quick": GELU_VARIANT,
    "exact (erf)": GELU_VARIANT,
    "": (
        "`forward` is three stages: widen with `c_fc`, GELU, narrow with `c_proj`, each "
        "applied to the previous result.",
        "`[batch, seq, n_embd]` -> `c_fc` -> `[batch, seq, intermediate_size]` -> "
        "`F.gelu(..., approximate=...)` -> `c_proj` -> `[batch, seq, n_embd]`.",
        FORWARD_LINES,
    ),
}

GELU_HINTS = {
    "activation is missing": FORWARD_HINTS["activation is missing"],
    "relu": FORWARD_HINTS["relu"],
    "silu": FORWARD_HINTS["silu"],
    "": (
        "With weights that pass `x` straight through, the MLP's output is the activation "
        "itself, and it is not GPT-2's GELU. The exact GELU and its tanh approximation "
        "differ by less than 1e-3: only this check sees it.",
        '`F.gelu(x, approximate=...)` defaults to `"none"`, the exact erf form. GPT-2 '
        'was trained with `"tanh"`, `0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))`.',
        GELU_LINE,
    ),
}

STEP = Step(
    number=4,
    required={"GPT2MLP": ["__init__", "forward"]},
    checks=[
        Check("c_fc and c_proj are Linears shaped like GPT-2's", parameters, PARAMETERS_HINTS),
        Check("the hidden width is intermediate_size", intermediate_size_is_used, WIDTH_HINTS),
        Check("forward: c_fc -> GELU -> c_proj", forward, FORWARD_HINTS),
        Check("GELU is the tanh approximation GPT-2 uses", gelu_is_tanh_approximation, GELU_HINTS),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
C_FC = "Linear(embed_dim, intermediate_size, bias=True)"
C_PROJ = "Linear(intermediate_size, embed_dim, bias=True)"
GELU = 'hidden_states = F.gelu(hidden_states, approximate="tanh")'
RETURN = "return self.c_proj(hidden_states)"
MISTAKES = [
    m("exact GELU", 'approximate="tanh"', 'approximate="none"', "tanh approximation"),
    m("GELU's default (exact)", ', approximate="tanh")', ")", "exact (erf) GELU"),
    m("quick GELU", 'approximate="tanh"', 'approximate="quick"', "quick"),
    m("ReLU", 'F.gelu(hidden_states, approximate="tanh")', "F.relu(hidden_states)", "ReLU"),
    m("SiLU", 'F.gelu(hidden_states, approximate="tanh")', "F.silu(hidden_states)", "SiLU"),
    m("no bias on c_fc", C_FC, "Linear(embed_dim, intermediate_size, bias=False)", "has no bias"),
    m(
        "no bias on c_proj",
        C_PROJ,
        "Linear(intermediate_size, embed_dim, bias=False)",
        "bias=False",
    ),
    m("no c_proj in forward", RETURN, "return hidden_states", "c_proj is not applied"),
    m("c_fc dims swapped", C_FC, "Linear(intermediate_size, embed_dim, bias=True)", "swapped"),
    m("c_proj dims swapped", C_PROJ, "Linear(embed_dim, intermediate_size, bias=True)", "swapped"),
    Mutant(
        "c_fc and c_proj exchanged",
        (
            ("self.c_fc = " + C_FC, "self.c_fc = " + C_PROJ),
            ("self.c_proj = " + C_PROJ, "self.c_proj = " + C_FC),
        ),
        "swapped",
    ),
    m("no activation", GELU, "pass", "activation is missing"),
    m("GELU after c_proj too", RETURN, "return F.gelu(self.c_proj(hidden_states))", "after c_proj"),
    Mutant(
        "GELU after c_proj instead",
        ((GELU, "pass"), (RETURN, 'return F.gelu(self.c_proj(hidden_states), approximate="tanh")')),
        "after c_proj",
    ),
    Mutant(
        "GELU before c_fc",
        (
            ("hidden_states = self.c_fc(hidden_states)", "pass"),
            (GELU, GELU + "\n        hidden_states = self.c_fc(hidden_states)"),
        ),
        "before c_fc",
    ),
    m(
        "c_proj before c_fc",
        "hidden_states = self.c_fc(hidden_states)",
        "hidden_states = self.c_proj(hidden_states)",
        "is the order right",
    ),
    Mutant(
        "width read from config.n_inner",
        (
            (C_FC, "Linear(embed_dim, config.n_inner, bias=True)"),
            (C_PROJ, "Linear(config.n_inner, embed_dim, bias=True)"),
        ),
        "not the intermediate_size argument",
    ),
    m(
        "fixed 4x width",
        "Linear(embed_dim, intermediate_size, bias=True)\n",
        "Linear(embed_dim, 4 * embed_dim, bias=True)\n",
        "not the intermediate_size argument",
    ),
]
