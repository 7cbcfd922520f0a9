"""Checks for step 21: grouped-query attention."""

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from tests import reference_llama as ref
from tests.checker import (
    Check,
    Context,
    Fail,
    Step,
    expect_close,
    expect_parameters,
    expect_shape,
    parameter_shapes,
    tensor,
    to_numpy,
)
from tests.checker.compare import close
from tests.specs.spies import note_inputs

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, THETA = 64, 4, 2, 16, 100.0
GROUP = HEADS // KV_HEADS
BATCH, SEQ, PAST = 2, 5, 3
SHAPES = {
    "q_proj.weight": (HEADS * HEAD_DIM, HIDDEN),
    "k_proj.weight": (KV_HEADS * HEAD_DIM, HIDDEN),
    "v_proj.weight": (KV_HEADS * HEAD_DIM, HIDDEN),
    "o_proj.weight": (HIDDEN, HEADS * HEAD_DIM),
}
TILED = (
    "The key/value heads are tiled ([k0, k1, k0, k1]): query head 1 then reads key/value "
    "head 1, but heads 0 and 1 form head 0's group. Repeat each head in place: "
    "[k0, k0, k1, k1]."
)


def config(ctx: Context, **sizes):
    """The learner's LlamaConfig, small: 4 query heads share 2 key/value heads."""
    return ctx.build(
        "LlamaConfig",
        **sizes,
        vocab_size=97,
        hidden_size=HIDDEN,
        intermediate_size=96,
        num_hidden_layers=1,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        rope_theta=THETA,
    )


def attention(ctx: Context):
    """The learner's attention with random weights, and those weights."""
    module = ctx.build("GroupedQueryAttention", config(ctx))
    biases = sorted(name for name in parameter_shapes(module) if name.endswith(".bias"))
    if biases:
        raise Fail(
            f"The attention has biases ({', '.join(biases)}); Llama's projections have none.",
            "Build each Linear with bias=False.",
        )
    actual = parameter_shapes(module)
    for name in ("k_proj.weight", "v_proj.weight"):
        if actual.get(name) == (HEADS * HEAD_DIM, HIDDEN):
            raise Fail(
                f"{name} has shape {list(actual[name])}: {HEADS} heads of {HEAD_DIM} features, "
                f"one per query head. Grouped-query attention computes num_key_value_heads = "
                f"{KV_HEADS} key/value heads: {list(SHAPES[name])}.",
                "k_proj and v_proj make head_dim features for each key/value head; only "
                "q_proj makes one head per query head.",
            )
    expect_parameters(module, SHAPES)
    weights = {name: ctx.normal(*shape, std=0.1) for name, shape in SHAPES.items()}
    ctx.call("load_state_dict", module.load_state_dict, weights)
    return module, weights


def projections_are_shaped(ctx: Context) -> None:
    attention(ctx)
    # Some models (Gemma, Qwen3) give heads a width of their own: with head_dim 8
    # q_proj is no longer square, so its in and out sizes cannot be mixed up.
    narrow = 8
    module = ctx.build("GroupedQueryAttention", config(ctx, head_dim=narrow))
    expect_parameters(
        module,
        {
            "q_proj.weight": (HEADS * narrow, HIDDEN),
            "k_proj.weight": (KV_HEADS * narrow, HIDDEN),
            "v_proj.weight": (KV_HEADS * narrow, HIDDEN),
            "o_proj.weight": (HIDDEN, HEADS * narrow),
        },
    )


def repeat_kv_serves_groups(ctx: Context) -> None:
    x = ctx.normal(BATCH, 3, SEQ, HEAD_DIM)  # 3 key/value heads, so tiling shows
    got = ctx.call("repeat_kv", ctx.get("repeat_kv"), tensor(x), GROUP)
    expect_shape(
        got,
        (BATCH, 3 * GROUP, SEQ, HEAD_DIM),
        f"repeat_kv(x of 3 heads, group={GROUP})",
        "group times as many heads, the other axes unchanged.",
    )
    what = f"repeat_kv(x of 3 heads, group={GROUP})"
    want = ref.repeat_kv(x, GROUP)
    tiled = ref.repeat_kv(x, GROUP, tiled=True)
    array = to_numpy(got, what)
    if not close(array, want) and not close(array, tiled):
        name_the_heads(array, x, what)
    expect_close(array, want, what, {TILED: tiled}, model="Llama")


