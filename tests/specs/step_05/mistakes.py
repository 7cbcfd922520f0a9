"""The mistakes step 05's checks must name: plausible learner edits of
solutions/solution_05.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
WTE = "Embedding(config.vocab_size, dim=config.n_embd)"
MISTAKES = [
    m(
        "table sized by positions",
        "Embedding(config.vocab_size",
        "Embedding(config.n_positions",
        "wte.weight",
    ),
    m(
        "scaled output",
        "return self.wte(input_ids)",
        "return self.wte(input_ids) * 2.0",
        "output is scaled",
    ),
    m("renamed table", "self.wte = Embedding", "self.table = Embedding", "parameter names"),
    m("half width", "dim=config.n_embd", "dim=config.n_embd // 2", "wte.weight"),
    m("returns the table", "return self.wte(input_ids)", "return self.wte.weight", "shape"),
    m("sizes swapped", WTE, "Embedding(config.n_embd, dim=config.vocab_size)", "sizes swapped"),
    m("width passed positionally", WTE, "Embedding(config.vocab_size, config.n_embd)", "keyword"),
    m(
        "rows counted by positions",
        WTE,
        "Embedding(config.n_positions, dim=config.n_embd)",
        "16 rows (config.n_positions)",
    ),
    m(
        "width from n_inner",
        WTE,
        "Embedding(config.vocab_size, dim=config.n_inner)",
        "each row is config.n_embd",
    ),
    Mutant(
        "a Linear instead of an Embedding",
        (
            (
                "from max.experimental.nn import Embedding, Module",
                "from max.experimental.nn import Linear, Module",
            ),
            (WTE, "Linear(config.vocab_size, config.n_embd, bias=False)"),
        ),
        "not an Embedding",
    ),
    m("ids shifted by one", "self.wte(input_ids)", "self.wte(input_ids + 1)", "past the end"),
]
