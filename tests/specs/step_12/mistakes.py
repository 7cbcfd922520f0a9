"""The mistakes step 12's checks must name: plausible learner edits of
solutions/solution_12.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
H = "self.h = ModuleList([GPT2Block(config) for _ in range(config.n_layer)])"
EMBED = "hidden_states = self.wte(input_ids) + self.wpe(positions)"
LOOP = "hidden_states = block(hidden_states)"
MISTAKES = [
    m(
        "ln_f without the config's epsilon",
        "self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)",
        "self.ln_f = LayerNorm(config.n_embd)",
        "default epsilon",
    ),
    m(
        "no ln_f",
        "return self.ln_f(hidden_states)",
        "return hidden_states",
        "ln_f is not applied",
    ),
    m(
        "first block only",
        "for block in self.h:",
        "for block in list(self.h)[:1]:",
        "Only the first block",
    ),
    m(
        "one block too few",
        "for _ in range(config.n_layer)",
        "for _ in range(config.n_layer - 1)",
        "h holds 2 blocks, one too few; GPT-2 has config.n_layer = 3",
    ),
    m(
        "one block too many",
        "for _ in range(config.n_layer)",
        "for _ in range(config.n_layer + 1)",
        "h holds 4 blocks, one too many",
    ),
    m(
        "n_head blocks",
        "for _ in range(config.n_layer)",
        "for _ in range(config.n_head)",
        "(config.n_head)",
    ),
    m(
        "reversed blocks",
        "for block in self.h:",
        "for block in reversed(list(self.h)):",
        "reverse order",
    ),
    m(
        "no positions",
        EMBED,
        "hidden_states = self.wte(input_ids)",
        "Position embeddings are missing",
    ),
    m(
        "ln_f default eps",
        "self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)",
        "self.ln_f = LayerNorm(config.n_embd, eps=0.1)",
        "wrong values",
    ),
    m(
        "one block repeated",
        H,
        "self.h = ModuleList([GPT2Block(config)] * config.n_layer)",
        "h[0] and h[1] are the same block object",
    ),
    m(
        "one block reused in a comprehension",
        H,
        "block = GPT2Block(config)\n        self.h = ModuleList([block for _ in range(config.n_layer)])",
        "same block object",
    ),
    m(
        "ln_f after every block",
        LOOP,
        "hidden_states = self.ln_f(block(hidden_states))",
        "after every block",
    ),
    Mutant(
        "every block reads the embeddings",
        (
            (EMBED, "embeddings = self.wte(input_ids) + self.wpe(positions)"),
            ("for block in self.h:", "hidden_states = embeddings\n        for block in self.h:"),
            (LOOP, "hidden_states = block(embeddings)"),
        ),
        "Only the last block's output arrives",
    ),
    m(
        "positions looked up in wte",
        "self.wpe(positions)",
        "self.wte(positions)",
        "looked up in wte",
    ),
    m(
        "float positions",
        "dtype=DType.int64, ",
        "",
        "integer dtype",
    ),
    m(
        "wpe sized by vocab",
        "self.wpe = Embedding(config.n_positions",
        "self.wpe = Embedding(config.vocab_size",
        "97 rows (config.vocab_size)",
    ),
]
