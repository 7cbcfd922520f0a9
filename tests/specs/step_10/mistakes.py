"""The mistakes step 10's checks must name: plausible learner edits of
solutions/solution_10.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import m

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m("post-norm", "return x + sublayer(norm(x))", "return norm(x + sublayer(x))", "post-norm"),
    m(
        "no residual",
        "return x + sublayer(norm(x))",
        "return sublayer(norm(x))",
        "residual is missing",
    ),
    m("no norm", "return x + sublayer(norm(x))", "return x + sublayer(x)", "norm is skipped"),
    m(
        "normalized residual",
        "return x + sublayer(norm(x))",
        "return norm(x) + sublayer(norm(x))",
        "normalized x",
    ),
    m(
        "norm after sublayer",
        "return x + sublayer(norm(x))",
        "return x + norm(sublayer(x))",
        "output instead of its input",
    ),
    m(
        "subtracts",
        "return x + sublayer(norm(x))",
        "return x - sublayer(norm(x))",
        "subtracted from x",
    ),
    m(
        "multiplies",
        "return x + sublayer(norm(x))",
        "return x * sublayer(norm(x))",
        "multiplied with x",
    ),
    m(
        "x reassigned to norm(x)",
        "return x + sublayer(norm(x))",
        "x = norm(x)\n    return x + sublayer(x)",
        "x get reassigned",
    ),
    m(
        "norm and residual trade places",
        "return x + sublayer(norm(x))",
        "return norm(x) + sublayer(x)",
        "reads x unnormalized",
    ),
    m(
        "pre-norm and post-norm at once",
        "return x + sublayer(norm(x))",
        "return norm(x + sublayer(norm(x)))",
        "sum is normalized too",
    ),
    m(
        "sublayer output added to itself",
        "return x + sublayer(norm(x))",
        "h = sublayer(norm(x))\n    return h + h",
        "returns 12x + 2",
    ),
]
