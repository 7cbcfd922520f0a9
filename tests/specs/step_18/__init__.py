"""Checks for step 18: GPT-2's side of `max serve` (cache shape, ragged
positions, paged attention), in seconds and without a server.

MAX's paged-cache kernels need the server's page tables; here the learner's
module gets stand-ins with the same signatures (paged_cache.py) that keep each
request's keys and values in NumPy and attend exactly as MAX's kernels do.
tests/test_serve.py runs the same code with MAX's real kernels behind
`max serve`.
"""

from __future__ import annotations

import numpy as np

from tests import reference_gpt2 as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor, to_numpy
from tests.checker.compare import close
from tests.specs.model_parts import linear_shapes, lm_shapes, small_config, tied_lm_weights

from .paged_cache import CONFIG, INDEX, KV_PARAMS, ArgumentsOnly, E, FakePagedCache, H, L


def model(ctx: Context):
    return ctx.once("model", lambda: build_model(ctx))


def build_model(ctx: Context):
    module = ctx.build("PagedGPT2LMHeadModel", CONFIG)
    weights = tied_lm_weights(ctx, CONFIG, wte_scale=15)
    ctx.load_weights(module, lm_shapes(CONFIG), weights)
    return module, {k: v.astype(np.float64) for k, v in weights.items()}


def with_fake_cache(ctx: Context, cache: FakePagedCache | None = None) -> FakePagedCache:
    cache = cache or FakePagedCache()
    ctx.module.store_keys = cache.store_keys
    ctx.module.store_values = cache.store_values
    ctx.module.paged_attention = cache.attention
    return cache


def run_batch(ctx: Context, module, cache: FakePagedCache, requests, cached: list[int]):
    """One forward over a ragged batch: requests = each request's new tokens."""
    offsets = np.cumsum([0] + [len(r) for r in requests]).astype(INDEX)
    cache.begin(cached)
    tokens = np.concatenate([np.asarray(r, np.int64) for r in requests])
    return ctx.call(
        "PagedGPT2LMHeadModel.forward",
        module,
        tensor(tokens),
        tensor(offsets),
        tensor(cache.cache_lengths),
        cache,
        KV_PARAMS,
    )


def next_logits(w, ids) -> np.ndarray:
    return ref.lm_logits(w, np.asarray([ids]), L, H, CONFIG.layer_norm_epsilon)[0, -1]


def mistaken_logits(w, ids, positions, *, swap: bool = False) -> np.ndarray:
    """next_logits of one request run with the given positions, and with its keys
    and values swapped (stored the one for the other) if `swap`."""
    eps = CONFIG.layer_norm_epsilon
    x = w["transformer.wte.weight"][np.asarray(ids)] + w["transformer.wpe.weight"][positions]
    x = x[None]
    for i in range(L):
        prefix = f"transformer.h.{i}."
        h = ref.layer_norm(x, w[prefix + "ln_1.weight"], w[prefix + "ln_1.bias"], eps)
        q, k, v = (ref.split_heads(t, H) for t in ref.qkv(w, h, prefix + "attn.c_attn."))
        if swap:
            k, v = v, k
        attn = ref.merge_heads(ref.attention(q, k, v))
        x = x + ref.linear(attn, w[prefix + "attn.c_proj.weight"], w[prefix + "attn.c_proj.bias"])
        h = ref.layer_norm(x, w[prefix + "ln_2.weight"], w[prefix + "ln_2.bias"], eps)
        x = x + ref.mlp(w, h, prefix + "mlp.")
    x = ref.layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    return (x @ w["transformer.wte.weight"].T)[0, -1]


# -- the checks -------------------------------------------------------------


