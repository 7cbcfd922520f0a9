"""Checks for step 05: GPT2TokenEmbedding."""

from tests.checker import Check, Context, Fail, Step, expect_close
from tests.specs.model_parts import (
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


STEP = Step(
    number=5,
    required={"GPT2TokenEmbedding": ["__init__", "forward"]},
    checks=[
        Check("wte is an Embedding of [vocab_size, n_embd]", parameters),
        Check("forward looks up one row per token id", looks_up_rows),
        Check(
            "a repeated token gets the same vector everywhere",
            same_token_same_vector,
        ),
    ],
)
