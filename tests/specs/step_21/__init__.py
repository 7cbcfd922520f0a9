"""Checks for step 21: grouped-query attention."""

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
)

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
    expect_close(
        got,
        ref.repeat_kv(x, GROUP),
        f"repeat_kv(x of 3 heads, group={GROUP})",
        {TILED: ref.repeat_kv(x, GROUP, tiled=True)},
        model="Llama",
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
    module, w = attention(ctx)
    x = ctx.normal(BATCH, SEQ, HIDDEN)
    past_key, past_value = (ctx.normal(BATCH, KV_HEADS, past, HEAD_DIM) for _ in range(2))
    result = ctx.run_lazily(
        "GroupedQueryAttention.forward", module, tensor(x), tensor(past_key), tensor(past_value)
    )
    if not isinstance(result, tuple) or len(result) != 3:
        raise Fail(
            f"forward returned {type(result).__name__}, expected (output, key, value).",
            "Return the output of o_proj and both grown caches.",
        )
    return result, (w, x, HEADS, KV_HEADS, THETA, past_key, past_value)


def expect_output(out, inputs, past: int) -> None:
    want, *_ = ref.gqa_attention(*inputs)
    wrong = {why: ref.gqa_attention(*inputs, **options)[0] for why, options in MISTAKES.items()}
    expect_close(
        out, want, f"GroupedQueryAttention(x) after {past} cached tokens", wrong, model="Llama"
    )


def attends_like_llama(ctx: Context) -> None:
    (out, _, _), inputs = forward(ctx, 0)
    expect_output(out, inputs, 0)


def cache_holds_kv_heads(ctx: Context) -> None:
    (out, key, value), inputs = forward(ctx, PAST)
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
    expect_output(out, inputs, PAST)


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
