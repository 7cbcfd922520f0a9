"""Checks for step 19: rotary position embeddings."""

import numpy as np

from tests import reference_llama as ref
from tests.checker import Check, Context, Fail, Step, expect_close, expect_shape, tensor
from tests.specs.devices import arange_devices, expect_on

HEAD_DIM = 8
THETA = 100.0  # far from the usual 10000, so a hard-coded theta shows
POSITIONS = np.arange(3, 9)  # not from 0, so ignored positions show
BATCH, HEADS, SEQ, PAST = 2, 2, 5, 4

THETA_IGNORED = (
    "theta is not the one passed in: the speeds are theta ** (-2i / head_dim) with the "
    "caller's theta (Llama 3 uses 500000, Llama 2 10000)."
)
INTERLEAVED = (
    "The pairs are interleaved (features 2i and 2i + 1, the RoFormer paper's layout); "
    "transformers' Llama pairs feature i with feature i + head_dim / 2 (half-split)."
)


def tables(positions: np.ndarray, theta: float = THETA, **options):
    return ref.rope_tables(positions, HEAD_DIM, theta, **options)


def wrong_tables(positions: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """What the tables come out as under each likely mistake: (cos, sin)."""
    speeds_per_feature = THETA ** (-np.arange(HEAD_DIM) / HEAD_DIM)
    per_feature = np.outer(positions, speeds_per_feature)
    growing = np.outer(positions, THETA ** (2.0 * np.arange(HEAD_DIM // 2) / HEAD_DIM))
    growing = np.concatenate([growing, growing], axis=-1)
    return {
        INTERLEAVED: tables(positions, interleaved=True),
        "The speeds fall too slowly: the exponent is -2i / head_dim, with i counting "
        "pairs (0 .. head_dim/2 - 1).": tables(positions, exponent="i/d"),
        "Each feature got its own speed; each pair shares one: head_dim / 2 speeds, the "
        "angles laid side by side twice.": (np.cos(per_feature), np.sin(per_feature)),
        "The speeds grow with the pair index: the exponent is negative, "
        "theta ** (-2i / head_dim), so pair 0 turns fastest.": (np.cos(growing), np.sin(growing)),
        "The angles start at position 0: multiply the positions you were given, "
        f"{POSITIONS.tolist()} here.": tables(np.arange(len(positions))),
        THETA_IGNORED: tables(positions, theta=10000.0),
    }


def rope_tables_are_right(ctx: Context) -> None:
    rope_tables = ctx.get("rope_tables")
    positions = POSITIONS.astype(np.float32)
    result = ctx.call("rope_tables", rope_tables, tensor(positions), HEAD_DIM, THETA)
    if not isinstance(result, tuple) or len(result) != 2:
        raise Fail(
            f"rope_tables returned {type(result).__name__}, expected a pair (cos, sin).",
            "Return both tables: cos first, then sin.",
        )
    want_cos, want_sin = tables(POSITIONS)
    wrong = wrong_tables(POSITIONS)
    wrong["cos and sin are swapped: return the cosines first."] = (want_sin, want_cos)
    shape_hint = (
        f"One row per position and one column per feature: [{len(POSITIONS)}, {HEAD_DIM}]. "
        "The angles are [seq, head_dim / 2]; half-split pairs need them side by side twice."
    )
    for index, (what, want) in enumerate((("cos", want_cos), ("sin", want_sin))):
        got = expect_shape(result[index], want.shape, f"rope_tables' {what}", shape_hint)
        mistakes = {why: pair[index] for why, pair in wrong.items()}
        expect_close(got, want, f"rope_tables' {what}", mistakes, model="Llama")


def rotate_half_turns_a_quarter(ctx: Context) -> None:
    x = ctx.normal(BATCH, HEADS, SEQ, HEAD_DIM)
    half = HEAD_DIM // 2
    first, second = x[..., :half], x[..., half:]
    got = ctx.call("rotate_half", ctx.get("rotate_half"), tensor(x))
    mistakes = {
        INTERLEAVED: ref.rotate_half(x, interleaved=True),
        "The quarter turn goes the wrong way: pair (a, b) becomes (-b, a), so the second "
        "half comes first, negated.": ref.rotate_half(x, sign=-1.0),
        "The halves are not swapped: pair (a, b) becomes (-b, a), the second half first.": (
            np.concatenate([-first, second], axis=-1)
        ),
        "The minus sign is missing: pair (a, b) becomes (-b, a), not (b, a).": np.concatenate(
            [second, first], axis=-1
        ),
    }
    expect_close(got, ref.rotate_half(x), "rotate_half(x)", mistakes, model="Llama")


def apply_rope_turns_each_pair(ctx: Context) -> None:
    x = ctx.normal(BATCH, HEADS, len(POSITIONS), HEAD_DIM)
    cos, sin = (t.astype(np.float32) for t in tables(POSITIONS))
    got = ctx.call("apply_rope", ctx.get("apply_rope"), tensor(x), tensor(cos), tensor(sin))
    turned = ref.rotate_half(x)
    mistakes = {
        "cos and sin are swapped: a pair turned by t keeps cos t of itself and adds sin t "
        "of its quarter turn.": x * sin + turned * cos,
        "The turn goes the wrong way: the quarter-turned pair is added, times sin t, not "
        "subtracted.": x * cos - turned * sin,
        "Only the cosine part is there: add the quarter-turned pair times sin t.": x * cos,
        "The quarter turn is missing: the sine multiplies the pair itself, not its quarter "
        "turn (rotate_half).": x * cos + x * sin,
    }
    expect_close(
        got, ref.apply_rope(x, cos, sin), "apply_rope(x, cos, sin)", mistakes, model="Llama"
    )


def attend(ctx: Context, past: int):
    """The learner's rope_attention after `past` cached tokens, and the reference's inputs."""
    q, k, v = (ctx.normal(BATCH, HEADS, SEQ, HEAD_DIM) for _ in range(3))
    past_k, past_v = (ctx.normal(BATCH, HEADS, past, HEAD_DIM) for _ in range(2))
    inputs = (q, k, v, past_k, past_v)
    result = ctx.call(
        "rope_attention", ctx.get("rope_attention"), *(tensor(a) for a in inputs), THETA
    )
    if not isinstance(result, tuple) or len(result) != 3:
        raise Fail(
            f"rope_attention returned {type(result).__name__}, expected (output, key, value).",
            "Return the attention output and both grown caches.",
        )
    return result, inputs


def expect_attention(ctx: Context, past: int, mistakes: dict[str, dict]) -> None:
    """rope_attention's three results against the reference, the caches first (the
    pieces the output is made of); `mistakes` maps an explanation to the
    reference's options that reproduce it."""
    (out, key, value), inputs = attend(ctx, past)
    want_out, want_key, want_value = ref.rope_attention(*inputs, THETA)
    wrongs = {
        why: ref.rope_attention(*inputs, **{"theta": THETA, **options})
        for why, options in mistakes.items()
    }
    checked = (("key cache", key, want_key, 1), ("value cache", value, want_value, 2))
    for name, got, want, index in (*checked, ("output", out, want_out, 0)):
        what = f"rope_attention's {name} (after {past} cached tokens)"
        expect_shape(got, want.shape, what, shape_hint(index, past))
        by_mistake = {why: wrong[index] for why, wrong in wrongs.items()}
        expect_close(
            got,
            want,
            what,
            by_mistake,
            OUTPUT_HINT if index == 0 else CACHE_HINTS[name],
            model="Llama",
            parts=cache_parts(name, past) if index else None,
        )


def shape_hint(index: int, past: int) -> str:
    if index == 0:
        return f"One output per new token and head: [batch, heads, seq, head_dim], seq = {SEQ}."
    return (
        f"The cache grows along the sequence axis (axis 2): {past} cached + {SEQ} new = "
        f"{past + SEQ} positions, the cached ones first."
    )


CACHE_HINTS = {
    "key cache": "The grown key cache is past_key, untouched, then the new keys turned by the "
    "new tokens' positions, along the sequence axis.",
    "value cache": "The grown value cache is past_value, then the new values as they came, "
    "along the sequence axis: values do not turn.",
}
OUTPUT_HINT = (
    "Both caches match Llama's, so the new keys and values are right: look at what uses "
    "them, the query's turn (by the same positions as the keys), the scale 1 / "
    "sqrt(head_dim) and the mask offset by the cache."
)


def cache_parts(name: str, past: int) -> dict[str, tuple]:
    """The two pieces of a grown cache: the cached rows, then the new ones."""
    kind = name.split()[0]
    new = (
        "the new keys turned by their positions"
        if kind == "key"
        else "the new values, as they came"
    )
    last = f"{past}..{past + SEQ - 1}"
    return {
        f"rope_attention's {name} changed the {past} cached {kind}s (positions 0.."
        f"{past - 1}): they come back first, as they were passed in.": np.s_[:, :, :past],
        f"rope_attention's {name}"
        + (f" holds the cached {kind}s, but its" if past else ":")
        + f" new positions {last} are not {new}.": np.s_[:, :, past:],
    }


ROTATE_MISTAKES = {
    "The values are rotated too: position belongs in the scores, so only query and key "
    "turn; values carry content and pass through as they are.": {"rotate": "query,key,value"},
    "The keys are not rotated: query and key both turn, so their score sees how far "
    "apart they are.": {"rotate": "query"},
    "The queries are not rotated: query and key both turn, so their score sees how far "
    "apart they are.": {"rotate": "key"},
    "Nothing is rotated: turn the query and the key by the tables of their positions.": {
        "rotate": ""
    },
    "rope_attention makes its tables with theta 10000, not the theta it was given: pass it on.": {
        "theta": 10000.0
    },
}


def rotates_query_and_key_only(ctx: Context) -> None:
    expect_attention(ctx, 0, ROTATE_MISTAKES)


def positions_follow_the_cache(ctx: Context) -> None:
    expect_attention(
        ctx,
        PAST,
        {
            f"After {PAST} cached tokens the new tokens were turned as positions 0.."
            f"{SEQ - 1}; they sit at positions {PAST}..{PAST + SEQ - 1}: start at the "
            "cache's length.": {"start": 0},
            **ROTATE_MISTAKES,
        },
    )


ON_A_GPU = (
    "On a machine with a GPU the queries and keys sit on the GPU: tables made elsewhere "
    "cannot multiply them there."
)


def made_on_the_inputs_device(ctx: Context) -> None:
    """The speeds follow the positions' device, and the positions the query's."""
    positions = tensor(POSITIONS.astype(np.float32))
    asked, given, real = arange_devices(
        lambda: ctx.call("rope_tables", ctx.get("rope_tables"), positions, HEAD_DIM, THETA),
        positions,
    )
    expect_on(asked, given, real, "The speeds", "positions", ON_A_GPU)
    inputs = [tensor(ctx.normal(BATCH, HEADS, n, HEAD_DIM)) for n in (SEQ, SEQ, SEQ, 0, 0)]
    asked, given, real = arange_devices(
        lambda: ctx.call("rope_attention", ctx.get("rope_attention"), *inputs, THETA),
        inputs[0],
    )
    # Only the first range is rope_attention's own (the positions); the
    # speeds made inside rope_tables follow the positions.
    expect_on(asked[:1], given, real, "The positions", "query", ON_A_GPU)


STEP = Step(
    number=19,
    required={
        "rope_tables": [],
        "rotate_half": [],
        "apply_rope": [],
        "rope_attention": [],
    },
    checks=[
        Check(
            "the tables hold cos and sin of position times speed, half-split", rope_tables_are_right
        ),
        Check("rotate_half gives each pair a quarter turn", rotate_half_turns_a_quarter),
        Check("apply_rope turns each pair by its angle", apply_rope_turns_each_pair),
        Check("query and key turn, value does not", rotates_query_and_key_only),
        Check("the new tokens' positions continue after the cache", positions_follow_the_cache),
        Check("the tables are made on the inputs' device", made_on_the_inputs_device),
    ],
)
