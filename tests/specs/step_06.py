"""Checks for step 06: GPT2Embeddings (token + position)."""

from tests import reference as ref
from tests.checker import Check, Context, Fail, Step, expect_close
from tests.mistakes import m
from tests.specs.common import (
    BATCH,
    SEQ,
    build_with_tables,
    call_with_lookups,
    small_config,
)

CONFIG = small_config()
SHAPES = {
    "wte.weight": (CONFIG.vocab_size, CONFIG.n_embd),
    "wpe.weight": (CONFIG.n_positions, CONFIG.n_embd),
}
TABLES = {"wte": ("vocab_size", "vocabulary entry"), "wpe": ("n_positions", "position")}


def build(ctx: Context):
    return build_with_tables(ctx, "GPT2Embeddings", CONFIG, TABLES, SHAPES)


def parameters(ctx: Context) -> None:
    build(ctx)


def forward(ctx: Context, module, ids):
    tables = (
        f"wpe has only n_positions = {CONFIG.n_positions} rows, wte vocab_size = "
        f"{CONFIG.vocab_size}: were token ids (up to {CONFIG.vocab_size - 1}) looked up "
        "in wpe? Token ids go to wte, the positions 0..seq-1 to wpe."
    )
    return call_with_lookups(
        ctx, "GPT2Embeddings.forward", module, ids, tables, other=_positions_misaligned
    )


def _positions_misaligned(failure: Fail) -> Fail | None:
    if "broadcastable" not in failure.message:
        return None
    return Fail(
        failure.message,
        "The position embeddings do not line up with the tokens: there must be one "
        "position per token of the sequence, [seq, n_embd], to broadcast over "
        "[batch, seq, n_embd]. Count the positions with the sequence length (the "
        "last axis of input_ids), not the batch size or a fixed number.",
    )


def run(ctx: Context, seq: int) -> None:
    module, w = build(ctx)
    ids = ctx.token_ids(CONFIG.vocab_size, BATCH, seq)
    wte, wpe = w["wte.weight"], w["wpe.weight"]
    tokens, positions = wte[ids], wpe[:seq]
    mistakes = {
        "Position embeddings are missing: the output is the token embeddings alone.": tokens,
        "Only the position embeddings are returned: the token embeddings are missing.": (
            positions[None].repeat(BATCH, axis=0)
        ),
        "The positions were looked up in wte, the token table: they index wpe.": tokens + wte[:seq],
        "The token ids were used to index wpe: index it with the positions 0..seq-1.": tokens
        + wpe[ids % CONFIG.n_positions],
        "The embeddings are multiplied: the position vector is added to the token vector.": (
            tokens * positions
        ),
    }
    if seq < CONFIG.n_positions:
        mistakes["Positions start at 1; they start at 0, the first row of wpe."] = (
            tokens + wpe[1 : seq + 1]
        )
    what = f"GPT2Embeddings(input_ids of shape [{BATCH}, {seq}])"
    out = forward(ctx, module, ids)
    shape = tuple(int(d) for d in getattr(out, "shape", ()))
    if len(shape) == 3 and shape[0] == BATCH and shape[2] == CONFIG.n_embd and shape[1] != seq:
        raise Fail(
            f"{what} has shape {list(shape)}: {shape[1]} positions for {seq} token{'s' if seq > 1 else ''}.",
            "The positions must follow the input: one per token, 0 to seq_length - 1, with "
            "seq_length read from input_ids, not a fixed number.",
        )
    expect_close(
        out,
        ref.embeddings(w, ids),
        what,
        mistakes,
        hint="Each output vector is its token's row of wte plus its position's row of wpe.",
    )


def adds_positions(ctx: Context) -> None:
    run(ctx, SEQ)


def follows_sequence_length(ctx: Context) -> None:
    for seq in (1, CONFIG.n_positions):
        run(ctx, seq)


# Hint ladders: what to look at; the API or the shapes; the line.
INIT_LINES = (
    "```python\nself.wte = Embedding(config.vocab_size, dim=config.n_embd)\n"
    "self.wpe = Embedding(config.n_positions, dim=config.n_embd)\n```"
)
POSITIONS_LINE = (
    "```python\npositions = Tensor.arange(seq_length, dtype=DType.int64, "
    "device=input_ids.device)\n```"
)
FORWARD_LINES = (
    "```python\npositions = Tensor.arange(seq_length, dtype=DType.int64, "
    "device=input_ids.device)\nreturn self.wte(input_ids) + self.wpe(positions)\n```"
)
SUM_LINE = "```python\nreturn self.wte(input_ids) + self.wpe(positions)\n```"

