"""Checks for step 18: GPT-2's side of `max serve` (cache shape, ragged
positions, paged attention), in seconds and without a server.

MAX's paged-cache kernels need the server's page tables; here the learner's
module gets stand-ins with the same signatures that keep each request's keys
and values in NumPy and attend exactly as MAX's kernels do (causal, per
request, after the request's cached tokens). tests/test_serve.py runs the same
code with MAX's real kernels behind `max serve`.
"""

from __future__ import annotations

import math

import numpy as np

from tests import reference as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor, to_numpy
from tests.checker.compare import close
from tests.specs.model_parts import lm_shapes, small_config, tied_lm_weights

CONFIG = small_config(n_layer=2, n_positions=32)
L, H, E = CONFIG.n_layer, CONFIG.n_head, CONFIG.n_embd
D = E // H
KV_PARAMS = object()  # what MAX would pass: the learner hands it on untouched
# MAX's server passes row offsets and cache lengths as uint32. The eager
# interpreter the checker runs on has no precompiled uint32 kernels (each
# would compile on first use), so the checker passes int64: the learner's
# casts to int64 are then no-ops, and the same code runs under both.
INDEX = np.int64


class FakePagedCache:
    """Each request's keys and values per layer, grown the way MAX's paged
    cache grows: `store_*` writes the new rows after the request's cached
    ones, `attention` reads the request's cache up to each query."""

    def __init__(self) -> None:
        self.keys: dict[tuple[int, int], np.ndarray] = {}  # (layer, request) -> [len, H, D]
        self.values: dict[tuple[int, int], np.ndarray] = {}
        self.cache_lengths = np.zeros(0, INDEX)

    def begin(self, cache_lengths: list[int]) -> None:
        """A new batch: cache_lengths[b] of request b's tokens are cached."""
        self.cache_lengths = np.asarray(cache_lengths, INDEX)
        self.stored = {"keys": set(), "values": set()}

    def _rows(self, what: str, x, offsets, layer_idx, store: dict) -> None:
        array = to_numpy(x, f"the {what} given to store_{what}")
        if array.ndim != 3 or array.shape[1:] != (H, D):
            raise Fail(
                f"store_{what} got {what} of shape {list(array.shape)}; the paged cache "
                f"holds [total_tokens, heads, head_dim] = [n, {H}, {D}].",
                f"Reshape the {what} to [-1, num_heads, head_dim] before storing them.",
            )
        layer = self._layer(layer_idx)
        offsets = to_numpy(offsets, "input_row_offsets").astype(int)
        for request, length in enumerate(self.cache_lengths):
            new = array[offsets[request] : offsets[request + 1]]
            old = store.get((layer, request), np.zeros((0, H, D), np.float32))[:length]
            store[(layer, request)] = np.concatenate([old, new])
        self.stored[what].add(layer)

    def _layer(self, layer_idx) -> int:
        layer = int(to_numpy(layer_idx, "layer_idx").reshape(-1)[0])
        if not 0 <= layer < L:
            raise Fail(
                f"layer_idx {layer} is not a layer of a {L}-layer model.",
                "Block i's layer_idx is its index in transformer.h, counted from 0.",
            )
        return layer

    def store_keys(self, kv_collection, x_k, input_row_offsets, layer_idx) -> None:
        self._check_cache(kv_collection)
        self._rows("keys", x_k, input_row_offsets, layer_idx, self.keys)

    def store_values(self, kv_collection, x_v, input_row_offsets, layer_idx) -> None:
        self._check_cache(kv_collection)
        self._rows("values", x_v, input_row_offsets, layer_idx, self.values)

    def _check_cache(self, kv_collection) -> None:
        if kv_collection is not self:
            raise Fail(
                "a cache kernel got something other than the kv_collection forward was given.",
                "Pass kv_collection through the blocks to the attention unchanged.",
            )

    def attention(
        self, kv_params, input, input_row_offsets, kv_collection, layer_idx, mask_variant, scale
    ):
        from max.nn.attention import MHAMaskVariant

        self._check_cache(kv_collection)
        if kv_params is not KV_PARAMS:
            raise Fail("paged_attention did not get the kv_params forward was given.")
        if mask_variant != MHAMaskVariant.CAUSAL_MASK:
            raise Fail(
                f"paged_attention got mask_variant={mask_variant}; GPT-2 needs the causal mask.",
                "Pass MHAMaskVariant's causal variant as mask_variant: the kernel then masks "
                "each request's future, after its cached tokens.",
            )
        if not math.isclose(float(scale), 1 / math.sqrt(D), rel_tol=1e-4):
            raise Fail(
                f"paged_attention got scale={float(scale):.4g}; GPT-2 scales the scores by "
                f"1/sqrt(head_dim) = {1 / math.sqrt(D):.4g}.",
                "Pass 1 over the square root of head_dim as scale, as in step 08.",
            )
        layer = self._layer(layer_idx)
        if layer not in self.stored["keys"] or layer not in self.stored["values"]:
            raise Fail(
                f"layer {layer}'s attention ran before its new keys and values were stored.",
                "Call store_keys and store_values first: the kernel reads the new "
                "tokens' keys and values from the cache.",
            )
        query = to_numpy(input, "the query given to paged_attention")
        if query.ndim != 3 or query.shape[1:] != (H, D):
            raise Fail(
                f"paged_attention got a query of shape {list(query.shape)}; it takes "
                f"[total_tokens, heads, head_dim] = [n, {H}, {D}].",
                "Reshape the query to [-1, num_heads, head_dim].",
            )
        offsets = to_numpy(input_row_offsets, "input_row_offsets").astype(int)
        out = np.zeros_like(query)
        for request, cached in enumerate(self.cache_lengths.astype(int)):
            rows = slice(offsets[request], offsets[request + 1])
            q = query[rows].transpose(1, 0, 2)  # [H, n, D]
            k = self.keys[(layer, request)].transpose(1, 0, 2)  # [H, cached + n, D]
            v = self.values[(layer, request)].transpose(1, 0, 2)
            scores = q @ k.transpose(0, 2, 1) * float(scale)
            scores = scores + ref.causal_mask(q.shape[1], cached)
            out[rows] = (ref.softmax(scores) @ v).transpose(1, 0, 2)
        return tensor(out.astype(np.float32))


def model(ctx: Context):
    return ctx.once("model", lambda: build_model(ctx))


def build_model(ctx: Context):
    module = ctx.build("PagedGPT2LMHeadModel", CONFIG)
    weights = tied_lm_weights(ctx, CONFIG, wte_scale=15)
    ctx.load_weights(module, lm_shapes(CONFIG), weights)
    return module, {k: v.astype(np.float64) for k, v in weights.items()}


def with_fake_cache(ctx: Context) -> FakePagedCache:
    cache = FakePagedCache()
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
    shape = tuple(to_numpy(got, "ragged_positions").shape)
    if shape in ((total, total), (total, 1)):
        raise Fail(
            f"ragged_positions returned shape {list(shape)}; positions are one per token, "
            f"[total_tokens] = [{total}].",
            "F.sum keeps the summed axis: each token's shift comes out [total_tokens, 1], and "
            "adding that to a [total_tokens] vector broadcasts to [total_tokens, "
            "total_tokens]. Flatten the shifts to [total_tokens] before adding.",
        )
    starts = np.repeat(np.asarray(OFFSETS[:-1]), lengths)
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
