"""Checks for step 25: the absorbed decode."""

import numpy as np
from max.experimental import functional as F

from solutions.solution_24 import MLAConfig, MultiHeadLatentAttention
from tests import reference_mla as ref
from tests.checker import Check, Context, Fail, Step, expect_close, expect_shape, tensor
from tests.specs.step_24 import SIZES, random_weights, shape_of

BATCH, PAST = 2, 6
HEADS, NOPE, V, RANK = SIZES.num_heads, SIZES.qk_nope_head_dim, SIZES.v_head_dim, SIZES.kv_lora_rank


def attention(ctx: Context):
    """Step 24's attention (the solution's) with random weights, and those weights."""
    with F.lazy():  # typed only: the weights below replace its random initial ones
        module = MultiHeadLatentAttention(MLAConfig(**SIZES.config()))
    weights = random_weights(ctx, SIZES)
    module.load_state_dict(weights)
    return module, weights


def halves_are_per_head(ctx: Context) -> None:
    module, w = attention(ctx)
    got = ctx.call("absorbed_weights", ctx.get("absorbed_weights"), module)
    if not isinstance(got, tuple) or len(got) != 2:
        raise Fail(
            f"absorbed_weights returned {type(got).__name__}, expected (key_half, value_half).",
            "Return the two halves of kv_b_proj's weight, key first.",
        )
    key_half, value_half = got
    want_key, want_value = ref.absorbed_weights(w, SIZES)
    swapped = [tuple(want_value.shape), tuple(want_key.shape)]
    shapes = [shape_of(half) for half in got]
    if shapes == swapped:
        raise Fail(
            f"The halves are swapped: key_half is {list(shapes[0])}, value_half "
            f"{list(shapes[1])}. Each head's block of kv_b_proj is its key without "
            f"position (qk_nope_head_dim = {NOPE} rows) then its value (v_head_dim = {V}).",
            "Split each head's block [qk_nope_head_dim, v_head_dim], key first.",
        )
    if shapes[0] == (HEADS, RANK, NOPE) or shapes[1] == (HEADS, RANK, V):
        raise Fail(
            f"The halves come out transposed, {[list(s) for s in shapes]}: kv_b_proj's weight "
            f"is [out, in] = [heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank], so a "
            f"head's halves are [{NOPE}, {RANK}] and [{V}, {RANK}]: features by latent.",
            "Keep the weight's order: reshape to [heads, qk_nope_head_dim + v_head_dim, "
            "kv_lora_rank] and split axis 1; transpose later, where a product needs it.",
        )
    per_feature = w["kv_b_proj.weight"].reshape(NOPE + V, HEADS, RANK).transpose(1, 0, 2)
    per_head = w["kv_b_proj.weight"].reshape(HEADS, NOPE + V, RANK)
    value_first = (
        "The halves are swapped: the value is read from the front of each head's block. "
        f"A head's block of kv_b_proj is its key without position (qk_nope_head_dim = {NOPE} "
        f"rows) then its value (v_head_dim = {V})."
    )
    for name, got_half, want, wrong, swapped_rows in (
        ("key_half", key_half, want_key, per_feature[:, :NOPE], per_head[:, V:]),
        ("value_half", value_half, want_value, per_feature[:, NOPE:], per_head[:, :V]),
    ):
        expect_shape(
            got_half,
            want.shape,
            f"absorbed_weights' {name}",
            "[heads, features, kv_lora_rank]: one block of kv_b_proj's rows per head.",
        )
        expect_close(
            got_half,
            want,
            f"absorbed_weights' {name}",
            {
                "kv_b_proj's rows are read feature-major: its rows are head by head, head h's "
                "key then value in rows h * (qk_nope_head_dim + v_head_dim) onwards, so the "
                "heads axis comes first in the reshape.": wrong,
                value_first: swapped_rows,
            },
            model="DeepSeek-V3",
        )


def spy_on_expansion(module) -> list[str]:
    """Record every call of kv_b_proj (the expansion step 25 removes)."""
    calls: list[str] = []
    layer = module.kv_b_proj
    plain = type(layer)

    class Recorded(plain):
        def forward(self, *args, **kwargs):
            calls.append("kv_b_proj")
            return plain.forward(self, *args, **kwargs)

    layer.__class__ = Recorded
    return calls


