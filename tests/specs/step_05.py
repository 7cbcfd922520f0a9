"""Checks for step 05: GPT2TokenEmbedding."""

from tests.checker import Check, Context, Fail, Step, expect_close
from tests.mistakes import Mutant, m
from tests.specs.common import (
    BATCH,
    SEQ,
    build_with_tables,
    call_with_lookups,
    small_config,
)

CONFIG = small_config()
SHAPES = {"wte.weight": (CONFIG.vocab_size, CONFIG.n_embd)}
TABLES = {"wte": ("vocab_size", "vocabulary entry")}


def build(ctx: Context):
    return build_with_tables(ctx, "GPT2TokenEmbedding", CONFIG, TABLES, SHAPES)


def parameters(ctx: Context) -> None:
    build(ctx)


def look_up(ctx: Context, module, ids):
    tables = (
        f"wte has vocab_size = {CONFIG.vocab_size} rows, 0 to {CONFIG.vocab_size - 1}, "
        "and the ids already are row numbers: were they shifted?"
    )
    return call_with_lookups(ctx, "GPT2TokenEmbedding.forward", module, ids, tables)


def looks_up_rows(ctx: Context) -> None:
    module, w = build(ctx)
    ids = ctx.token_ids(CONFIG.vocab_size, BATCH, SEQ)
    ids[0, :3] = [0, CONFIG.vocab_size - 1, 5]  # both ends of the table
    table = w["wte.weight"]
    out = look_up(ctx, module, ids)
    if tuple(int(d) for d in getattr(out, "shape", ())) == table.shape:
        raise Fail(
            f"GPT2TokenEmbedding(input_ids) has shape {list(table.shape)}: that is the whole "
            "table, not the rows of the ids.",
            "Calling the Embedding module on the ids looks them up; its weight is the table "
            "itself.",
        )
    expect_close(
        out,
        table[ids],
        "GPT2TokenEmbedding(input_ids)",
        {
            "The ids are off by one: look the ids up as they are.": table[
                (ids + 1) % CONFIG.vocab_size
            ],
            "The output is scaled: the lookup returns the table's rows unchanged.": 2 * table[ids],
        },
        hint="forward returns the Embedding's rows for the ids, unchanged: row t for token t.",
    )


def same_token_same_vector(ctx: Context) -> None:
    module, w = build(ctx)
    ids = ctx.token_ids(CONFIG.vocab_size, 1, SEQ)
    ids[0, :] = 7  # a token repeated: every position must get the same row
    out = look_up(ctx, module, ids)
    expect_close(
        out,
        w["wte.weight"][ids],
        "GPT2TokenEmbedding([[7, 7, ...]])",
        hint="Token embeddings do not depend on the position; positions come in step 06.",
    )


# Hint ladders: what to look at; the API or the shapes; the line.
INIT_LINE = "```python\nself.wte = Embedding(config.vocab_size, dim=config.n_embd)\n```"
FORWARD_LINE = "```python\nreturn self.wte(input_ids)\n```"

PARAMETERS_HINTS = {
    "swapped": (
        "The table comes out transposed: its two sizes are exchanged. A token table has "
        "one *row* per vocabulary entry.",
        "`Embedding(num_rows, dim=width)` stores `[num_rows, width]`. Here the rows are "
        "`config.vocab_size` and the width `config.n_embd`.",
        INIT_LINE,
    ),
    "keyword-only": (
        "`Embedding` refused its arguments: unlike PyTorch's `nn.Embedding`, MAX's takes "
        "the width by name.",
        "The signature is `Embedding(vocab_size, *, dim)`: the number of rows "
        "positionally, then `dim=...`.",
        INIT_LINE,
    ),
    "not an embedding": (
        "`wte` is some other kind of layer. Multiplying a one-hot vector by a matrix would "
        "pick a row too, but the ids are row numbers: look them up.",
        "`max.experimental.nn.Embedding(num_rows, dim=width)` holds the table and gathers "
        "rows when called. It has one parameter, `weight`, and no bias.",
        INIT_LINE,
    ),
    "": (
        "The table's name or shape differs from GPT-2's. The attribute must be `wte`, so "
        "the parameter is `wte.weight`, the checkpoint's name; the message says which size "
        "is off and which config field it came from.",
        "One `Embedding(num_rows, dim=width)`: `config.vocab_size` rows (one per token id), "
        "each `config.n_embd` wide: `[vocab_size, n_embd]`.",
        INIT_LINE,
    ),
}

LOOKUP_HINTS = {
    "past the end": (
        "An index fell outside the table. The ids are already row numbers, 0 to "
        "`vocab_size - 1`: use them as they are.",
        "Calling an `Embedding` on an integer tensor of shape `[batch, seq]` returns "
        "`[batch, seq, n_embd]`, row `t` for every id `t`; no shift, no conversion.",
        FORWARD_LINE,
    ),
    "whole table": (
        "The output is the table itself: nothing was looked up.",
        "`wte.weight` is the `[vocab_size, n_embd]` table; calling the module `wte` like a "
        "function on the ids returns their rows, `[batch, seq, n_embd]`.",
        FORWARD_LINE,
    ),
    "": (
        "`forward` must return, for every id, its row of the table, and nothing else: no "
        "scaling, no shift, no sum.",
        "A module is called like a function: `Embedding` called on `[batch, seq]` ids "
        "returns `[batch, seq, n_embd]` rows.",
        FORWARD_LINE,
    ),
}

SAME_TOKEN_HINTS = (
    "The same id at every position must give the same row. A token embedding knows "
    "nothing about where the token is; position comes in step 06.",
    "The output depends only on the id: `wte` called on `[[7, 7, ...]]` gives row 7 of "
    "the table at every position.",
    FORWARD_LINE,
)

STEP = Step(
    number=5,
    required={"GPT2TokenEmbedding": ["__init__", "forward"]},
    checks=[
        Check("wte is an Embedding of [vocab_size, n_embd]", parameters, PARAMETERS_HINTS),
        Check("forward looks up one row per token id", looks_up_rows, LOOKUP_HINTS),
        Check(
            "a repeated token gets the same vector everywhere",
            same_token_same_vector,
            SAME_TOKEN_HINTS,
        ),
    ],
)

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
