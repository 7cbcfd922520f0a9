"""Checks for step 12: GPT2Model."""

from tests import reference_gpt2 as ref
from tests.checker import Check, Context, Fail, Step, expect_close
from tests.specs.model_parts import (
    BATCH,
    SEQ,
    build_embeddings,
    build_with_tables,
    call_with_lookups,
    config_field_of,
    model_shapes,
    shared_parameters,
    small_config,
)

# Not LayerNorm's default epsilon, so a layer norm built without config's shows;
# n_layer, n_layer - 1 and n_layer + 1 differ from every other size of the config,
# so a wrong count of blocks names the field it came from, if any.
CONFIG = small_config(n_layer=3, n_head=8, layer_norm_epsilon=1e-3)
TABLES = {"wte": ("vocab_size", "vocabulary entry"), "wpe": ("n_positions", "position")}


def build(ctx: Context, config=CONFIG):
    return build_with_tables(ctx, "GPT2Model", config, TABLES, model_shapes(config))


def separate_blocks(ctx: Context) -> None:
    """h holds config.n_layer blocks, every one its own object with its own weights."""
    model = build_embeddings(ctx, "GPT2Model", CONFIG)
    blocks = getattr(model, "h", None)
    if blocks is None:
        raise Fail(
            "GPT2Model has no attribute h.",
            "The blocks live in self.h, the checkpoint's name (h.0, h.1, ...): a ModuleList "
            "with one GPT2Block per layer.",
        )
    try:
        blocks = list(blocks)
    except TypeError:
        raise Fail(
            f"h is {type(blocks).__name__}, not a list of blocks.",
            "h holds one GPT2Block per layer, in a ModuleList, so that for block in self.h "
            "runs them in order.",
        ) from None
    n = CONFIG.n_layer
    if len(blocks) != n:
        field = config_field_of(CONFIG, len(blocks))
        off = {n - 1: ", one too few", n + 1: ", one too many"}.get(len(blocks), "")
        raise Fail(
            f"h holds {len(blocks)} blocks"
            + (f" ({field})" if field else off)
            + f"; GPT-2 has config.n_layer = {n}.",
            f"One block per layer: config.n_layer of them, named h.0 to h.{n - 1}. "
            "range(stop) counts from 0 to stop - 1.",
        )
    for j in range(1, n):
        for i in range(j):
            if blocks[i] is blocks[j]:
                raise Fail(
                    f"h[{i}] and h[{j}] are the same block object: `[GPT2Block(config)] * "
                    "n_layer` (or a list comprehension that reuses one block) repeats one "
                    "block, so every layer runs the same weights.",
                    "Build each block with its own GPT2Block(config) call, so that each "
                    "gets its own weights: the checkpoint has a different set for every "
                    "layer, and loading it would write all of them into one block.",
                )
    for names in shared_parameters(model):
        raise Fail(
            f"{' and '.join(names[:2])} are one tensor: two parts of the model share "
            "their weights.",
            "Every block, and every part of a block, has its own weights in the checkpoint: "
            "build each with its own call.",
        )


def parameters(ctx: Context) -> None:
    build(ctx)


def call(ctx: Context, model, ids):
    tables = (
        f"wpe has n_positions = {CONFIG.n_positions} rows, wte vocab_size = "
        f"{CONFIG.vocab_size}: token ids go to wte, the positions 0..seq-1 to wpe."
    )
    return call_with_lookups(ctx, "GPT2Model.forward", model, ids, tables, lazy=True)


def forward(ctx: Context, seq: int = SEQ) -> None:
    model, w = build(ctx)
    ids = ctx.token_ids(CONFIG.vocab_size, BATCH, seq)
    n, heads, eps = CONFIG.n_layer, CONFIG.n_head, CONFIG.layer_norm_epsilon

    def ln_f(x, ln_f_eps=eps):
        return ref.layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], ln_f_eps)

    def blocks(order, x=None, after_each=lambda x: x):
        x = ref.embeddings(w, ids) if x is None else x
        for i in order:
            x = after_each(ref.block(w, x, heads, eps, f"h.{i}."))
        return x

    tokens = w["wte.weight"][ids]
    mistakes = {
        "ln_f is not applied after the last block.": blocks(range(n)),
        "Only the first block runs: loop over every block in self.h.": ln_f(blocks([0])),
        "The last block is skipped.": ln_f(blocks(range(n - 1))),
        "The blocks run in reverse order.": ln_f(blocks(reversed(range(n)))),
        "Only the last block's output arrives: each block must read the previous block's "
        "output (did every block read the embeddings?).": ln_f(blocks([n - 1])),
        "ln_f uses LayerNorm's default epsilon: pass eps=config.layer_norm_epsilon.": ln_f(
            blocks(range(n)), 1e-5
        ),
        "ln_f is applied after every block; it runs once, after the last block.": ln_f(
            blocks(range(n), after_each=ln_f)
        ),
        "ln_f is applied after every block instead of once after the last (and not again at "
        "the end).": blocks(range(n), after_each=ln_f),
        "Position embeddings are missing: add wpe(positions) to wte(input_ids).": ln_f(
            blocks(range(n), tokens)
        ),
        "The positions were looked up in wte, the token table: they index wpe.": ln_f(
            blocks(range(n), tokens + w["wte.weight"][:seq])
        ),
    }
    out = call(ctx, model, ids)
    expect_close(
        out,
        ref.model(w, ids, n, heads, eps),
        f"GPT2Model(input_ids [{BATCH}, {seq}])",
        mistakes,
        hint="Embeddings as in step 06; every block of h in order, each reading what the one "
        "before returned; one final layer norm.",
    )


def one_token(ctx: Context) -> None:
    forward(ctx, seq=1)


STEP = Step(
    number=12,
    typical=4,  # seconds, slowest check: its 12-layer forward: 1-2 s warm, 7.6 s measured on 2 very busy cores
    required={"GPT2Model": ["__init__", "forward"]},
    checks=[
        Check(
            "h holds config.n_layer separate blocks, each with its own weights",
            separate_blocks,
        ),
        Check(
            "wte, wpe, h.0 ... h.N, ln_f named and shaped like GPT-2's",
            parameters,
        ),
        Check("forward matches GPT-2's transformer", forward),
        Check("works for a single token", one_token),
    ],
)
