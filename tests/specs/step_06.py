"""Checks for step 06: GPT2Embeddings (token + position)."""

from tests import reference as ref
from tests.checker import Check, Context, Step, expect_close, tensor
from tests.mutants import m
from tests.specs.common import BATCH, SEQ, small_config

CONFIG = small_config()
SHAPES = {
    "wte.weight": (CONFIG.vocab_size, CONFIG.n_embd),
    "wpe.weight": (CONFIG.n_positions, CONFIG.n_embd),
}


def parameters(ctx: Context) -> None:
    ctx.load_weights(ctx.build("GPT2Embeddings", CONFIG), SHAPES)


def run(ctx: Context, seq: int) -> None:
    module = ctx.build("GPT2Embeddings", CONFIG)
    w = ctx.load_weights(module, SHAPES)
    ids = ctx.token_ids(CONFIG.vocab_size, BATCH, seq)
    wte, wpe = w["wte.weight"], w["wpe.weight"]
    mistakes = {
        "Position embeddings are missing: add self.wpe(positions).": wte[ids],
        "Only the position embeddings are returned: add the token embeddings wte(input_ids).": wpe[
            None, :seq
        ].repeat(BATCH, axis=0),
        "The token ids were used to index wpe: index it with the positions 0..seq-1.": wte[ids]
        + wpe[ids % CONFIG.n_positions],
    }
    if seq < CONFIG.n_positions:
        mistakes["Positions start at 1; they start at 0 (Tensor.arange(seq_length))."] = (
            wte[ids] + wpe[1 : seq + 1]
        )
    out = ctx.call("GPT2Embeddings.forward", module, tensor(ids))
    expect_close(
        out,
        ref.embeddings(w, ids),
        f"GPT2Embeddings(input_ids of shape [{BATCH}, {seq}])",
        mistakes,
        hint="Return wte(input_ids) + wpe(arange(seq_length)).",
    )


def adds_positions(ctx: Context) -> None:
    run(ctx, SEQ)


def follows_sequence_length(ctx: Context) -> None:
    for seq in (1, CONFIG.n_positions):
        run(ctx, seq)


STEP = Step(
    number=6,
    title="Position embeddings",
    required={"GPT2Embeddings": ["__init__", "forward"]},
    checks=[
        Check("wte is [vocab_size, n_embd] and wpe is [n_positions, n_embd]", parameters),
        Check("forward adds position embeddings to token embeddings", adds_positions),
        Check(
            "positions follow the input's length (1 and n_positions tokens)",
            follows_sequence_length,
        ),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m(
        "no positions",
        "return self.wte(input_ids) + self.wpe(positions)",
        "return self.wte(input_ids)",
        "Position embeddings are missing",
    ),
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
        "wpe.weight",
    ),
    m(
        "multiplied",
        "self.wte(input_ids) + self.wpe(positions)",
        "self.wte(input_ids) * self.wpe(positions)",
        "wrong values",
    ),
    m(
        "only positions",
        "return self.wte(input_ids) + self.wpe(positions)",
        "return self.wpe(positions) + 0 * self.wte(input_ids)",
        "Only the position embeddings",
    ),
    m(
        "fixed length positions",
        "Tensor.arange(seq_length,",
        "Tensor.arange(7,",
        "positions follow",
    ),
]
