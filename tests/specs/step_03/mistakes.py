"""The mistakes step 03's checks must name: plausible learner edits of
solutions/solution_03.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

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