def cache_shape_is_gpt2s(ctx: Context) -> None:
    fn = ctx.get("cache_shape")
    for config in (CONFIG, small_config(n_layer=3, n_head=2, n_embd=48)):
        got = ctx.call("cache_shape", fn, config)
        want = {
            "num_layers": config.n_layer,
            "n_kv_heads": config.n_head,
            "head_dim": config.n_embd // config.n_head,
        }
        for field, value in want.items():
            found = getattr(got, field, None)
            # 64.0 == 64, but MAX sizes the cache's pages with integers.
            if found != value or type(found) is not int:
                raise Fail(
                    f"cache_shape(config).{field} is {found} for n_layer={config.n_layer}, "
                    f"n_head={config.n_head}, n_embd={config.n_embd}; expected {value}.",
                    {
                        "num_layers": "One cache per layer: config.n_layer.",
                        "n_kv_heads": "GPT-2 has one key/value head per query head: config.n_head.",
                        "head_dim": "Each head is n_embd // n_head wide: an int (`//`, not `/`).",
                    }[field],
                )


OFFSETS = [0, 3, 4, 8]  # requests of 3, 1 and 4 new tokens
CACHED = [0, 7, 2]  # ... after 0, 7 and 2 cached tokens


def positions_are_ragged(ctx: Context) -> None:
    fn = ctx.get("ragged_positions")
    offsets = np.asarray(OFFSETS, INDEX)
    cached = np.asarray(CACHED, INDEX)
    got = ctx.call("ragged_positions", fn, tensor(offsets), tensor(cached), int(offsets[-1]))
    within = np.concatenate([np.arange(b - a) for a, b in zip(OFFSETS, OFFSETS[1:], strict=False)])
    lengths = np.diff(OFFSETS)
    total = OFFSETS[-1]
    starts = np.repeat(np.asarray(OFFSETS[:-1]), lengths)
    broadcast_failure(to_numpy(got, "ragged_positions"), np.repeat(cached, lengths) - starts)
    expect_close(
        got,
        within + np.repeat(cached, lengths),
        f"ragged_positions for row offsets {OFFSETS} and cache lengths {CACHED}",
        {
            "Positions restart at 0 in each request but ignore its cached tokens: "
            "add cache_lengths[request].": within,
            "Positions count through the whole batch: subtract each request's start "
            "(input_row_offsets[request]).": np.arange(total) + np.repeat(cached, lengths),
            "Positions count through the whole batch: each request starts at its own "
            "cache length.": np.arange(total),
            "The shift is reversed: a token's position is its index in the batch, minus its "
            "request's first row, plus its request's cache length.": np.arange(total)
            + starts
            - np.repeat(cached, lengths),
        },
        hint="Token t of request b is at cache_lengths[b] + t - input_row_offsets[b].",
    )


def broadcast_failure(got: np.ndarray, shifts: np.ndarray) -> None:
    """Name what was added when the positions come out 2-D: the skeleton's
    token index is a [total_tokens, 1] column, and F.sum keeps the summed axis,
    so the learner adds a column to a column, or a column to a vector."""
    total = len(shifts)
    index = np.arange(total)
    if got.shape == (total, 1):
        raise Fail(
            f"ragged_positions returned shape [{total}, 1]; positions are one per token, "
            f"[total_tokens] = [{total}]. Both summands are [{total}, 1] columns: the token "
            "index (the skeleton's F.unsqueeze made it one, to compare it with the starts "
            "and ends) and the picked shifts (F.sum keeps the summed axis).",
            f"Make the sum [{total}]: both summands, or the result, without the axis of size 1.",
        )
    if got.shape != (total, total):
        return
    said = (
        f"ragged_positions returned shape [{total}, {total}]; positions are one per token, "
        f"[total_tokens] = [{total}]. A [{total}, 1] column plus a [{total}] vector "
        "broadcasts to that square"
    )
    if close(got, index[:, None] + shifts[None, :]):
        raise Fail(
            f"{said}: the column is the token index, which the skeleton's F.unsqueeze made "
            f"[{total}, 1] to compare it with the starts and ends, and the vector the shifts, "
            "already flattened.",
            f"Add the token index as a [{total}] vector: take its axis of size 1 back out "
            "before adding the shifts.",
        )
    if close(got, shifts[:, None] + index[None, :]):
        raise Fail(
            f"{said}: the column is the shifts, since F.sum keeps the summed axis, and the "
            "vector the token index.",
            f"Flatten the picked shifts to [{total}] before adding them to the token index.",
        )
    raise Fail(
        f"{said}: print the shapes of the two things you add.",
        f"The token index (a column since the skeleton's F.unsqueeze) and the picked shifts "
        f"(F.sum keeps the summed axis) must both be [{total}] when they are added.",
    )


