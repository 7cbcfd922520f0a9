"""The mistakes step 20's checks must name: plausible learner edits of
solutions/solution_20.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

NORM = "return x * F.rsqrt(mean_square + self.eps) * self.weight"
MEAN_SQUARE = "mean_square = (x * x).mean(axis=-1)"
GATED = "gated = F.silu(self.gate_proj(x)) * self.up_proj(x)"

MISTAKES = [
    # RMSNorm
    m(
        "weight starts at 0",
        "self.weight = Tensor.ones([dim])",
        "self.weight = Tensor.zeros([dim])",
        "should be 1",
    ),
    Mutant(
        "a bias as in LayerNorm",
        (
            ("self.eps = eps", "self.eps = eps\n        self.bias = Tensor.zeros([dim])"),
            (NORM, NORM + " + self.bias"),
        ),
        "has none",
    ),
    m("eps hard-coded", "self.eps = eps", "self.eps = 1e-6", "eps is not the one passed"),
    Mutant(
        "mean subtracted (LayerNorm)",
        ((MEAN_SQUARE, "x = x - x.mean(axis=-1)\n        " + MEAN_SQUARE),),
        "that is LayerNorm",
    ),
    m(
        "eps outside the root",
        NORM,
        "return x / (F.sqrt(mean_square) + self.eps) * self.weight",
        "after the square root",
    ),
    m("eps missing", NORM, "return x * F.rsqrt(mean_square) * self.weight", "eps is missing"),
    m(
        "no square root",
        NORM,
        "return x / (mean_square + self.eps) * self.weight",
        "not by its square root",
    ),
    m("sum of squares", MEAN_SQUARE, "mean_square = (x * x).sum(axis=-1)", "summed, not averaged"),
    m("weight not applied", NORM, "return x * F.rsqrt(mean_square + self.eps)", "does not scale"),
    m(
        "weight under the root",
        NORM,
        "return x * F.rsqrt(mean_square * self.weight + self.eps)",
        "applied under the root",
    ),
    m(
        "weight added, not multiplied",
        NORM,
        "return x * F.rsqrt(mean_square + self.eps) + self.weight",
        "the weight is added",
    ),
    m(
        "divided by the weight",
        NORM,
        "return x * F.rsqrt(mean_square + self.eps) / self.weight",
        "the weight is applied wrongly",
    ),
    m("over the sequence axis", MEAN_SQUARE, "mean_square = (x * x).mean(axis=1)", "sequence axis"),
    # the MLP
    m(
        "biases",
        "self.gate_proj = Linear(hidden_size, intermediate_size, bias=False)",
        "self.gate_proj = Linear(hidden_size, intermediate_size, bias=True)",
        "have none",
    ),
    m(
        "down_proj the wrong way round",
        "self.down_proj = Linear(intermediate_size, hidden_size, bias=False)",
        "self.down_proj = Linear(hidden_size, intermediate_size, bias=False)",
        "down_proj.weight",
    ),
    m(
        "SiLU on up",
        GATED,
        "gated = self.gate_proj(x) * F.silu(self.up_proj(x))",
        "belongs on gate_proj",
    ),
    m(
        "GELU instead of SiLU",
        GATED,
        'gated = F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x)',
        "GELU is used",
    ),
    m("no activation", GATED, "gated = self.gate_proj(x) * self.up_proj(x)", "no activation"),
    m(
        "sigmoid instead of SiLU",
        GATED,
        "gated = F.sigmoid(self.gate_proj(x)) * self.up_proj(x)",
        "plain sigmoid",
    ),
    m(
        "added, not multiplied",
        GATED,
        "gated = F.silu(self.gate_proj(x)) + self.up_proj(x)",
        "added",
    ),
    m(
        "GELU (exact) instead of SiLU",
        GATED,
        "gated = F.gelu(self.gate_proj(x)) * self.up_proj(x)",
        "GELU (exact) is used",
    ),
    m("up_proj left out", GATED, "gated = F.silu(self.gate_proj(x))", "up_proj is left out"),
    m(
        "gate_proj used twice",
        GATED,
        "gated = F.silu(self.gate_proj(x)) * self.gate_proj(x)",
        "up_proj's never",
    ),
    m(
        "up_proj used twice",
        GATED,
        "gated = F.silu(self.up_proj(x)) * self.up_proj(x)",
        "gate_proj's never",
    ),
    m(
        "SiLU of the product",
        GATED,
        "gated = F.silu(self.gate_proj(x) * self.up_proj(x))",
        "SiLU is applied to the product",
    ),
    m(
        "SiLU after down_proj",
        "return self.down_proj(gated)",
        "return F.silu(self.down_proj(self.gate_proj(x) * self.up_proj(x)))",
        "SiLU is applied after down_proj",
    ),
    m(
        "down_proj on each factor",
        "return self.down_proj(gated)",
        "return self.down_proj(F.silu(self.gate_proj(x))) * self.down_proj(self.up_proj(x))",
        "down_proj is applied to each factor",
    ),
    m(
        "down_proj skipped",
        "return self.down_proj(gated)",
        "return gated",
        "down_proj is not applied",
    ),
]
