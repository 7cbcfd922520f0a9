"""Checks for step 25: the absorbed decode."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
from max.experimental import functional as F

from solutions.solution_24 import MLAConfig, MultiHeadLatentAttention
from tests import reference_mla as ref
from tests.checker import Check, Context, Fail, Step, expect_close, expect_shape, tensor
from tests.checker.compare import close, to_numpy
from tests.specs.step_24 import SIZES, random_weights, shape_of

BATCH, PAST = 2, 6
HEADS, NOPE, V, RANK = SIZES.num_heads, SIZES.qk_nope_head_dim, SIZES.v_head_dim, SIZES.kv_lora_rank


# Sizes where kv_lora_rank, qk_nope_head_dim and v_head_dim are equal, so that a
# half multiplied the other way round still runs and its numbers can be named.
SQUARE = replace(SIZES, kv_lora_rank=NOPE, v_head_dim=NOPE)


def attention(ctx: Context, s: ref.Sizes = SIZES):
    """Step 24's attention (the solution's) with random weights, and those weights."""
    with F.lazy():  # typed only: the weights below replace its random initial ones
        module = MultiHeadLatentAttention(MLAConfig(**s.config()))
    weights = random_weights(ctx, s)
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


def static(size) -> int:
    """A dimension's size; -1 for one known only when the graph runs."""
    try:
        return int(size)
    except (TypeError, ValueError):
        return -1


@contextmanager
def products_recorded() -> Iterator[list[tuple[int, ...]]]:
    """The shape of every matrix product made inside (`@` calls F.matmul too)."""
    shapes: list[tuple[int, ...]] = []
    plain = F.matmul

    def recorded(*args, **kwargs):
        product = plain(*args, **kwargs)
        shapes.append(tuple(static(size) for size in product.shape))
        return product

    F.matmul = recorded
    try:
        yield shapes
    finally:
        F.matmul = plain


def decode(ctx: Context, s: ref.Sizes = SIZES):
    """The learner's absorbed_decode of one token after PAST cached ones: its
    result, the kv_b_proj calls and products it made, and the reference's inputs."""
    module, w = attention(ctx, s)
    calls = spy_on_expansion(module)
    x = ctx.normal(BATCH, 1, s.hidden_size)
    past_latent = ctx.normal(BATCH, PAST, s.kv_lora_rank)
    past_rope_key = ctx.normal(BATCH, PAST, s.qk_rope_head_dim)
    with products_recorded() as products:
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
    return result, (calls, products), (w, x, s, past_latent, past_rope_key)


def wrong_decodes(inputs: tuple) -> dict[str, np.ndarray]:
    """{what is wrong: what that decode computes} for the sizes in `inputs`."""
    s = inputs[2]
    d, rank, nope = s.qk_head_dim, s.kv_lora_rank, s.qk_nope_head_dim
    wrong = {
        f"The scores are divided by sqrt(kv_lora_rank = {rank}), the width the query now "
        f"has. Regrouping the product changed no score: they are still dot products of "
        f"qk_head_dim = {d} features.": {"scale_dim": rank},
        f"The scores are divided by sqrt(qk_nope_head_dim = {nope}): a score is both dot "
        f"products, divide by sqrt(qk_head_dim = {d}).": {"scale_dim": nope},
        "The scores are not scaled: step 24 divided each score by the root of the number "
        f"of products it adds up, qk_head_dim = {d}, and regrouping changed "
        "no score.": {"scale_dim": 1},
        f"The scores are divided by sqrt(qk_head_dim = {d}) twice: once is step 24's scale, "
        "and regrouping changed no score.": {"scale_dim": d * d},
        f"Only the latent part of each score is divided by sqrt(qk_head_dim = {d}): the "
        "scale divides the whole score, q_latent . latent plus q_rope . rope_key.": {
            "scaled": "latent"
        },
        f"Only the rotary part of each score is divided by sqrt(qk_head_dim = {d}): the "
        "scale divides the whole score, q_latent . latent plus q_rope . rope_key (mind "
        "that / binds tighter than +).": {"scaled": "rope"},
        "The scores leave out the rotary part: a score is q_latent . latent plus "
        "q_rope . rope_key.": {"rope_scores": False},
        "The scores leave out the latent part: a score is q_latent . latent plus "
        "q_rope . rope_key.": {"latent_scores": False},
        f"The new token is missing from its own scores: the decode attends to the {PAST} "
        f"cached tokens only. A token sees itself too: after appending, the caches hold "
        f"{PAST + 1} tokens, the new one last, and the scores and the weighted sum run over "
        "all of them.": {"own_token": False},
        "The softmax runs over the heads (axis 1); each head weighs the tokens, so it runs "
        "over the last axis, one per cached or new token.": {"softmax_axis": 1},
    }
    return {said: ref.absorbed_decode(*inputs, **options) for said, options in wrong.items()}


