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
from tests.mutants import Mutant, m
from tests.specs.common import lm_shapes, small_config, tied_lm_weights

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
            raise Fail(f"layer_idx {layer} is not a layer of a {L}-layer model.")
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
                "mask_variant=MHAMaskVariant.CAUSAL_MASK",
            )
        if not math.isclose(float(scale), 1 / math.sqrt(D), rel_tol=1e-4):
            raise Fail(
                f"paged_attention got scale={float(scale):.4g}; GPT-2 scales the scores by "
                f"1/sqrt(head_dim) = {1 / math.sqrt(D):.4g}.",
                "scale=1 / math.sqrt(self.head_dim)",
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
    expect_close(
        got,
        within + np.repeat(cached, lengths),
        f"ragged_positions for row offsets {OFFSETS} and cache lengths {CACHED}",
        {
            "Positions restart at 0 in each request but ignore its cached tokens: "
            "add cache_lengths[request].": within,
            "Positions count through the whole batch: subtract each request's start "
            "(input_row_offsets[request]).": np.arange(OFFSETS[-1]) + np.repeat(cached, lengths),
            "Positions count through the whole batch: each request starts at its own "
            "cache length.": np.arange(OFFSETS[-1]),
        },
        hint="Token t of request b is at cache_lengths[b] + t - input_row_offsets[b].",
    )


def last_rows_are_each_requests_last(ctx: Context) -> None:
    fn = ctx.get("last_token_rows")
    hidden = ctx.normal(OFFSETS[-1], 5)
    got = ctx.call("last_token_rows", fn, tensor(hidden), tensor(np.asarray(OFFSETS, INDEX)))
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
    expect_close(
        logits,
        want,
        f"next-token logits of a batch of {len(PROMPTS)} prompts ({[len(p) for p in PROMPTS]} "
        "tokens), each = the prompt run alone",
        {
            "These are the logits of every request's first token: take each request's "
            "last row.": np.stack([next_logits(w, p[:1]) for p in PROMPTS]),
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
    title="serving with max serve",
    required={
        "cache_shape": [],
        "ragged_positions": [],
        "last_token_rows": [],
        "PagedAttention": ["forward"],
        "PagedGPT2LMHeadModel": ["forward"],
    },
    checks=[
        Check("cache_shape: one key/value head per query head, per layer", cache_shape_is_gpt2s),
        Check(
            "ragged_positions: each request's positions continue its cache", positions_are_ragged
        ),
        Check("last_token_rows: each request's last row", last_rows_are_each_requests_last),
        Check("every layer stores its own keys and values", layers_have_their_own_cache),
        Check("a ragged batch of prompts = each prompt alone", ragged_prefill),
        Check("decoding after the cache, and a new request joining the batch", decode_after_cache),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m(
        "one shared key/value head",
        "n_kv_heads=config.n_head,",
        "n_kv_heads=1,",
        "one key/value head per query head",
    ),
    m(
        "head_dim is the whole width",
        "head_dim=config.n_embd // config.n_head,",
        "head_dim=config.n_embd,",
        "n_embd // n_head",
    ),
    m(
        "positions ignore the cache",
        "shift = cache_lengths - starts",
        "shift = 0 * cache_lengths - starts",
        "add cache_lengths",
    ),
    m(
        "positions count through the batch",
        "shift = cache_lengths - starts",
        "shift = cache_lengths",
        "subtract each request's start",
    ),
    m(
        "each request's first row",
        "last = F.cast(input_row_offsets[1:], DType.int64) - 1",
        "last = F.cast(input_row_offsets[:-1], DType.int64)",
        "first rows",
    ),
    Mutant(
        "keys and values swapped",
        (
            (
                "store_keys(kv_collection, key.reshape(heads)",
                "store_keys(kv_collection, value.reshape(heads)",
            ),
            (
                "store_values(kv_collection, value.reshape(heads)",
                "store_values(kv_collection, key.reshape(heads)",
            ),
        ),
        "key/value order",
    ),
    m(
        "values never stored",
        "store_values(kv_collection, value.reshape(heads), input_row_offsets, layer_idx)\n",
        "",
        "store_keys and store_values first",
    ),
    m(
        "scores scaled by sqrt(head_dim)",
        "scale=1 / math.sqrt(self.head_dim)",
        "scale=math.sqrt(self.head_dim)",
        "1/sqrt(head_dim)",
    ),
    m(
        "no causal mask",
        "mask_variant=MHAMaskVariant.CAUSAL_MASK",
        "mask_variant=MHAMaskVariant.NULL_MASK",
        "causal mask",
    ),
    m(
        "query not split into heads",
        "input=query.reshape(heads)",
        "input=query",
        "Reshape the query",
    ),
    m(
        "every layer is layer 0",
        "F.constant(index, DType.uint32",
        "F.constant(0, DType.uint32",
        "its own layer_idx",
    ),
    m(
        "positions from 0 across the batch",
        "positions = ragged_positions(input_row_offsets, cache_lengths, tokens.shape[0])",
        "positions = Tensor.arange(tokens.shape[0], dtype=DType.int64)",
        "positions",
    ),
]
