"""Checks for step 12: GPT2Model."""

from tests import reference as ref
from tests.checker import Check, Context, Fail, Step, expect_close
from tests.mistakes import Mutant, m
from tests.specs.common import (
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
    return call_with_lookups(ctx, "GPT2Model.forward", model, ids, tables)


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


# Hint ladders: what to look at; the API or the shapes; the line.
H_LINE = "```python\nself.h = ModuleList([GPT2Block(config) for _ in range(config.n_layer)])\n```"
INIT_LINES = (
    "```python\nself.wte = Embedding(config.vocab_size, dim=config.n_embd)\n"
    "self.wpe = Embedding(config.n_positions, dim=config.n_embd)\n"
    "self.h = ModuleList([GPT2Block(config) for _ in range(config.n_layer)])\n"
    "self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)\n```"
)
EMBEDDING_LINES = (
    "```python\npositions = Tensor.arange(seq_length, dtype=DType.int64, "
    "device=input_ids.device)\nhidden_states = self.wte(input_ids) + self.wpe(positions)\n```"
)
LOOP_LINES = (
    "```python\nfor block in self.h:\n    hidden_states = block(hidden_states)\n"
    "return self.ln_f(hidden_states)\n```"
)
LOOP_RUNGS = (
    "The loop does not run every block once, in order, each on the previous one's output. "
    "The stream goes through h.0, then h.1, ... then the last block.",
    "`for block in self.h` visits the blocks in order; a block is a module, called on "
    "`[batch, seq, n_embd]` and returning the same shape. Keep one name for the stream and "
    "assign each block's output back to it.",
    LOOP_LINES,
)
LN_F_RUNGS = (
    "The final layer norm is missing or in the wrong place. It normalizes the stream once, "
    "after the last block: the blocks are pre-norm and never normalize the stream itself.",
    "`ln_f` is a module: call it on the `[batch, seq, n_embd]` stream after the loop and "
    "return its result.",
    LOOP_LINES,
)
EMBEDDING_RUNGS = (
    "The embeddings are not step 06's: the stream starts as each token's row of `wte` plus "
    "its position's row of `wpe`.",
    "`Tensor.arange(stop, dtype=..., device=...)` with an integer dtype gives the positions "
    "`[seq]`; `wte` of the ids is `[batch, seq, n_embd]`, `wpe` of the positions "
    "`[seq, n_embd]`; their sum broadcasts over the batch.",
    EMBEDDING_LINES,
)
STRUCTURE_HINTS = {
    "same block object": (
        "One block object sits in the list several times. Multiplying a list, or a "
        "comprehension that returns the same object each time, copies a *reference*: every "
        "layer runs the same weights, and loading the checkpoint writes all twelve sets into "
        "one block, the last one winning.",
        "`ModuleList(modules)` takes a list of modules; build the list so that `GPT2Block("
        "config)` is *called* once per layer (a list comprehension whose item is the call).",
        H_LINE,
    ),
    "one tensor": (
        "Two parts of the model share a module. In GPT-2 every block and every layer norm "
        "has weights of its own.",
        "Each module call (`GPT2Block(config)`, `LayerNorm(...)`) makes new weights; "
        "assigning an existing module to another name shares them.",
        INIT_LINES,
    ),
    "": (
        "`h` holds the blocks: exactly `config.n_layer` of them, each a separate "
        "`GPT2Block` with its own weights, in a `ModuleList` named `h`.",
        "`ModuleList(modules)` names its items 0, 1, ...; `range(config.n_layer)` counts the "
        "layers from 0 to `n_layer - 1`.",
        H_LINE,
    ),
}
PARAMETERS_HINTS = {
    "embedding": (
        "An embedding table is built wrongly; the message says which size is off and which "
        "config field it came from.",
        "`Embedding(num_rows, dim=width)`: `wte` has `config.vocab_size` rows, `wpe` "
        "`config.n_positions`, both `config.n_embd` wide; two separate modules.",
        INIT_LINES,
    ),
    "rows": (
        "An embedding table has the wrong number of rows or the wrong width; the message "
        "names the config field each size came from.",
        "`Embedding(num_rows, dim=width)`: `wte` has `config.vocab_size` rows, `wpe` "
        "`config.n_positions`, both `config.n_embd` wide.",
        INIT_LINES,
    ),
    "": (
        "The model's parameter names or shapes differ from GPT-2's: `wte`, `wpe`, the blocks "
        "`h.0` ... and the final `ln_f`. The message lists what is missing or unexpected.",
        "`Embedding(num_rows, dim=width)` for the two tables (step 06); a `ModuleList` of "
        "blocks named `h`; `LayerNorm(dim, *, eps=...)` with the config's epsilon for `ln_f`.",
        INIT_LINES,
    ),
}
FORWARD_HINTS = {
    "default epsilon": (
        "`ln_f` uses its default epsilon instead of the config's. The check sets "
        "`layer_norm_epsilon` to 1e-3 so that the difference shows.",
        "`LayerNorm(dim, *, eps=1e-5)`: `eps` is keyword-only; pass `config.layer_norm_epsilon`.",
        "```python\nself.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)\n```",
    ),
    "ln_f is": LN_F_RUNGS,
    "only the first block": LOOP_RUNGS,
    "last block is skipped": LOOP_RUNGS,
    "reverse order": LOOP_RUNGS,
    "last block's output": LOOP_RUNGS,
    "position": EMBEDDING_RUNGS,
    "integer": EMBEDDING_RUNGS,
    "past the end": EMBEDDING_RUNGS,
    "": (
        "Three stages: the embeddings of step 06, every block of `h` in order, the final "
        "layer norm. Check each against the page's shape table.",
        "Positions from `Tensor.arange(stop, dtype=..., device=...)`; the stream is "
        "`[batch, seq, n_embd]` from the embeddings to the end; each block and `ln_f` are "
        "modules called on it.",
        EMBEDDING_LINES + "\n\n" + LOOP_LINES,
    ),
}

STEP = Step(
    number=12,
    typical=4,  # seconds, slowest check: its 12-layer forward: 1-2 s warm, 7.6 s measured on 2 very busy cores
    required={"GPT2Model": ["__init__", "forward"]},
    checks=[
        Check(
            "h holds config.n_layer separate blocks, each with its own weights",
            separate_blocks,
            STRUCTURE_HINTS,
        ),
        Check(
            "wte, wpe, h.0 ... h.N, ln_f named and shaped like GPT-2's",
            parameters,
            PARAMETERS_HINTS,
        ),
        Check("forward matches GPT-2's transformer", forward, FORWARD_HINTS),
        Check("works for a single token", one_token, FORWARD_HINTS),
    ],
)

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
