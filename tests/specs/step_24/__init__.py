"""Checks for step 24: multi-head latent attention."""

from dataclasses import replace

import numpy as np

from tests import reference_mla as ref
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

# Every width different, so no size stands in for another ...
SIZES = ref.Sizes(
    hidden_size=32,
    num_heads=4,
    q_lora_rank=20,
    kv_lora_rank=24,
    qk_nope_head_dim=8,
    qk_rope_head_dim=6,
    v_head_dim=12,
    rope_theta=100.0,
)
# ... and one where the three head widths are equal, so that mixing up two
# parts still runs and its numbers can be named.
EVEN = replace(SIZES, qk_rope_head_dim=8, v_head_dim=8)
BATCH, SEQ, PAST = 2, 5, 3


def config(ctx: Context, s: ref.Sizes):
    """The learner's MLAConfig with the sizes `s`."""
    return ctx.build("MLAConfig", **s.config())


def shape_mistake(actual: dict[str, tuple[int, ...]], s: ref.Sizes) -> Fail | None:
    """A Fail naming the MLA idea a wrong parameter shape misses, if it is one we know."""
    heads, rank, rope = s.num_heads, s.kv_lora_rank, s.qk_rope_head_dim
    known = {
        ("kv_a_proj_with_mqa.weight", (rank + heads * rope, s.hidden_size)): (
            f"kv_a_proj_with_mqa makes a rotary key per head ({heads} x {rope} features after "
            f"the latent). MLA computes one rotary key per token, shared by every head like "
            f"multi-query attention's: kv_lora_rank + qk_rope_head_dim = {rank + rope} outputs.",
            "Only the query has a rotary part per head; the key's is one vector per token.",
        ),
        ("kv_a_layernorm.weight", (rank + rope,)): (
            f"kv_a_layernorm has {rank + rope} weights: it normalises the rotary key with the "
            f"latent. Only the latent is normalised: RMSNorm(kv_lora_rank = {rank}).",
            "Split kv_a_proj_with_mqa's output first; normalise the latent part alone.",
        ),
        ("kv_b_proj.weight", (heads * (s.qk_head_dim + s.v_head_dim), rank)): (
            f"kv_b_proj makes each head's rotary key features too. The latent carries no "
            f"position: kv_b_proj makes each head's key without position "
            f"(qk_nope_head_dim) and value: {heads * (s.qk_nope_head_dim + s.v_head_dim)} outputs.",
            "The rotary key comes from kv_a_proj_with_mqa, once per token.",
        ),
        ("q_b_proj.weight", (heads * s.qk_nope_head_dim, s.q_lora_rank)): (
            f"q_b_proj makes only the query's part without position. Each head's query has "
            f"both parts, qk_nope_head_dim + qk_rope_head_dim = {s.qk_head_dim} features: "
            f"{heads * s.qk_head_dim} outputs.",
            None,
        ),
    }
    for (name, shape), (message, hint) in known.items():
        if actual.get(name) == shape:
            return Fail(message, hint)
    return None


def random_weights(ctx: Context, s: ref.Sizes) -> dict[str, np.ndarray]:
    """Weights of N(0, 0.2), norm scales near 1: large enough that every
    mistake moves the output well beyond float32 rounding."""
    return {
        name: 1.0 + ctx.normal(*shape, std=0.1) if len(shape) == 1 else ctx.normal(*shape, std=0.2)
        for name, shape in s.shapes().items()
    }


def attention(ctx: Context, s: ref.Sizes):
    """The learner's attention with sizes `s`, random weights loaded, and those weights."""
    module = ctx.build("MultiHeadLatentAttention", config(ctx, s))
    actual = parameter_shapes(module)
    biases = sorted(name for name in actual if name.endswith(".bias"))
    if biases:
        raise Fail(
            f"The attention has biases ({', '.join(biases)}); DeepSeek-V3's attention "
            "projections have none.",
            "Build each Linear with bias=False.",
        )
    if failure := shape_mistake(actual, s):
        raise failure
    expect_parameters(module, s.shapes())
    weights = random_weights(ctx, s)
    ctx.call("load_state_dict", module.load_state_dict, weights)
    return module, weights


def projections_are_shaped(ctx: Context) -> None:
    attention(ctx, SIZES)


def run(ctx: Context, s: ref.Sizes, past: int):
    """The learner's forward on random input after `past` cached tokens, and
    what the reference needs to compute the same."""
    module, w = attention(ctx, s)
    x = ctx.normal(BATCH, SEQ, s.hidden_size)
    past_latent = ctx.normal(BATCH, past, s.kv_lora_rank)
    past_rope_key = ctx.normal(BATCH, past, s.qk_rope_head_dim)
    result = ctx.run_lazily(
        "MultiHeadLatentAttention.forward",
        module,
        tensor(x),
        tensor(past_latent),
        tensor(past_rope_key),
    )
    if not isinstance(result, tuple) or len(result) != 3:
        raise Fail(
            f"forward returned {type(result).__name__}, expected (output, latent, rope_key).",
            "Return the output of o_proj and both grown caches.",
        )
    inputs = (w, x, s, past_latent, past_rope_key)
    return result, inputs, module