def decode(ctx: Context):
    module, w = attention(ctx)
    calls = spy_on_expansion(module)
    x = ctx.normal(BATCH, 1, SIZES.hidden_size)
    past_latent = ctx.normal(BATCH, PAST, RANK)
    past_rope_key = ctx.normal(BATCH, PAST, SIZES.qk_rope_head_dim)
    result = ctx.run_lazily(
        "absorbed_decode",
        ctx.get("absorbed_decode"),
        module,
        tensor(x),
        tensor(past_latent),
        tensor(past_rope_key),
    )
    if not isinstance(result, tuple) or len(result) != 3:
        raise Fail(
            f"absorbed_decode returned {type(result).__name__}, expected (output, latent, "
            "rope_key).",
            "Return the output of o_proj and both grown caches.",
        )
    return result, calls, (w, x, SIZES, past_latent, past_rope_key)


def equals_expand_then_attend(ctx: Context) -> None:
    (out, latent, rope_key), _, inputs = decode(ctx)
    want, want_latent, want_rope_key = ref.mla_attention(*inputs)
    what = f"absorbed_decode(one token after {PAST} cached)"
    wrong = {
        f"The scores are divided by sqrt(kv_lora_rank = {RANK}), the width the query now "
        f"has. Regrouping the product changed no score: they are still dot products of "
        f"qk_head_dim = {SIZES.qk_head_dim} features.": ref.absorbed_decode(
            *inputs, scale_dim=RANK
        ),
        f"The scores are divided by sqrt(qk_nope_head_dim = {NOPE}): a score is both dot "
        f"products, divide by sqrt(qk_head_dim = {SIZES.qk_head_dim}).": ref.absorbed_decode(
            *inputs, scale_dim=NOPE
        ),
        "The scores are not scaled: step 24 divided each score by the root of the number "
        f"of products it adds up, qk_head_dim = {SIZES.qk_head_dim}, and regrouping changed "
        "no score.": ref.absorbed_decode(*inputs, scale_dim=1),
        "The scores leave out the rotary part: a score is q_latent . latent plus "
        "q_rope . rope_key.": ref.absorbed_decode(*inputs, rope_scores=False),
        "The scores leave out the latent part: a score is q_latent . latent plus "
        "q_rope . rope_key.": ref.absorbed_decode(*inputs, latent_scores=False),
        f"The new token is missing from its own scores: the decode attends to the {PAST} "
        f"cached tokens only. A token sees itself too: after appending, the caches hold "
        f"{PAST + 1} tokens, the new one last, and the scores and the weighted sum run over "
        "all of them.": ref.absorbed_decode(*inputs, own_token=False),
    }
    for name, got, want_cache in (
        ("latent", latent, want_latent),
        ("rotary key", rope_key, want_rope_key),
    ):
        expect_close(
            got,
            want_cache,
            f"the {name} cache absorbed_decode returns",
            {
                f"The {name} cache holds the new token before the cached ones: append it "
                "after.": np.concatenate([want_cache[:, PAST:], want_cache[:, :PAST]], axis=1)
            },
            "After 6 cached tokens and 1 new one, [batch, 7, features], the cached first.",
            model="DeepSeek-V3",
        )
    expect_close(out, want, what, wrong, model="DeepSeek-V3")


def never_expands(ctx: Context) -> None:
    _, calls, _ = decode(ctx)
    if calls:
        raise Fail(
            f"absorbed_decode called kv_b_proj ({len(calls)} time(s)): it expanded latents "
            "into keys and values, which is the work the absorbed decode removes.",
            "Use kv_b_proj's weight, cut by absorbed_weights: its key half goes into the query "
            "and its value half after the weighted sum of latents.",
        )


STEP = Step(
    number=25,
    required={"absorbed_weights": [], "absorbed_decode": []},
    checks=[
        Check(
            "kv_b_proj's weight is cut into each head's key and value halves", halves_are_per_head
        ),
        Check("the absorbed decode equals step 24's attention", equals_expand_then_attend),
        Check("the decode reads the latents without expanding them", never_expands),
    ],
)
