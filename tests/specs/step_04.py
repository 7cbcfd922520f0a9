"""Checks for step 04: GPT2MLP."""

import numpy as np

from tests import reference as ref
from tests.checker import Check, Context, Step, expect_close, tensor
from tests.mutants import m
from tests.specs.common import BATCH, SEQ, linear_shapes, small_config

CONFIG = small_config()
INNER = 4 * CONFIG.n_embd
SHAPES = {
    **linear_shapes("c_fc", CONFIG.n_embd, INNER),
    **linear_shapes("c_proj", INNER, CONFIG.n_embd),
}


def parameters(ctx: Context) -> None:
    ctx.load_weights(ctx.build("GPT2MLP", INNER, CONFIG), SHAPES)


def intermediate_size_is_used(ctx: Context) -> None:
    wide = {
        **linear_shapes("c_fc", CONFIG.n_embd, 96),
        **linear_shapes("c_proj", 96, CONFIG.n_embd),
    }
    ctx.load_weights(ctx.build("GPT2MLP", 96, CONFIG), wide)


def forward(ctx: Context) -> None:
    mlp = ctx.build("GPT2MLP", INNER, CONFIG)
    w = ctx.load_weights(mlp, SHAPES)
    x = ctx.normal(BATCH, SEQ, CONFIG.n_embd)
    no_bias = {k: (0 * v if k.endswith("bias") else v) for k, v in w.items()}
    hidden = ref.linear(x, w["c_fc.weight"], w["c_fc.bias"])
    mistakes = {
        "This is the exact (erf) GELU; GPT-2 uses the tanh approximation: "
        "F.gelu(x, approximate='tanh').": ref.mlp(w, x, approximate="none"),
        "This looks like ReLU; GPT-2 uses GELU with the tanh approximation.": ref.linear(
            hidden.clip(0), w["c_proj.weight"], w["c_proj.bias"]
        ),
        "The activation is missing between c_fc and c_proj.": ref.linear(
            hidden, w["c_proj.weight"], w["c_proj.bias"]
        ),
        "The biases are missing: create both Linears with bias=True.": ref.mlp(no_bias, x),
        "c_proj is not applied: project back to n_embd after the GELU.": ref.gelu(hidden)[
            ..., : CONFIG.n_embd
        ],
    }
    out = ctx.call("GPT2MLP.forward", mlp, tensor(x))
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
    mlp = ctx.build("GPT2MLP", INNER, CONFIG)
    ctx.load_weights(mlp, SHAPES, weights)
    x = np.linspace(-4, 4, 3 * E, dtype=np.float32).reshape(1, 3, E)
    out = ctx.call("GPT2MLP.forward", mlp, tensor(x))
    expect_close(
        out,
        ref.gelu(x.astype(np.float64)),
        "GPT2MLP(x) with c_fc, c_proj set to pass x through",
        {
            "This is the exact (erf) GELU; GPT-2 uses the tanh approximation: "
            "F.gelu(x, approximate='tanh').": ref.gelu(x.astype(np.float64), approximate="none"),
        },
        rtol=1e-5,
    )


STEP = Step(
    number=4,
    title="Feed-forward network",
    required={"GPT2MLP": ["__init__", "forward"]},
    checks=[
        Check("c_fc and c_proj are Linears shaped like GPT-2's", parameters),
        Check("the hidden width is intermediate_size", intermediate_size_is_used),
        Check("forward: c_fc -> GELU -> c_proj", forward),
        Check("GELU is the tanh approximation GPT-2 uses", gelu_is_tanh_approximation),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m("exact GELU", 'approximate="tanh"', 'approximate="none"', "tanh approximation"),
    m("ReLU", 'F.gelu(hidden_states, approximate="tanh")', "F.relu(hidden_states)", "ReLU"),
    m(
        "no bias on c_fc",
        "Linear(embed_dim, intermediate_size, bias=True)",
        "Linear(embed_dim, intermediate_size, bias=False)",
        "c_fc.bias",
    ),
    m(
        "no c_proj in forward",
        "return self.c_proj(hidden_states)",
        "return hidden_states",
        "shape",
    ),
    m(
        "c_fc dims swapped",
        "Linear(embed_dim, intermediate_size, bias=True)",
        "Linear(intermediate_size, embed_dim, bias=True)",
        "swapped",
    ),
    m(
        "no activation",
        'hidden_states = F.gelu(hidden_states, approximate="tanh")',
        "pass",
        "activation is missing",
    ),
    m(
        "fixed 4x width",
        "Linear(embed_dim, intermediate_size, bias=True)\n",
        "Linear(embed_dim, 4 * embed_dim, bias=True)\n",
        "c_fc.weight",
    ),
]