def last_rows_are_each_requests_last(ctx: Context) -> None:
    fn = ctx.get("last_token_rows")
    hidden = ctx.normal(OFFSETS[-1], 5)
    offsets = tensor(np.asarray(OFFSETS, INDEX))
    try:
        got = ctx.call(
            "last_token_rows", lambda: np.asarray(fn(tensor(hidden), offsets).to_numpy())
        )
    except Fail as failure:
        # One row more: does it then return each request's next row?
        padded = np.concatenate([hidden, ctx.normal(1, 5)])
        try:
            rows = np.asarray(fn(tensor(padded), offsets).to_numpy())
        except Exception:
            raise failure from None
        if not close(rows, padded[np.asarray(OFFSETS[1:])]):
            raise
        raise Fail(
            failure.message,
            f"Off by one: the last offset ({OFFSETS[-1]}) is the number of rows, one past the "
            "last row. Request b's last row is just before the next request's first one: "
            "input_row_offsets[b + 1] - 1.",
        ) from None
    ends = np.asarray(OFFSETS[1:])
    expect_close(
        got,
        hidden[ends - 1],
        f"last_token_rows for row offsets {OFFSETS}",
        {
            "These are each request's first rows: the last one is input_row_offsets[b + 1] - 1.": (
                hidden[np.asarray(OFFSETS[:-1])]
            ),
        },
        hint="Gather rows input_row_offsets[1:] - 1 along axis 0.",
    )


PROMPTS = [[5, 17, 42, 8, 1], [60], [33, 2, 91]]


def attention_alone(ctx: Context, cache: FakePagedCache) -> None:
    """One PagedAttention on the hidden states of a ragged batch of prompts."""
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F

    module = ctx.once("attention", lambda: build_attention(ctx))
    with_fake_cache(ctx, cache)
    offsets = np.cumsum([0] + [len(p) for p in PROMPTS]).astype(INDEX)
    cache.begin([0] * len(PROMPTS))
    ctx.call(
        "PagedAttention.forward",
        module,
        tensor(ctx.normal(int(offsets[-1]), E)),
        tensor(offsets),
        cache,
        KV_PARAMS,
        F.constant(0, DType.uint32, device=CPU()),
    )


def build_attention(ctx: Context):
    module = ctx.build("PagedAttention", CONFIG)
    shapes = {**linear_shapes("c_attn", E, 3 * E), **linear_shapes("c_proj", E, E)}
    ctx.load_weights(module, shapes)
    return module


def attention_arguments(ctx: Context) -> None:
    attention_alone(ctx, ArgumentsOnly())


def stores_before_attending(ctx: Context) -> None:
    attention_alone(ctx, FakePagedCache())


