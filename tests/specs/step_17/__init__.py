"""Checks for step 17: the KV cache (run eagerly: the logic, not the speed)."""

import re

import numpy as np

from tests import reference_gpt2 as ref
from tests.checker import Check, Context, Fail, Step, as_one_graph, expect_close, tensor, to_numpy
from tests.checker.compare import close
from tests.specs.model_parts import lm_shapes, small_config, tied_lm_weights
from tests.specs.spies import note_inputs

CONFIG = small_config(n_layer=2, n_positions=32)
L, H, E = CONFIG.n_layer, CONFIG.n_head, CONFIG.n_embd
D = E // H
SHAPES = lm_shapes(CONFIG)


def model(ctx: Context):
    """The learner's cached model with GPT-2-like weights, built once per run."""
    return ctx.once("model", lambda: build_model(ctx))


def build_model(ctx: Context):
    module = ctx.build("CachedGPT2LMHeadModel", CONFIG)
    weights = tied_lm_weights(ctx, CONFIG, wte_scale=15)
    ctx.load_weights(module, SHAPES, weights)
    record_positions(getattr(getattr(module, "transformer", None), "wpe", None))
    return module, {k: v.astype(np.float64) for k, v in weights.items()}


LOOKED_UP: list = []  # what the position embedding was asked for, per forward call


def record_positions(wpe) -> None:
    """Make the model's position embedding note the positions it looks up."""
    note_inputs(wpe, LOOKED_UP)


def positions_diagnosis(p: int, s: int) -> None:
    """Name wrong positions for s new tokens after p cached ones, if that is what the
    model looked up in the last call."""
    if not LOOKED_UP:
        return
    try:
        got = np.asarray(LOOKED_UP[-1].to_numpy()).reshape(-1).astype(int).tolist()
    except Exception:
        return
    want = list(range(p, p + s))
    if got != want:
        raise Fail(
            f"After {p} cached token(s), the {s} new token(s) got positions {got}; they sit "
            f"at positions {want}.",
            "The new tokens' positions continue after the cached tokens: they start at the "
            "cache length, and there is one per new token.",
        )