def named_mistakes(s: ref.Sizes) -> dict[str, dict]:
    part = "v_head_dim or qk_nope_head_dim" if s.v_head_dim == s.qk_nope_head_dim else "a part"
    return {
        "q_a_layernorm is not applied: the query's compressed form is normalised between "
        "q_a_proj and q_b_proj.": {"q_norm": False},
        "The latent is not normalised: kv_a_layernorm turns it into what the cache "
        "stores and kv_b_proj expands.": {"kv_norm": False},
        "The rotary features are taken from the front of each head's query. A head's "
        "query is [without position | rotary]: qk_nope_head_dim features first, then the "
        "qk_rope_head_dim that turn.": {"rope_first": True},
        "kv_b_proj's block for a head is read as value then key: it is the key without "
        "position (qk_nope_head_dim features) then the value (v_head_dim).": {"value_first": True},
        "The rotary features turn without config.rope_interleave: DeepSeek pairs features "
        "(2i, 2i + 1), so regroup them (deinterleave) before step 19's apply_rope.": {
            "interleave": False
        },
        f"The scores are divided by sqrt({s.v_head_dim}), the width of {part}. Each score "
        f"is a dot product of both parts, qk_nope_head_dim + qk_rope_head_dim = "
        f"{s.qk_head_dim} features: divide by sqrt({s.qk_head_dim}).": {"scale_dim": s.v_head_dim},
        "The key's halves are in the other order than the query's: the key is "
        "[rotary | without position] while the query is [without position | rotary], so "
        "each query feature meets another feature of the key.": {"key_order": "rope,nope"},
    }


NEVER_TURNED = (
    "{what} is never turned: it comes out as {made_by} made it. Turn it by its token's "
    "position with self.rotate, as step 19 turns a key: without the turn, a score cannot "
    "tell how far apart two tokens are."
)


def pieces(module, inputs) -> list[tuple[str, object, np.ndarray, dict[str, np.ndarray]]]:
    """(what, the learner's piece, DeepSeek-V3's, {mistake: what it gives}) for
    each tensor `query`, `compress` and `expand` return, in the order forward
    uses them: each method is given the reference's inputs, so one wrong method
    does not spoil the pieces after it."""
    w, x, s, _, _ = inputs
    positions = np.arange(x.shape[1])
    query = ref.split_query(w, x, s)
    q_nope, q_rope = query[..., : s.qk_nope_head_dim], query[..., s.qk_nope_head_dim :]
    latent, rope_key = ref.compress_kv(w, x, s)
    k_nope, value = ref.expand_kv(w, latent, s)

    def turn(features: np.ndarray) -> np.ndarray:
        return ref.rotate(features, positions, s, interleave=s.rope_interleave)

    at = tensor(positions.astype(np.float32))
    got_query = module.query(tensor(x), at)
    got_compressed = module.compress(tensor(x), at)
    got_expanded = module.expand(tensor(latent.astype(np.float32)))
    return [
        ("query's q_nope", got_query[0], q_nope, {}),
        (
            "query's q_rope",
            got_query[1],
            turn(q_rope),
            {NEVER_TURNED.format(what="The query's rotary part", made_by="q_b_proj"): q_rope},
        ),
        ("compress's latent", got_compressed[0], latent, {}),
        (
            "compress's rope_key",
            got_compressed[1],
            turn(rope_key),
            {NEVER_TURNED.format(what="The rotary key", made_by="kv_a_proj_with_mqa"): rope_key},
        ),
        ("expand's k_nope", got_expanded[0], k_nope, {}),
        ("expand's value", got_expanded[1], value, {}),
    ]


def first_wrong_piece(ctx: Context, module, inputs) -> None:
    """Fail naming the first method whose tensor differs from DeepSeek-V3's,
    or, all of them right, the scores forward makes from them."""
    found = ctx.run_lazily("query, compress and expand", pieces, module, inputs)
    right = []
    for what, got, want, mistakes in found:
        array = to_numpy(got, f"MultiHeadLatentAttention.{what}")
        if array.shape == want.shape and close(array, want):
            right.append(what)
            continue
        for explanation, wrong in mistakes.items():
            if close(array, wrong):
                raise Fail(
                    f"MultiHeadLatentAttention.{what} does not match DeepSeek-V3.", explanation
                )
        expect_shape(array, want.shape, f"MultiHeadLatentAttention.{what}")
        before = f" ({', '.join(right)} match)" if right else ""
        raise Fail(
            f"MultiHeadLatentAttention.{what} differs from DeepSeek-V3's{before}: the "
            "output goes wrong there first.",
            "Print that tensor's shape and a few of its values: the page's section on that "
            'method says what it holds, and its checks\' sizes are in "Shapes".',
        )
    raise Fail(
        "query, compress and expand return DeepSeek-V3's tensors, yet the output differs: "
        "the scores in forward are wrong.",
        "Each head's query and key are [without position | rotary], the one rotary key per "
        'token serving every head; print query, key and scores against the page\'s "Shapes".',
    )


