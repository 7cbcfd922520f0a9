"""Checks for step 05: GPT2TokenEmbedding."""

from tests.checker import Check, Context, Step, expect_close, tensor
from tests.mutants import m
from tests.specs.common import BATCH, SEQ, small_config

CONFIG = small_config()
SHAPES = {"wte.weight": (CONFIG.vocab_size, CONFIG.n_embd)}


def parameters(ctx: Context) -> None:
    ctx.load_weights(ctx.build("GPT2TokenEmbedding", CONFIG), SHAPES)


def looks_up_rows(ctx: Context) -> None:
    module = ctx.build("GPT2TokenEmbedding", CONFIG)
    w = ctx.load_weights(module, SHAPES)
    ids = ctx.token_ids(CONFIG.vocab_size, BATCH, SEQ)
    ids[0, :3] = [0, CONFIG.vocab_size - 1, 5]  # both ends of the table
    table = w["wte.weight"]
    out = ctx.call("GPT2TokenEmbedding.forward", module, tensor(ids))
    expect_close(
        out,
        table[ids],
        "GPT2TokenEmbedding(input_ids)",
        {
            "The ids are off by one: look up wte(input_ids) as they are.": table[
                (ids + 1) % CONFIG.vocab_size
            ],
        },
        hint="forward should return self.wte(input_ids): row t of the table for token t.",
    )


def same_token_same_vector(ctx: Context) -> None:
    module = ctx.build("GPT2TokenEmbedding", CONFIG)
    w = ctx.load_weights(module, SHAPES)
    ids = ctx.token_ids(CONFIG.vocab_size, 1, SEQ)
    ids[0, :] = 7  # a token repeated: every position must get the same row
    out = ctx.call("GPT2TokenEmbedding.forward", module, tensor(ids))
    expect_close(
        out,
        w["wte.weight"][ids],
        "GPT2TokenEmbedding([[7, 7, ...]])",
        hint="Token embeddings do not depend on the position; positions come in step 06.",
    )


STEP = Step(
    number=5,
    title="Token embeddings",
    required={"GPT2TokenEmbedding": ["__init__", "forward"]},
    checks=[
        Check("wte is an Embedding of [vocab_size, n_embd]", parameters),
        Check("forward looks up one row per token id", looks_up_rows),
        Check("a repeated token gets the same vector everywhere", same_token_same_vector),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
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
        "wrong values",
    ),
    m("renamed table", "self.wte = Embedding", "self.table = Embedding", "parameter names"),
    m("half width", "dim=config.n_embd", "dim=config.n_embd // 2", "wte.weight"),
    m("returns the table", "return self.wte(input_ids)", "return self.wte.weight", "shape"),
]