def reference_cache(w, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every layer's keys and values for `ids`: [n_layer, batch, heads, seq, head_dim]."""
    if ids.shape[1] == 0:
        nothing = np.zeros((L, ids.shape[0], H, 0, D))
        return nothing, nothing.copy()
    x, keys, values = ref.embeddings(w, ids, "transformer."), [], []
    for i in range(L):
        prefix = f"transformer.h.{i}."
        h = ref.layer_norm(
            x, w[prefix + "ln_1.weight"], w[prefix + "ln_1.bias"], CONFIG.layer_norm_epsilon
        )
        _, k, v = ref.qkv(w, h, prefix + "attn.c_attn.")
        keys.append(ref.split_heads(k, H))
        values.append(ref.split_heads(v, H))
        x = ref.block(w, x, H, CONFIG.layer_norm_epsilon, prefix)
    return np.stack(keys), np.stack(values)


def full_logits(w, ids: np.ndarray) -> np.ndarray:
    return ref.lm_logits(w, ids, L, H, CONFIG.layer_norm_epsilon)


def ln(w, x: np.ndarray, name: str) -> np.ndarray:
    return ref.layer_norm(x, w[name + ".weight"], w[name + ".bias"], CONFIG.layer_norm_epsilon)


def cached_logits(
    w,
    ids: np.ndarray,
    cached: int,
    *,
    new_first: bool = False,
    mask: bool = True,
    start: int | None = None,
    use_cache: bool = True,
    layer_zero_cache: bool = False,
) -> np.ndarray:
    """The logits of ids[:, cached:] run after a right cache of ids[:, :cached],
    with the defaults GPT-2's (= full_logits(w, ids)[:, cached:]), or with one
    of a learner's mistakes in the cached model:
    new_first: keys and values concatenated new-then-cached;
    mask=False: no mask among the new tokens;
    start: the new tokens' first position (not the cache length);
    use_cache=False: the new tokens attend only to themselves;
    layer_zero_cache: every layer attends over layer 0's cached keys and values."""
    s = ids.shape[1] - cached
    start = cached if start is None else start
    past_keys, past_values = reference_cache(w, ids[:, :cached])
    x = (
        w["transformer.wte.weight"][ids[:, cached:]]
        + w["transformer.wpe.weight"][np.arange(start, start + s)]
    )
    for i in range(L):
        prefix = f"transformer.h.{i}."
        query, key, value = ref.qkv(w, ln(w, x, prefix + "ln_1"), prefix + "attn.c_attn.")
        query, key, value = (ref.split_heads(t, H) for t in (query, key, value))
        layer = 0 if layer_zero_cache else i
        past_key, past_value = past_keys[layer], past_values[layer]
        if not use_cache:
            past_key, past_value = past_key[:, :, :0], past_value[:, :, :0]
        pieces = (lambda past, new: [new, past]) if new_first else (lambda past, new: [past, new])
        key = np.concatenate(pieces(past_key, key), axis=2)
        value = np.concatenate(pieces(past_value, value), axis=2)
        scores = query @ key.transpose(0, 1, 3, 2) / np.sqrt(D)
        if mask:
            scores = scores + ref.causal_mask(s, key.shape[2] - s)
        attn = ref.merge_heads(ref.softmax(scores) @ value)
        x = x + ref.linear(attn, w[prefix + "attn.c_proj.weight"], w[prefix + "attn.c_proj.bias"])
        x = x + ref.mlp(w, ln(w, x, prefix + "ln_2"), prefix + "mlp.")
    return ln(w, x, "transformer.ln_f") @ w["transformer.wte.weight"].T


def logit_mistakes(w, ids: np.ndarray, cached: int) -> dict[str, np.ndarray]:
    """What the cached model's likely mistakes compute for ids[:, cached:]."""
    s = ids.shape[1] - cached
    mistakes = {}
    if cached:
        mistakes.update(
            {
                "The new tokens got positions from 0: they come after the "
                "cached tokens, so their positions start at the cache length.": cached_logits(
                    w, ids, cached, start=0
                ),
                "The new tokens attended only to themselves: the cached keys "
                "and values were not used. Append the new keys and values to the cache and "
                "attend over all of it.": cached_logits(w, ids, cached, use_cache=False),
            }
        )
        if L > 1:
            mistakes[
                "Every block attended over layer 0's cache: block i takes "
                "its own layer's slice of the cache (index the stacked cache by the block's "
                "index)."
            ] = cached_logits(w, ids, cached, layer_zero_cache=True)
    if cached and s > 1:  # one new token: the order of the keys does not matter
        mistakes[
            "The new keys and values come before the cached ones: concatenate past then "
            "new, so that column j of the scores is position j, the order the mask assumes."
        ] = cached_logits(w, ids, cached, new_first=True)
    if s > 1:
        mistakes[
            "The causal mask is missing: each new token must see the cached tokens and the "
            "new tokens up to itself, not the ones after it (step 02's causal mask, offset "
            "by the cache length)."
        ] = cached_logits(w, ids, cached, mask=False)
    return mistakes


def cache_diagnosis(what: str, got, past: np.ndarray, want: np.ndarray, other_want) -> None:
    """Name a known mistake in a returned cache (keys or values), if one fits.

    got: what the model returned; past: the cache it was given; want: the
    right grown cache; other_want: the right grown cache of the other kind
    (values for keys), all [n_layer, batch, heads, seq, head_dim]."""
    got = to_numpy(got, f"the returned {what}")
    p, total = past.shape[3], want.shape[3]
    s = total - p
    if got.shape == want.shape[:3] + (p,) + want.shape[4:] and (p == 0 or close(got, past)):
        raise Fail(
            f"The returned {what} did not grow: they are the cache the model was given "
            f"({p} tokens), without the {s} new token(s).",
            f"Return the {what} after appending the new tokens' {what} to the cache, from "
            "every layer.",
        )
    if p and got.shape == want.shape[:3] + (s,) + want.shape[4:]:
        raise Fail(
            f"The returned {what} hold only the {s} new token(s), not the {p} cached one(s) "
            "before them: the cache was replaced, not appended to.",
            f"Append the new {what} to the cached ones along the sequence axis.",
        )
    swapped = (want.shape[1], want.shape[0], *want.shape[2:])
    if got.shape == swapped and close(got.swapaxes(0, 1), want):
        raise Fail(
            f"The returned {what} have shape {list(got.shape)}: the layers were stacked "
            f"along axis 1; they go first, [n_layer, batch, heads, seq, head_dim] = "
            f"{list(want.shape)}.",
            "Stack the layers' tensors along axis 0.",
        )
    other = "values" if what == "keys" else "keys"
    if close(got, other_want):
        raise Fail(
            f"The returned {what} are the {other}: keys and values are swapped.",
            "forward returns (logits, keys, values), in that order, and each layer returns "
            "its own key and value in the order its attention gives them.",
        )
    if p and close(got, np.concatenate([want[:, :, :, p:], past], axis=3)):
        raise Fail(
            f"The returned {what} hold the new {what} before the cached ones. "
            "The cache must stay in order of position: concatenate past then new.",
            "Column j of the scores must be position j: that is the order the causal mask "
            "and every later step assume.",
        )
    if p and L > 1 and not close(past[1], past[0]) and close(got[1, :, :, :p], past[0]):
        raise Fail(
            f"Layer 1 returned layer 0's cached {what} followed by its own new "
            "ones: every block was given layer 0's cache.",
            "Block i takes its own layer's slice of the stacked cache.",
        )


def check_cache(ctx: Context, keys, values, past, want, what: str) -> None:
    """The returned cache: a named mistake if one fits, else equal to `want`."""
    cache_diagnosis("keys", keys, past[0], want[0], want[1])
    cache_diagnosis("values", values, past[1], want[1], want[0])
    expect_close(keys, want[0], f"the returned keys {what}")
    expect_close(values, want[1], f"the returned values {what}")


def step(ctx: Context, module, ids: np.ndarray, keys: np.ndarray, values: np.ndarray):
    LOOKED_UP.clear()
    try:
        out = ctx.run_lazily(
            "CachedGPT2LMHeadModel.forward", module, tensor(ids), tensor(keys), tensor(values)
        )
    except Fail as failure:
        positions_diagnosis(keys.shape[3], ids.shape[1])
        hint = raised_hint(failure.message, keys.shape[3], ids.shape[1])
        raise Fail(failure.message, hint or failure.hint) from None
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise Fail(
            "forward should return (logits, keys, values).",
            "Return the logits and the grown caches, stacked over layers.",
        )
    return out


SHAPE = re.compile(r"shape=\[([^\]]*)\]")


def raised_hint(message: str, p: int, s: int) -> str | None:
    """What a MAX error in the cached model most likely means, with p cached
    and s new tokens."""
    shapes = ["[" + re.sub(r"Dim\((\w+)\)", r"\1", m) + "]" for m in SHAPE.findall(message)]
    if "'AddOp'" in message and len(shapes) == 2 and shapes[0].endswith(f"{s}, {p + s}]"):
        return (
            f"The mask does not cover the cached tokens: the scores are {shapes[0]} (one "
            f"column per cached and new token) and the mask is {shapes[1]}. The mask must be "
            f"[{s}, {p + s}]: step 02's causal_mask with the cache length as num_tokens."
        )
    if "'MatmulOp'" in message and p:
        return (
            f"With {p} cached token(s), attention multiplied tensors of different lengths "
            f"({', '.join(shapes)}): append the new keys to the cached keys and the new "
            "values to the cached values, both along the sequence axis, so that both are "
            f"[batch, heads, {p + s}, head_dim]."
        )
    if "concat" in message.lower() and "not iterable" in message:
        return (
            "F.concat takes one list of the tensors to join, in order, and the axis to "
            "join them along."
        )
    if "Concat inputs differ" in message or "'ConcatOp'" in message:
        return (
            "F.concat joins tensors along one axis; every other axis must match. The "
            f"cache is [batch, heads, {p}, head_dim] and the new tokens' keys or values "
            f"[batch, heads, {s}, head_dim]: they differ only in the sequence axis, 2."
        )
    return None


def empty() -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((L, 1, H, 0, D), np.float32), np.zeros((L, 1, H, 0, D), np.float32)


def prefill(ctx: Context) -> None:
    module, w = model(ctx)
    ids = ctx.token_ids(CONFIG.vocab_size, 1, 6)
    logits, keys, values = step(ctx, module, ids, *empty())
    want = reference_cache(w, ids)
    try:
        expect_close(
            logits, full_logits(w, ids), "logits with an empty cache", logit_mistakes(w, ids, 0)
        )
    except Fail:
        positions_diagnosis(0, ids.shape[1])
        cache_diagnosis("keys", keys, empty()[0], want[0], want[1])
        cache_diagnosis("values", values, empty()[1], want[1], want[0])
        raise
    check_cache(ctx, keys, values, empty(), want, "[n_layer, batch, heads, seq, head_dim]")


def incremental(ctx: Context) -> None:
    module, w = model(ctx)
    for prompt_length in (1, 5):
        ids = ctx.token_ids(CONFIG.vocab_size, 1, prompt_length)
        logits, keys, values = step(ctx, module, ids, *empty())
        for new in range(2):
            token = int(np.argmax(np.asarray(logits.to_numpy())[0, -1]))
            ids = np.concatenate([ids, [[token]]], axis=1)
            past = (np.asarray(keys.to_numpy()), np.asarray(values.to_numpy()))
            logits, keys, values = step(ctx, module, np.asarray([[token]]), *past)
            want = reference_cache(w, ids)
            what = (
                f"for new token {new + 1} after a {prompt_length}-token prompt, fed alone "
                "with the cache"
            )
            try:
                expect_close(
                    logits,
                    full_logits(w, ids)[:, -1:],
                    f"logits {what}",
                    logit_mistakes(w, ids, ids.shape[1] - 1),
                    hint="Append the new key and value to the cache along the sequence axis "
                    "(axis 2 of [batch, heads, seq, head_dim]) and attend over all of it.",
                )
            except Fail:
                positions_diagnosis(ids.shape[1] - 1, 1)
                cache_diagnosis("keys", keys, past[0], want[0], want[1])
                cache_diagnosis("values", values, past[1], want[1], want[0])
                raise
            check_cache(ctx, keys, values, past, want, what)


def chunk_after_cache(ctx: Context) -> None:
    module, w = model(ctx)
    ids = ctx.token_ids(CONFIG.vocab_size, 1, 7)
    _, keys, values = step(ctx, module, ids[:, :4], *empty())
    past = (np.asarray(keys.to_numpy()), np.asarray(values.to_numpy()))
    logits, keys, values = step(ctx, module, ids[:, 4:], *past)
    want = reference_cache(w, ids)
    try:
        expect_close(
            logits,
            full_logits(w, ids)[:, 4:],
            "logits for 3 new tokens after 4 cached ones",
            logit_mistakes(w, ids, 4),
            hint="Several new tokens need the causal mask offset by the cache length: "
            "step 02's causal_mask with num_tokens = the number of cached tokens.",
        )
    except Fail:
        positions_diagnosis(4, 3)
        cache_diagnosis("keys", keys, past[0], want[0], want[1])
        cache_diagnosis("values", values, past[1], want[1], want[0])
        raise
    check_cache(ctx, keys, values, past, want, "after 3 new tokens")


def greedy_matches(ctx: Context) -> None:
    module, w = model(ctx)
    prompt = [3, 14, 15, 92, 65]
    want = ref.greedy_generate(w, prompt, 4, L, H, CONFIG.layer_norm_epsilon)
    calls: list[dict] = []

    def forward(input_ids, past_keys, past_values):  # the model, recording what it is fed
        out = as_one_graph(module, input_ids, past_keys, past_values)
        calls.append(
            {
                "tokens": int(input_ids.shape[-1]),
                "cached": int(past_keys.shape[3]),
                "keys": past_keys,
                "values": past_values,
                "returned": out,
            }
        )
        return out

    fn = ctx.get("generate_cached")
    got = ctx.call("generate_cached", lambda: [int(t) for t in fn(forward, CONFIG, prompt, 4)])
    fed = [call["tokens"] for call in calls]
    if fed != [len(prompt), 1, 1, 1]:
        raise Fail(
            f"generate_cached fed the model {fed} tokens per call; with a cache that is "
            f"{[len(prompt), 1, 1, 1]}.",
            "Feed the prompt once, then only the newest token: the cache holds the rest.",
        )
    cached = [call["cached"] for call in calls]
    want_cached = [0, len(prompt), len(prompt) + 1, len(prompt) + 2]
    if cached != want_cached:
        raise Fail(
            f"generate_cached gave the model caches of {cached} tokens; each call should "
            f"get the cache the previous call returned: {want_cached}.",
            "Pass the keys and values returned by the previous call into the next one: "
            "the cache the model returns replaces the one it was given.",
        )
    for call, out in zip(calls[1:], [c["returned"] for c in calls[:-1]], strict=True):
        if call["keys"] is out[2] and call["values"] is out[1]:
            raise Fail(
                "generate_cached passed the returned values as the keys and the keys as "
                "the values: keys and values are swapped between calls.",
                "forward returns (logits, keys, values): unpack them in that order.",
            )
    if got != want:
        raise Fail(
            f"generate_cached gave {got}; recomputing everything gives {want}.",
            "Pass the cache returned by each call into the next one, and pick each token "
            "from the last position's logits.",
        )


STEP = Step(
    number=17,
    typical=4,  # seconds, slowest check: token-by-token decoding, eagerly
    required={
        "CachedAttention": ["forward"],
        "CachedBlock": ["forward"],
        "CachedGPT2LMHeadModel": ["forward"],
        "generate_cached": [],
    },
    checks=[
        Check(
            "with an empty cache: GPT-2's logits, and each layer's keys and values",
            prefill,
        ),
        Check(
            "one token at a time with the cache = recomputing everything (prompts of 1 and 5)",
            incremental,
        ),
        Check(
            "several new tokens after a cache: the mask is offset by the cache",
            chunk_after_cache,
        ),
        Check("greedy generation with the cache matches GPT-2's", greedy_matches),
    ],
)
