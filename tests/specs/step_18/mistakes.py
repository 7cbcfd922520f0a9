"""The mistakes step 18's checks must name: plausible learner edits of
solutions/solution_18.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from __future__ import annotations

from tests.mistakes import Mutant, m

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
        "the column is the shifts, since F.sum keeps the summed axis",
    ),
    m(
        "token index left a column",
        "return F.squeeze(token_index, 1) + ",
        "return token_index + ",
        "the column is the token index",
    ),
    m(
        "neither summand flattened",
        "return F.squeeze(token_index, 1) + F.sum(belongs * shift, axis=-1).reshape([-1])",
        "return token_index + F.sum(belongs * shift, axis=-1)",
        "Both summands are [8, 1] columns",
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
