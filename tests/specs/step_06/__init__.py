"""Checks for step 06: GPT2Embeddings (token + position)."""

from tests import reference_gpt2 as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor
from tests.specs.devices import arange_devices, expect_on
from tests.specs.model_parts import (
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


def positions_on_input_device(ctx: Context) -> None:
    """The positions are made where input_ids live (tests/specs/devices.py says
    how a machine with only a CPU tells)."""
    module, _ = build(ctx)
    ids = tensor(ctx.token_ids(CONFIG.vocab_size, BATCH, SEQ))
    asked, given, real = arange_devices(
        lambda: ctx.call("GPT2Embeddings.forward", module, ids), ids
    )
    expect_on(
        asked,
        given,
        real,
        "The positions",
        "input_ids",
        "On a machine with a GPU the ids, and the tables they are looked up in, sit on the "
        "GPU: positions made elsewhere cannot index wpe there.",
    )


STEP = Step(
    number=6,
    required={"GPT2Embeddings": ["__init__", "forward"]},
    checks=[
        Check(
            "wte is [vocab_size, n_embd] and wpe is [n_positions, n_embd]",
            parameters,
        ),
        Check("forward adds position embeddings to token embeddings", adds_positions),
        Check(
            "positions follow the input's length (1 and n_positions tokens)",
            follows_sequence_length,
        ),
        Check("positions are made on the input's device", positions_on_input_device),
    ],
)
