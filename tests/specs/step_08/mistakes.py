"""The mistakes step 08's checks must name: plausible learner edits of
solutions/solution_08.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
SCALE = "scores = scores / math.sqrt(int(head_dim))"
MISTAKES = [
    m("no scale", SCALE, "scores = scores", "not scaled"),
    m("scale by head_dim", "math.sqrt(int(head_dim))", "int(head_dim)", "divided by head_dim"),
    m("no mask", "scores = scores + mask", "scores = scores", "causal mask"),
    m(
        "softmax over queries",
        "F.softmax(scores, axis=-1)",
        "F.softmax(scores, axis=-2)",
        "wrong axis",
    ),
    Mutant(
        "mask after softmax",
        (
            ("scores = scores + mask\n", ""),
            (
                "weights = F.softmax(scores, axis=-1)\n",
                "weights = F.softmax(scores, axis=-1) + mask\n",
            ),
        ),
        "after the softmax",
    ),
    m("no key transpose", "query @ key.transpose(-1, -2)", "query @ key", "raised"),
    m(
        "multiplied by sqrt",
        "scores = scores / math.sqrt",
        "scores = scores * math.sqrt",
        "multiplied",
    ),
    m("sqrt of a Dim", "math.sqrt(int(head_dim))", "math.sqrt(head_dim)", "int(...)"),
    m("Dim ** 0.5", "math.sqrt(int(head_dim))", "head_dim ** 0.5", "is a MAX Dim"),
    m(
        "scale by the sequence length",
        "math.sqrt(int(head_dim))",
        "math.sqrt(int(seq_length))",
        "sqrt(seq_length)",
    ),
    m(
        "key @ query^T",
        "query @ key.transpose(-1, -2)",
        "key @ query.transpose(-1, -2)",
        "scores are transposed",
    ),
    m(
        "key transposed on the wrong axes",
        "query @ key.transpose(-1, -2)",
        "query @ key.transpose(1, 2)",
        "swap key's last two axes",
    ),
    m("no key transpose, named", "query @ key.transpose(-1, -2)", "query @ key", "key's last two"),
    m("mask multiplied", "scores = scores + mask", "scores = scores * mask", "mask is multiplied"),
    m(
        "softmax over axis 1",
        "F.softmax(scores, axis=-1)",
        "F.softmax(scores, axis=1)",
        "axis 1, the heads",
    ),
    m("returns the weights", "return weights @ value", "return weights", "attention weights"),
    m("value @ weights", "return weights @ value", "return value @ weights", "wrong way round"),
    m(
        "mask for one cached token",
        "causal_mask(seq_length, 0,",
        "causal_mask(seq_length, 1,",
        "num_tokens = 0",
    ),
    Mutant(
        "mask in a hard-coded float32",
        (
            ("import math\n", "import math\n\nfrom max.dtype import DType\n"),
            ("dtype=scores.dtype", "dtype=DType.float32"),
        ),
        "hard-coded dtype (DType.float32)",
    ),
]