def attends_like_deepseek(ctx: Context) -> None:
    (out, _, _), inputs, module = run(ctx, EVEN, 0)
    want, *_ = ref.mla_attention(*inputs)
    wrong = {
        why: ref.mla_attention(*inputs, **options)[0]
        for why, options in named_mistakes(EVEN).items()
    }
    array = to_numpy(out, "MultiHeadLatentAttention(x)")
    named = [want, *wrong.values()]
    if array.shape == want.shape and not any(close(array, known) for known in named):
        first_wrong_piece(ctx, module, inputs)
    expect_close(out, want, "MultiHeadLatentAttention(x)", wrong, model="DeepSeek-V3")


def shape_of(value) -> tuple[int, ...]:
    """A tensor's or an array's shape as ints; () for anything without one."""
    return tuple(int(d) for d in getattr(value, "shape", ()))


def expanded_cache(got, name: str, s: ref.Sizes) -> Fail | None:
    """A Fail for a cache that holds every head's keys or values (four axes)."""
    shape = shape_of(got)
    if len(shape) != 4:
        return None
    per_token = ref.cache_bytes_per_token(s)
    return Fail(
        f"The {name} cache has shape {list(shape)}: a head axis, so the keys or values "
        f"expanded from the latent. MLA caches the latent and the rotary key alone: "
        f"{per_token['mla']} bytes per token and layer in bfloat16 at these sizes, where "
        f"every head's keys and values take {per_token['expanded']}.",
        "Return the concatenated latent and rotary key, before kv_b_proj expands them: "
        "the cache is [batch, tokens, kv_lora_rank] and [batch, tokens, qk_rope_head_dim].",
    )


def caches_latent_and_rope_key(ctx: Context) -> None:
    (out, latent, rope_key), inputs, _ = run(ctx, SIZES, PAST)
    want, want_latent, want_rope_key = ref.mla_attention(*inputs)
    restarted, _, restarted_rope_key = ref.mla_attention(*inputs, start=0)
    raw_latent = ref.mla_attention(*inputs, cache_raw_latent=True)[1]
    w, x, s, _, past_rope_key = inputs
    unturned_rope_key = np.concatenate([past_rope_key, ref.compress_kv(w, x, s)[1]], axis=1)
    total = PAST + SEQ
    caches = (
        (
            "latent",
            latent,
            want_latent,
            {
                "The latent cache holds the latents before kv_a_layernorm: store them "
                "normalised, so no step normalises a cached token again.": raw_latent
            },
        ),
        (
            "rotary key",
            rope_key,
            want_rope_key,
            {
                "The new tokens' rotary keys turn as if they sat at positions 0, 1, ...: "
                f"after {PAST} cached tokens they sit at {PAST}, {PAST + 1}, ...": (
                    restarted_rope_key
                ),
                NEVER_TURNED.format(
                    what="The new tokens' rotary key", made_by="kv_a_proj_with_mqa"
                ): unturned_rope_key,
            },
        ),
    )
    for name, got, want_cache, its_mistakes in caches:
        if failure := expanded_cache(got, name, SIZES):
            raise failure
        what = f"the {name} cache after {PAST} cached + {SEQ} new tokens"
        expect_shape(
            got,
            want_cache.shape,
            what,
            f"One row per token: [batch, {total} tokens, features], the cached tokens first.",
        )
        wrong = {
            f"The {name} cache holds the new tokens before the cached ones: append them "
            "after, so positions stay in order.": np.concatenate(
                [want_cache[:, PAST:], want_cache[:, :PAST]], axis=1
            ),
            **its_mistakes,
        }
        expect_close(got, want_cache, what, wrong, model="DeepSeek-V3")
    expect_close(
        out,
        want,
        f"MultiHeadLatentAttention(x) after {PAST} cached tokens",
        {
            "The new tokens take positions 0, 1, ... after a cache: they sit at "
            f"{PAST}, {PAST + 1}, ... (the number of cached tokens onwards).": restarted
        },
        model="DeepSeek-V3",
    )


STEP = Step(
    number=24,
    required={
        "MLAConfig": [],
        "MultiHeadLatentAttention": ["__init__", "query", "compress", "expand", "forward"],
    },
    checks=[
        Check("the projections and norms are DeepSeek-V3's", projections_are_shaped),
        Check("latent attention matches DeepSeek-V3's", attends_like_deepseek),
        Check(
            "the cache holds one latent and one rotary key per token", caches_latent_and_rope_key
        ),
    ],
)