def name_the_heads(got: np.ndarray, x: np.ndarray, what: str) -> None:
    """Say which input head each output head of repeat_kv holds, or which holds none."""
    held = []
    for head in range(got.shape[1]):
        found = [j for j in range(x.shape[1]) if close(got[:, head], x[:, j])]
        if not found:
            raise Fail(
                f"{what}: output head {head} is none of the input heads.",
                "Each output head is one key/value head, whole, its positions and features in "
                "order: the repeats are made along the heads axis only.",
            )
        held.append(found[0])
    want = [head // GROUP for head in range(got.shape[1])]
    raise Fail(
        f"{what}: the output heads hold input heads {held}; query head h reads key/value head "
        f"h // {GROUP}: {want}.",
        "Each key/value head appears group times in a row, in the heads' order.",
    )


MISTAKES = {
    TILED: {"tiled": True},
    "The values are rotated too: only query and key turn (step 19).": {"rotate": "query,key,value"},
    "The scores are scaled by 1 / sqrt(hidden_size); each head's scores are dot products "
    "of head_dim features: 1 / sqrt(head_dim).": {"scale": 1 / np.sqrt(HIDDEN)},
    "The scores are scaled by 1 / sqrt(num_key_value_heads * head_dim); each head's scores "
    "are dot products of head_dim features: 1 / sqrt(head_dim).": {
        "scale": 1 / np.sqrt(KV_HEADS * HEAD_DIM)
    },
    "Nothing is rotated: query and key turn by their positions (step 19's apply_rope).": {
        "rotate": ""
    },
}


def forward(ctx: Context, past: int):
    """The learner's attention after `past` cached tokens, the reference's inputs, and
    what its pieces gave on the way: repeat_kv's outputs and o_proj's input."""
    module, w = attention(ctx)
    heads_out = record_o_proj_input(module)
    x = ctx.normal(BATCH, SEQ, HIDDEN)
    past_key, past_value = (ctx.normal(BATCH, KV_HEADS, past, HEAD_DIM) for _ in range(2))
    with recording_repeat_kv(ctx) as repeats:
        result, repeats, heads_out = ctx.run_lazily(
            "GroupedQueryAttention.forward",
            lambda *args: (module(*args), repeats, heads_out),
            tensor(x),
            tensor(past_key),
            tensor(past_value),
        )
    if not isinstance(result, tuple) or len(result) != 3:
        raise Fail(
            f"forward returned {type(result).__name__}, expected (output, key, value).",
            "Return the output of o_proj and both grown caches.",
        )
    inputs = (w, x, HEADS, KV_HEADS, THETA, past_key, past_value)
    return result, inputs, (repeats, heads_out)


def record_o_proj_input(module) -> list:
    """Make the attention's o_proj note what it is given: the heads' outputs side by side."""
    seen: list = []
    note_inputs(getattr(module, "o_proj", None), seen)
    return seen


@contextmanager
def recording_repeat_kv(ctx: Context) -> Iterator[list]:
    """While forward runs, the learner's repeat_kv notes each tensor it returns."""
    seen: list = []
    original = getattr(ctx.module, "repeat_kv", None)
    if not callable(original):
        yield seen
        return

    def repeat_kv(x, group):
        repeated = original(x, group)
        seen.append(repeated)
        return repeated

    ctx.module.repeat_kv = repeat_kv
    try:
        yield seen
    finally:
        ctx.module.repeat_kv = original


def name_the_piece(spied, pieces: dict, past: int) -> None:
    """The first piece of the learner's forward that differs from Llama's: the keys
    and values the heads read (repeat_kv's outputs), then each head's output."""
    repeats, heads_out = spied
    arrays = [to_numpy(each, "repeat_kv") for each in repeats]
    arrays = [a for a in arrays if a.shape == pieces["keys"].shape]
    if arrays:
        for name, other in (("keys", "values"), ("values", "keys")):
            if any(close(a, pieces[name]) for a in arrays):
                continue
            cache = name[:-1]
            if all(close(a, pieces[other]) for a in arrays):
                raise Fail(
                    f"After {past} cached tokens the {name} the heads read are the "
                    f"{other}: each repeat_kv output is the {other[:-1]} cache repeated.",
                    f"The scores read the grown key cache and the heads weigh the grown value "
                    f"cache, each repeated for its group: repeat the {cache} cache for the "
                    f"{name}.",
                )
            raise Fail(
                f"After {past} cached tokens none of repeat_kv's outputs is the grown {cache} "
                f"cache with each head repeated for its group: the {name} the heads read are "
                "not Llama's.",
                f"repeat_kv passed its own check, so look at what it is given: the {cache} "
                "cache after the new tokens are appended, and the group size num_heads // "
                "num_key_value_heads.",
            )
    if not heads_out:
        return
    got = to_numpy(heads_out[-1], "o_proj's input")
    want = np.swapaxes(pieces["heads"], 1, 2).reshape(BATCH, SEQ, HEADS * HEAD_DIM)
    if got.shape != want.shape or close(got, want):
        return
    for head in range(HEADS):
        columns = slice(head * HEAD_DIM, (head + 1) * HEAD_DIM)
        if not close(got[..., columns], want[..., columns]):
            raise Fail(
                f"After {past} cached tokens query head {head}'s output (o_proj's input, "
                f"features {columns.start}..{columns.stop - 1}) differs from Llama's.",
                (
                    "The keys and values the heads read are right (repeat_kv's outputs match). "
                    if arrays
                    else ""
                )
                + "Look at what the head does with its keys and values: its query, the scores' "
                "scale 1 / sqrt(head_dim), the mask, the softmax over the keys.",
            )


def expect_output(out, inputs, past: int, spied) -> None:
    pieces: dict = {}
    want, *_ = ref.gqa_attention(*inputs, pieces=pieces)
    wrong = {why: ref.gqa_attention(*inputs, **options)[0] for why, options in MISTAKES.items()}
    what = f"GroupedQueryAttention(x) after {past} cached tokens"
    actual = to_numpy(out, what)
    if not close(actual, want) and not any(close(actual, each) for each in wrong.values()):
        name_the_piece(spied, pieces, past)
    expect_close(actual, want, what, wrong, model="Llama")


def attends_like_llama(ctx: Context) -> None:
    (out, _, _), inputs, spied = forward(ctx, 0)
    expect_output(out, inputs, 0, spied)


def cache_holds_kv_heads(ctx: Context) -> None:
    (out, key, value), inputs, spied = forward(ctx, PAST)
    _, want_key, want_value = ref.gqa_attention(*inputs)
    total = PAST + SEQ
    for name, got, want in (("key", key, want_key), ("value", value, want_value)):
        array = np.asarray(got.to_numpy()) if hasattr(got, "to_numpy") else got
        shape = getattr(array, "shape", None)
        if shape == (BATCH, HEADS, total, HEAD_DIM):
            per_token = 2 * KV_HEADS * HEAD_DIM * 4
            raise Fail(
                f"The {name} cache holds {HEADS} heads, the repeated ones: "
                f"{list(shape)}. It should hold the {KV_HEADS} key/value heads, "
                f"{[BATCH, KV_HEADS, total, HEAD_DIM]}: {per_token} bytes per token and layer "
                f"in float32 instead of {per_token * GROUP}.",
                "Return the key and value from before repeat_kv: the repeats are made again "
                "from the cache at every step, for free.",
            )
        expect_shape(
            got,
            want.shape,
            f"the {name} cache after {PAST} cached + {SEQ} new tokens",
            "The cache grows along the sequence axis (axis 2), the cached positions first.",
        )
        expect_close(
            got,
            want,
            f"the {name} cache after {PAST} cached + {SEQ} new tokens",
            {
                f"The {name} cache holds the new {name}s before the cached ones: append them "
                "after, so positions stay in order.": np.concatenate(
                    [want[:, :, PAST:], want[:, :, :PAST]], axis=2
                )
            },
            model="Llama",
        )
    expect_output(out, inputs, PAST, spied)


STEP = Step(
    number=21,
    required={
        "LlamaConfig": [],
        "repeat_kv": [],
        "GroupedQueryAttention": ["__init__", "forward"],
    },
    checks=[
        Check("k_proj and v_proj make only the key/value heads, no biases", projections_are_shaped),
        Check("each key/value head serves its group of query heads", repeat_kv_serves_groups),
        Check("grouped-query attention matches Llama's", attends_like_llama),
        Check("the cache stores the key/value heads, not their repeats", cache_holds_kv_heads),
    ],
)