PARAMETERS_HINTS = {
    "swapped": (
        "A table comes out transposed: its two sizes are exchanged. Each table has one "
        "*row* per entry it looks up.",
        "`Embedding(num_rows, dim=width)` stores `[num_rows, width]`: `wte` has "
        "`config.vocab_size` rows, `wpe` `config.n_positions`, both `config.n_embd` wide.",
        INIT_LINES,
    ),
    "keyword-only": (
        "`Embedding` refused its arguments: MAX's takes the width by name.",
        "The signature is `Embedding(vocab_size, *, dim)`: the number of rows "
        "positionally, then `dim=...`.",
        INIT_LINES,
    ),
    "same embedding object": (
        "Token and position are different things looked up in different tables: `wpe` "
        "has its own rows, learned separately.",
        "Two `Embedding` modules, built separately: `[vocab_size, n_embd]` for tokens, "
        "`[n_positions, n_embd]` for positions.",
        INIT_LINES,
    ),
    "not an embedding": (
        "A table is some other kind of layer. Positions, like token ids, are row numbers to "
        "look up.",
        "`Embedding(num_rows, dim=width)` holds the table and gathers rows when called.",
        INIT_LINES,
    ),
    "": (
        "A table's name or shape differs from GPT-2's. The attributes are `wte` and `wpe`, "
        "the checkpoint's names; the message says which size is off and which config field "
        "it came from.",
        "Two `Embedding(num_rows, dim=width)`: `wte` with one row per token id "
        "(`config.vocab_size`), `wpe` with one row per position (`config.n_positions`), "
        "both `config.n_embd` wide.",
        INIT_LINES,
    ),
}

INTEGER_HINTS = (
    "The positions are not integers. An Embedding looks rows up by number, and "
    "`Tensor.arange` makes floating-point numbers unless asked otherwise.",
    "`Tensor.arange(stop, dtype=..., device=...)`: pass an integer dtype from `max.dtype`, "
    "`DType.int64` like the token ids, and the ids' device.",
    POSITIONS_LINE,
)
TABLE_MIX_HINTS = (
    "Each table is indexed by its own kind of number: token ids go to `wte`, positions "
    "0..seq-1 go to `wpe`.",
    "`wte` called on `[batch, seq]` ids gives `[batch, seq, n_embd]`; `wpe` called on the "
    "`[seq]` positions gives `[seq, n_embd]`.",
    SUM_LINE,
)
LENGTH_HINTS = (
    "The number of positions must follow the input: as many as it has tokens, whatever "
    "the length (the check tries 1 and n_positions).",
    "`seq_length` is the last axis of `input_ids`; `Tensor.arange(seq_length, ...)` gives "
    "`[0, 1, ..., seq_length - 1]`, and `wpe` of that is `[seq, n_embd]`.",
    POSITIONS_LINE,
)

FORWARD_HINTS = {
    "integer": INTEGER_HINTS,
    "past the end": TABLE_MIX_HINTS,
    "looked up in wte": TABLE_MIX_HINTS,
    "used to index wpe": TABLE_MIX_HINTS,
    "line up": LENGTH_HINTS,
    "positions for": LENGTH_HINTS,
    "start at 1": (
        "The positions are shifted by one. The first token sits at position 0 and reads "
        "row 0 of `wpe`.",
        "`Tensor.arange(stop, ...)` with a single argument starts at 0, like NumPy's.",
        POSITIONS_LINE,
    ),
    "missing": (
        "One of the two embeddings is missing from the output: it is the sum of *what* "
        "the token is and *where* it is.",
        "`[batch, seq, n_embd] + [seq, n_embd]` broadcasts over the batch: every sequence "
        "gets the same position vectors.",
        SUM_LINE,
    ),
    "multiplied": (
        "The two embeddings are combined the wrong way: GPT-2 adds the position vector to "
        "the token vector.",
        "`+` on `[batch, seq, n_embd]` and `[seq, n_embd]` broadcasts over the batch.",
        SUM_LINE,
    ),
    "": (
        "Each output vector is its token's row of `wte` plus its position's row of `wpe`. "
        "Check the positions (0 to seq_length - 1, integers) and the sum.",
        "Positions from `Tensor.arange(stop, dtype=..., device=...)`; `wte` called on the "
        "ids is `[batch, seq, n_embd]`, `wpe` on the positions `[seq, n_embd]`; add them.",
        FORWARD_LINES,
    ),
}

LENGTH_CHECK_HINTS = {
    "integer": INTEGER_HINTS,
    "past the end": TABLE_MIX_HINTS,
    "": LENGTH_HINTS,
}

STEP = Step(
    number=6,
    required={"GPT2Embeddings": ["__init__", "forward"]},
    checks=[
        Check(
            "wte is [vocab_size, n_embd] and wpe is [n_positions, n_embd]",
            parameters,
            PARAMETERS_HINTS,
        ),
        Check(
            "forward adds position embeddings to token embeddings", adds_positions, FORWARD_HINTS
        ),
        Check(
            "positions follow the input's length (1 and n_positions tokens)",
            follows_sequence_length,
            LENGTH_CHECK_HINTS,
        ),
    ],
)

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
]
