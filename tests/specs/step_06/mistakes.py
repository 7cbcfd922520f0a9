"""The mistakes step 06's checks must name: plausible learner edits of
solutions/solution_06.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
SUM = "return self.wte(input_ids) + self.wpe(positions)"
WPE = "self.wpe = Embedding(config.n_positions, dim=config.n_embd)"
MISTAKES = [
    m("no positions", SUM, "return self.wte(input_ids)", "Position embeddings are missing"),
    m(
        "positions from 1",
        "Tensor.arange(seq_length,",
        "Tensor.arange(1, seq_length + 1,",
        "start at 1",
    ),
    m(
        "wpe sized by vocab",
        "self.wpe = Embedding(config.n_positions",
        "self.wpe = Embedding(config.vocab_size",
        "97 rows (config.vocab_size)",
    ),
    m(
        "multiplied",
        "self.wte(input_ids) + self.wpe(positions)",
        "self.wte(input_ids) * self.wpe(positions)",
        "multiplied",
    ),
    m(
        "only positions",
        SUM,
        "return self.wpe(positions) + 0 * self.wte(input_ids)",
        "Only the position embeddings",
    ),
    m(
        "fixed length positions",
        "Tensor.arange(seq_length,",
        "Tensor.arange(7,",
        "positions follow",
    ),
    m("positions without a dtype", "dtype=DType.int64, ", "", "integer dtype"),
    m("float positions", "dtype=DType.int64", "dtype=DType.float32", "float32 indices"),
    m(
        "wpe sizes swapped",
        WPE,
        "self.wpe = Embedding(config.n_embd, dim=config.n_positions)",
        "sizes swapped",
    ),
    m(
        "positions looked up in wte",
        SUM,
        "return self.wte(input_ids) + self.wte(positions)",
        "looked up in wte",
    ),
    m(
        "token ids looked up in wpe",
        SUM,
        "return self.wte(input_ids) + self.wpe(input_ids)",
        "token ids (up to 96) looked up in wpe",
    ),
    m("one table for both", WPE, "self.wpe = self.wte", "same Embedding object"),
    m(
        "as many positions as the batch",
        "Tensor.arange(seq_length,",
        "Tensor.arange(input_ids.shape[0],",
        "not the batch size",
    ),
    Mutant(
        "positions on CPU()",
        (
            (
                "from max.dtype import DType",
                "from max.driver import CPU\nfrom max.dtype import DType",
            ),
            ("device=input_ids.device", "device=CPU()"),
        ),
        "positions are made on CPU(), not on the device of input_ids",
    ),
    m(
        "positions on the default device",
        ", device=input_ids.device",
        "",
        "positions are made on the default device",
    ),
]
