"""Step 18's stand-ins for MAX's paged-cache kernels: each request's keys and
values per layer in NumPy, attended over exactly as MAX's kernels do (causal,
per request, after the request's cached tokens). One stand-in judges the whole
attention; another only the arguments the attention kernel is given."""

from __future__ import annotations

import math

import numpy as np

from tests import reference_gpt2 as ref
from tests.checker import Fail, tensor, to_numpy
from tests.specs.model_parts import small_config

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
        self._check_cache(kv_collection)
        query = judge_arguments(kv_params, input, mask_variant, scale)
        layer = self._layer(layer_idx)
        if layer not in self.stored["keys"] or layer not in self.stored["values"]:
            raise Fail(
                f"layer {layer}'s attention ran before its new keys and values were stored.",
                "Call store_keys and store_values first: the kernel reads the new "
                "tokens' keys and values from the cache.",
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


class ArgumentsOnly(FakePagedCache):
    """Judges only what the attention kernel is given (the query, the mask, the
    scale): the stores are taken as they come, and attention returns zeros."""

    def store_keys(self, kv_collection, x_k, input_row_offsets, layer_idx) -> None:
        pass

    def store_values(self, kv_collection, x_v, input_row_offsets, layer_idx) -> None:
        pass

    def attention(
        self, kv_params, input, input_row_offsets, kv_collection, layer_idx, mask_variant, scale
    ):
        query = judge_arguments(kv_params, input, mask_variant, scale)
        return tensor(np.zeros_like(query, dtype=np.float32))


def judge_arguments(kv_params, query, mask_variant, scale) -> np.ndarray:
    """The query as NumPy, once kv_params, the mask, the scale and the query's
    shape are GPT-2's; otherwise a Fail naming the argument."""
    from max.nn.attention import MHAMaskVariant

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
    query = to_numpy(query, "the query given to paged_attention")
    if query.ndim != 3 or query.shape[1:] != (H, D):
        raise Fail(
            f"paged_attention got a query of shape {list(query.shape)}; it takes "
            f"[total_tokens, heads, head_dim] = [n, {H}, {D}].",
            "Reshape the query to [-1, num_heads, head_dim].",
        )
    return query
