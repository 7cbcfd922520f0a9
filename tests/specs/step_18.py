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
from tests.mistakes import Mutant, m
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


# Hint ladders: what to look at; the API or the shapes; the line.
CACHE_SHAPE_LINES = (
    "```python\nreturn CacheShape(\n    num_layers=config.n_layer,\n"
    "    n_kv_heads=config.n_head,\n    head_dim=config.n_embd // config.n_head,\n)\n```"
)
CACHE_SHAPE_API = (
    "`CacheShape(num_layers=..., n_kv_heads=..., head_dim=...)` takes three ints, all "
    "read from the `GPT2Config` (step 01's field names)."
)
CACHE_SHAPE_HINTS = {
    ".num_layers": (
        "`num_layers` is how many separate caches MAX keeps: one per transformer block, "
        "since every block has its own keys and values.",
        CACHE_SHAPE_API + " Which config field counts the blocks?",
        CACHE_SHAPE_LINES,
    ),
    ".n_kv_heads": (
        "`n_kv_heads` is how many key/value heads each layer caches. Some models share one "
        "key/value head between several query heads (grouped-query attention); GPT-2 does "
        "not: every attention head has its own keys and values.",
        CACHE_SHAPE_API + " Which config field counts the attention heads?",
        CACHE_SHAPE_LINES,
    ),
    ".head_dim": (
        "`head_dim` is how many numbers one head keeps per token: the embedding width "
        "split evenly between the heads (step 09), and an int, because MAX sizes the "
        "pages with it.",
        CACHE_SHAPE_API + " Python's `/` always gives a float; `//` divides integers.",
        CACHE_SHAPE_LINES,
    ),
    "": (
        "`cache_shape` tells MAX how big one token's cache is in every layer: how many "
        "layers, how many key/value heads per layer, and how many numbers per head.",
        CACHE_SHAPE_API,
        CACHE_SHAPE_LINES,
    ),
}
POSITIONS_LINES = (
    "```python\nshift = cache_lengths - starts  # where each request's count starts\n"
    "return F.squeeze(token_index, 1) + F.sum(belongs * shift, axis=-1).reshape([-1])\n```"
)
POSITIONS_LADDER = (
    "Token t of the batch belongs to some request b. Its position is the request's cache "
    "length plus how far t is into the request (t minus the request's first row): so each "
    "request has one number, a shift, that turns a token's index in the batch into its "
    "position. Work the page's example by hand: offsets [0, 3, 4, 8], cache lengths "
    "[0, 7, 2] give positions 0 1 2 | 7 | 2 3 4 5.",
    "`starts` ([batch]) holds each request's first row and `cache_lengths` ([batch]) its "
    "cached count: the shift is a [batch] vector made from the two. `belongs` is "
    "[total_tokens, batch] with a single 1 per row, so multiplying it by the shifts and "
    "summing over the request axis (`F.sum(x, axis=-1)`, which keeps that axis: "
    "[total_tokens, 1]) picks each token's shift. Flatten it to [total_tokens] and add "
    "the token index.",
    POSITIONS_LINES,
)
POSITIONS_HINTS = {
    "summed axis": (
        "The positions came out two-dimensional. `F.sum` keeps the axis it sums over, so "
        "the shifts are [total_tokens, 1]; added to a [total_tokens] vector, that "
        "broadcasts to a square.",
        "`Tensor.reshape([-1])` flattens a tensor to one dimension.",
        POSITIONS_LINES,
    ),
    "": POSITIONS_LADDER,
}
LAST_ROWS_LINES = (
    "```python\nlast = F.cast(input_row_offsets[1:], DType.int64) - 1\n"
    "return F.gather(hidden_states, last, axis=0)\n```"
)
LAST_ROWS_HINTS = (
    "Request b's rows are input_row_offsets[b] up to, not including, "
    "input_row_offsets[b + 1]. Its last row is therefore the one just before the next "
    "request's first: for offsets [0, 3, 4, 8], rows 2, 3 and 7.",
    "Slicing `input_row_offsets[1:]` gives every request's end ([batch]); cast it to int64 "
    "(the server passes uint32) before subtracting. `F.gather(x, indices, axis=0)` picks "
    "rows of x: [batch, n_embd].",
    LAST_ROWS_LINES,
)
LAYER_IDX_HINTS = (
    "Every block must read and write its own layer of the cache: block i passes "
    "`layer_idx` = i to the cache kernels, counted from 0, not the same number for all.",
    "The kernels read the layer index on the host: a uint32 scalar built with "
    "`F.constant(value, dtype, device=...)` on `CPU()`, one per block inside the loop "
    "over `transformer.h`.",
    "```python\nlayer_idx = F.constant(index, DType.uint32, device=CPU())\n```",
)
ATTENTION_LINES = (
    "```python\n"
    "store_keys(kv_collection, key.reshape(heads), input_row_offsets, layer_idx)\n"
    "store_values(kv_collection, value.reshape(heads), input_row_offsets, layer_idx)\n"
    "attn_output = paged_attention(\n"
    "    kv_params,\n"
    "    input=query.reshape(heads),\n"
    "    input_row_offsets=input_row_offsets,\n"
    "    kv_collection=kv_collection,\n"
    "    layer_idx=layer_idx,\n"
    "    mask_variant=MHAMaskVariant.CAUSAL_MASK,\n"
    "    scale=1 / math.sqrt(self.head_dim),\n"
    ")\n```"
)
MODEL_LINES = (
    "```python\n"
    "positions = ragged_positions(input_row_offsets, cache_lengths, tokens.shape[0])\n"
    "layer_idx = F.constant(index, DType.uint32, device=CPU())\n"
    "last = last_token_rows(hidden_states, input_row_offsets)\n```"
)
STORE = (
    "`PagedAttention.forward` must write this batch's keys and values into the cache "
    "*before* attending: the attention kernel reads every key and value, the new ones "
    "included, from the cache. Keys go to the key cache and values to the value cache.",
    "`store_keys(kv_collection, x, input_row_offsets, layer_idx)` and `store_values(...)` "
    "(same arguments) take [total_tokens, heads, head_dim]; `heads` in the skeleton is "
    "that shape, for `reshape`.",
    ATTENTION_LINES,
)
MODEL_HINTS = {
    "store_keys and store_values first": STORE,
    "swapped": STORE,
    "reshape": (
        "MAX's cache kernels work per head: everything they take is "
        "[total_tokens, heads, head_dim], not [total_tokens, n_embd].",
        "`x.reshape(heads)`, with the skeleton's `heads = [-1, num_heads, head_dim]`, for "
        "the keys, the values and the query alike.",
        ATTENTION_LINES,
    ),
    "scale": (
        "The kernel scales the scores by the number you pass: GPT-2's scale is step 08's.",
        "`paged_attention`'s `scale` argument: 1 over the square root of `self.head_dim` "
        "(`math.sqrt`).",
        ATTENTION_LINES,
    ),
    "causal": (
        "The kernel applies the mask you choose: GPT-2 needs the causal one, which the "
        "kernel offsets by each request's cache length.",
        "`mask_variant=` takes a member of `MHAMaskVariant` (imported in the skeleton); "
        "the causal one is named after the mask.",
        ATTENTION_LINES,
    ),
    "kv_params": STORE,
    "kv_collection": (
        "The cache object (`kv_collection`), the cache parameters (`kv_params`) and the "
        "layer index travel from the model through every block to the attention, unchanged.",
        "`PagedBlock.forward(hidden_states, *cache)` hands its extra arguments to "
        "`self.attn`; the model passes `input_row_offsets, kv_collection, kv_params, "
        "layer_idx`.",
        MODEL_LINES,
    ),
    "request's last row": LAST_ROWS_HINTS,
    "one next token per request": LAST_ROWS_HINTS,
    "positions": POSITIONS_LADDER,
    "": (
        "Each request's logits must be the logits GPT-2 gives its sequence alone. Check "
        "the three places where requests differ: the positions (`ragged_positions`), the "
        "cache (`PagedAttention` stores, then attends), and the rows kept at the end "
        "(`last_token_rows`).",
        "The model's TODOs call your own functions: positions from the row offsets, the "
        "cache lengths and the token count; a uint32 layer index on the `CPU()` per "
        "block; each request's last hidden state before `ln_f` and the head.",
        MODEL_LINES + "\n" + ATTENTION_LINES,
    ),
}


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
            hints=CACHE_SHAPE_HINTS,
        ),
        Check(
            "ragged_positions: each request's positions continue its cache",
            positions_are_ragged,
            hints=POSITIONS_HINTS,
        ),
        Check(
            "last_token_rows: each request's last row",
            last_rows_are_each_requests_last,
            hints=LAST_ROWS_HINTS,
        ),
        Check(
            "every layer stores its own keys and values",
            layers_have_their_own_cache,
            hints={"layer_idx": LAYER_IDX_HINTS, **MODEL_HINTS},
        ),
        Check("a ragged batch of prompts = each prompt alone", ragged_prefill, hints=MODEL_HINTS),
        Check(
            "decoding after the cache, and a new request joining the batch",
            decode_after_cache,
            hints=MODEL_HINTS,
        ),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
