"""The mistakes step 13's checks must name: plausible learner edits of
solutions/solution_13.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
TIE = "self.lm_head.weight = self.transformer.wte.weight"
FORWARD = "return self.lm_head(self.transformer(input_ids))"
MISTAKES = [
    m("returns hidden states", FORWARD, "return self.transformer(input_ids)", "hidden states"),
    m(
        "head with bias",
        "Linear(config.n_embd, config.vocab_size, bias=False)",
        "Linear(config.n_embd, config.vocab_size, bias=True)",
        "lm_head has a bias",
    ),
    m(
        "head with the default bias",
        "Linear(config.n_embd, config.vocab_size, bias=False)",
        "Linear(config.n_embd, config.vocab_size)",
        "lm_head has a bias",
    ),
    m("not tied", TIE, "pass", "not tied"),
    m("tied to a copy", TIE, f"{TIE} * 1.0", "a copy, not the same tensor"),
    m("tied to wpe", TIE, "self.lm_head.weight = self.transformer.wpe.weight", "position table"),
    m("tied to the transposed table", TIE, f"{TIE}.T", "table transposed"),
    m(
        "head is the embedding module",
        "self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)",
        "self.lm_head = self.transformer.wte",
        "not a Linear",
    ),
    Mutant(
        "softmax applied",
        (
            (
                "from max.experimental.nn import",
                "from max.experimental import functional as F\nfrom max.experimental.nn import",
            ),
            (FORWARD, "return F.softmax(self.lm_head(self.transformer(input_ids)), axis=-1)"),
        ),
        "Softmax",
    ),
    m(
        "ln_f applied again",
        FORWARD,
        "return self.lm_head(self.transformer.ln_f(self.transformer(input_ids)))",
        "ln_f is applied twice",
    ),
    Mutant(
        "ln_f skipped",
        (
            (
                "from max.experimental.tensor import Tensor",
                "from max.dtype import DType\nfrom max.experimental.tensor import Tensor",
            ),
            (
                FORWARD,
                "body = self.transformer\n"
                "        positions = Tensor.arange(input_ids.shape[-1], dtype=DType.int64)\n"
                "        hidden = body.wte(input_ids) + body.wpe(positions)\n"
                "        for block in body.h:\n"
                "            hidden = block(hidden)\n"
                "        return self.lm_head(hidden)",
            ),
        ),
        "ln_f is skipped",
    ),
    m("only the last position", FORWARD, f"{FORWARD}[:, -1]", "only the last position"),
    m(
        "renamed body",
        "self.transformer = GPT2Model(config)\n",
        "self.body = GPT2Model(config)\n        self.transformer = self.body\n",
        "parameter names",
    ),
]