def transposed_halves(inputs: tuple) -> dict[str, np.ndarray]:
    """Halves multiplied the other way round, which run only with SQUARE's sizes."""
    s = inputs[2]
    return {
        "The query is multiplied by key_half transposed: with kv_lora_rank = "
        f"{s.kv_lora_rank}, qk_nope_head_dim = {s.qk_nope_head_dim} and v_head_dim = "
        f"{s.v_head_dim} equal, that runs and gives these numbers. A head's key half is "
        "[qk_nope_head_dim, kv_lora_rank] and the query in latent space [.., 1, "
        "kv_lora_rank]: the shapes say which way round.": ref.absorbed_decode(
            *inputs, key_half_transposed=True
        ),
        "The weighted sum of latents is multiplied by value_half as it is: with "
        f"kv_lora_rank = {s.kv_lora_rank} and v_head_dim = {s.v_head_dim} equal, that runs "
        "and gives these numbers. A head's value half is [v_head_dim, kv_lora_rank], the "
        "context [.., 1, kv_lora_rank] and each head's output [.., 1, v_head_dim]: the "
        "shapes say which way round.": (ref.absorbed_decode(*inputs, value_half_transposed=True)),
    }


def named_with_square_sizes(ctx: Context, failure: Fail) -> Fail:
    """absorbed_decode raised: run it where the three widths are equal, and name
    a half multiplied the other way round if that is what it computes."""
    try:
        (out, _, _), _, inputs = decode(ctx, SQUARE)
    except Fail:
        return failure
    got = to_numpy(out, "absorbed_decode's output")
    if close(got, ref.mla_attention(*inputs)[0]):
        return Fail(
            failure.message,
            f"With kv_lora_rank = qk_nope_head_dim = v_head_dim = {NOPE} your decode runs "
            "and is right: one of its shapes names a width where another belongs "
            f"(here kv_lora_rank = {RANK}, qk_nope_head_dim = {NOPE}, v_head_dim = {V}).",
        )
    for explanation, wrong in transposed_halves(inputs).items():
        if close(got, wrong):
            return Fail(failure.message, explanation)
    return failure


def equals_expand_then_attend(ctx: Context) -> None:
    try:
        (out, latent, rope_key), _, inputs = decode(ctx)
    except Fail as failure:
        raise named_with_square_sizes(ctx, failure) from failure
    want, want_latent, want_rope_key = ref.mla_attention(*inputs)
    what = f"absorbed_decode(one token after {PAST} cached)"
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
    expect_close(out, want, what, wrong_decodes(inputs), model="DeepSeek-V3")


def expansions(products: list[tuple[int, ...]]) -> list[tuple[tuple[int, ...], str]]:
    """The products that made keys or values for every cached token: one row (or
    column) per token, a head's key or value features (or all heads') across."""
    tokens = {PAST, PAST + 1}
    made = {
        NOPE: "a key",
        HEADS * NOPE: "every head's key",
        V: "a value",
        HEADS * V: "every head's value",
        HEADS * (NOPE + V): "every head's key and value",
    }
    found = []
    for shape in products:
        for rows, features in ((-2, -1), (-1, -2)):
            if len(shape) >= 2 and shape[rows] in tokens and shape[features] in made:
                found.append((shape, made[shape[features]]))
                break
    return found


def never_expands(ctx: Context) -> None:
    _, (calls, products), _ = decode(ctx)
    if calls:
        raise Fail(
            f"absorbed_decode called kv_b_proj ({len(calls)} time(s)): it expanded latents "
            "into keys and values, which is the work the absorbed decode removes.",
            "Use kv_b_proj's weight, cut by absorbed_weights: its key half goes into the query "
            "and its value half after the weighted sum of latents.",
        )
    for shape, made in expansions(products):
        half = "value half" if "value" in made else "key half"
        raise Fail(
            f"absorbed_decode made a product of shape {list(shape)}: {made} for each of the "
            f"{max(s for s in shape if s in (PAST, PAST + 1))} tokens. The numbers come out "
            "the same, at step 24's cost: that expansion is the work the absorbed decode "
            "removes.",
            f"Regroup so that the {half} meets one row per head, not one per token: "
            + (
                "the weighted sum of the latents first, [batch, heads, kv_lora_rank], then "
                "the value half once."
                if half == "value half"
                else "fold the key half into the query, then score the latents themselves."
            ),
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