STORES = (
    "        store_keys(kv_collection, key.reshape(heads), input_row_offsets, layer_idx)\n"
    "        store_values(kv_collection, value.reshape(heads), input_row_offsets, layer_idx)\n"
)
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
        "Keys and values are swapped",
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
        "count through the whole batch",
    ),
    m(
        "shift reversed",
        "shift = cache_lengths - starts",
        "shift = starts - cache_lengths",
        "shift is reversed",
    ),
    m(
        "shifts not flattened",
        "F.sum(belongs * shift, axis=-1).reshape([-1])",
        "F.sum(belongs * shift, axis=-1)",
        "F.sum keeps the summed axis",
    ),
    m(
        "last row off by one",
        "last = F.cast(input_row_offsets[1:], DType.int64) - 1",
        "last = F.cast(input_row_offsets[1:], DType.int64)",
        "off by one",
    ),
    m(
        "head_dim a float",
        "head_dim=config.n_embd // config.n_head,",
        "head_dim=config.n_embd / config.n_head,",
        "an int",
    ),
    Mutant(
        "layers and heads swapped",
        (
            ("num_layers=config.n_layer,", "num_layers=config.n_head,"),
            ("n_kv_heads=config.n_head,", "n_kv_heads=config.n_layer,"),
        ),
        "One cache per layer",
    ),
    m(
        "keys not split into heads",
        "store_keys(kv_collection, key.reshape(heads)",
        "store_keys(kv_collection, key",
        "Reshape the keys",
    ),
    m(
        "scores scaled by 1/head_dim",
        "scale=1 / math.sqrt(self.head_dim)",
        "scale=1 / self.head_dim",
        "1/sqrt(head_dim)",
    ),
    Mutant(
        "attention before storing",
        (
            (STORES, ""),
            (
                "        return self.c_proj(attn_output.reshape([-1, self.embed_dim]))",
                STORES + "        return self.c_proj(attn_output.reshape([-1, self.embed_dim]))",
            ),
        ),
        "store_keys and store_values first",
    ),
    m(
        "layer index off by one",
        "F.constant(index, DType.uint32",
        "F.constant(index + 1, DType.uint32",
        "is not a layer",
    ),
    m(
        "every token's logits",
        "last = last_token_rows(hidden_states, input_row_offsets)",
        "last = hidden_states",
        "one next token per request",
    ),
]
