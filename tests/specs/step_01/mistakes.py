"""The mistakes step 01's checks must name: plausible learner edits of
solutions/solution_01.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m("vocab off by one", "vocab_size: int = 50257", "vocab_size: int = 50256", "<|endoftext|>"),
    m("vocab merges only", "vocab_size: int = 50257", "vocab_size: int = 50000", "256 byte"),
    m(
        "eps 1e-6",
        "layer_norm_epsilon: float = 1e-5",
        "layer_norm_epsilon: float = 1e-6",
        "layer_norm_epsilon",
    ),
    m(
        "eps written 10e-5",
        "layer_norm_epsilon: float = 1e-5",
        "layer_norm_epsilon: float = 10e-5",
        "10e-5",
    ),
    m("n_inner hard-coded", "self.n_inner = 4 * self.n_embd", "self.n_inner = 3072", "n_embd=64"),
    m("n_inner always overwritten", "if self.n_inner is None:", "if True:", "n_inner=100"),
    m(
        "n_inner a float",
        "self.n_inner = 4 * self.n_embd",
        "self.n_inner = self.n_embd / 0.25",
        "keep it an int",
    ),
    m("not a dataclass", "@dataclass\nclass", "class", "dataclass"),
    m("n_head 16", "n_head: int = 12", "n_head: int = 16", "n_head"),
    m(
        "eps zero",
        "layer_norm_epsilon: float = 1e-5",
        "layer_norm_epsilon: float = 0",
        "layer_norm_epsilon",
    ),
    m("n_embd a float", "n_embd: int = 768", "n_embd: int = 768.0", "the float 768.0"),
    Mutant(
        "n_positions and n_embd swapped",
        (
            ("n_positions: int = 1024", "n_positions: int = 768"),
            ("n_embd: int = 768", "n_embd: int = 1024"),
        ),
        "swapped",
    ),
    m("n_layer not annotated", "n_layer: int = 12", "n_layer = 12", "not a dataclass field"),
    m(
        "n_positions forgotten",
        "    n_positions: int = 1024  # longest sequence the position table covers\n",
        "",
        "no field `n_positions`",
    ),
    Mutant(
        "n_embd renamed hidden_size",
        (
            ("n_embd: int = 768", "hidden_size: int = 768"),
            ("4 * self.n_embd", "4 * self.hidden_size"),
        ),
        "renamed",
    ),
]