def ragged_prefill(ctx: Context) -> None:
    module, w = model(ctx)
    cache = with_fake_cache(ctx)
    logits = run_batch(ctx, module, cache, PROMPTS, [0, 0, 0])
    want = np.stack([next_logits(w, p) for p in PROMPTS])
    total = sum(len(p) for p in PROMPTS)
    if to_numpy(logits, "PagedGPT2LMHeadModel.forward").shape == (total, CONFIG.vocab_size):
        raise Fail(
            f"forward returned logits for every token, [{total}, {CONFIG.vocab_size}]; the "
            f"server samples one next token per request: [batch, vocab_size] = "
            f"[{len(PROMPTS)}, {CONFIG.vocab_size}].",
            "Keep only each request's last row of the hidden states (last_token_rows) "
            "before the final layer norm and the head.",
        )
    expect_close(
        logits,
        want,
        f"next-token logits of a batch of {len(PROMPTS)} prompts ({[len(p) for p in PROMPTS]} "
        "tokens), each = the prompt run alone",
        {
            "These are the logits of every request's first token: take each request's "
            "last row.": np.stack([next_logits(w, p[:1]) for p in PROMPTS]),
            "Keys and values are swapped: the keys went to store_values and the values to "
            "store_keys, so attention scores the queries against the values.": np.stack(
                [mistaken_logits(w, p, np.arange(len(p)), swap=True) for p in PROMPTS]
            ),
            "The positions count through the whole batch (0 to total_tokens - 1): each "
            "request's positions start at its own cache length (ragged_positions).": np.stack(
                [
                    mistaken_logits(w, p, np.arange(a, a + len(p)))
                    for p, a in zip(
                        PROMPTS, np.cumsum([0] + [len(p) for p in PROMPTS]), strict=False
                    )
                ]
            ),
        },
        hint="Each row must be its own prompt's GPT-2 logits: check the positions, the "
        "key/value order and the head reshapes.",
    )


def decode_after_cache(ctx: Context) -> None:
    """Continuous batching: requests decoding one token next to one being prefilled."""
    module, w = model(ctx)
    cache = with_fake_cache(ctx)
    run_batch(ctx, module, cache, PROMPTS, [0, 0, 0])
    new = [[7], [19], [4]]
    logits = run_batch(ctx, module, cache, new, [len(p) for p in PROMPTS])
    full = [p + n for p, n in zip(PROMPTS, new, strict=True)]
    expect_close(
        logits,
        np.stack([next_logits(w, ids) for ids in full]),
        "logits for one new token per request after its cached prompt",
        {
            "The new tokens got positions from 0: they come after each request's cached "
            "tokens.": np.stack([next_logits(w, n) for n in new]),
        },
        hint="Attention must store the new keys and values and read the whole cache.",
    )
    # A request joins the running batch: its prompt next to the others' next token.
    joining = [50, 51, 52, 53]
    more = [[11], [12], [13], joining]
    cached = [len(ids) for ids in full] + [0]
    logits = run_batch(ctx, module, cache, more, cached)
    want = [next_logits(w, ids + n) for ids, n in zip(full, more, strict=False)]
    want.append(next_logits(w, joining))
    expect_close(
        logits,
        np.stack(want),
        "logits of a batch mixing three decoding requests and a new 4-token prompt",
        hint="Every request is independent: its own positions, its own cache.",
    )


def layers_have_their_own_cache(ctx: Context) -> None:
    module, _ = model(ctx)
    cache = with_fake_cache(ctx)
    run_batch(ctx, module, cache, PROMPTS[:1], [0])
    layers = {layer for layer, _ in cache.keys}
    if layers != set(range(L)):
        raise Fail(
            f"keys were stored for layers {sorted(layers)} of a {L}-layer model.",
            "Each block gets its own layer_idx (its index in transformer.h).",
        )


STEP = Step(
    number=18,
    required={
        "cache_shape": [],
        "ragged_positions": [],
        "last_token_rows": [],
        "PagedAttention": ["forward"],
        "PagedGPT2LMHeadModel": ["forward"],
    },
    checks=[
        Check(
            "cache_shape: one key/value head per query head, per layer",
            cache_shape_is_gpt2s,
        ),
        Check(
            "ragged_positions: each request's positions continue its cache",
            positions_are_ragged,
        ),
        Check(
            "last_token_rows: each request's last row",
            last_rows_are_each_requests_last,
        ),
        Check(
            "paged_attention gets the query in heads, the causal mask and 1/sqrt(head_dim)",
            attention_arguments,
        ),
        Check(
            "PagedAttention stores the new keys and values, in heads, before it attends",
            stores_before_attending,
        ),
        Check(
            "every layer stores its own keys and values",
            layers_have_their_own_cache,
        ),
        Check("a ragged batch of prompts = each prompt alone", ragged_prefill),
        Check(
            "decoding after the cache, and a new request joining the batch",
            decode_after_cache,
        ),
    ],
)
