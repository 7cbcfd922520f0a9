"""Step 18: serving GPT-2 with `max serve`.

A server answers many requests at once, each at its own point: one prompt is
being read while another is on its 40th generated token. MAX's server batches
them all into one forward pass (continuous batching) and keeps every request's
keys and values in a paged KV cache: fixed-size pages handed out as a sequence
grows, instead of step 17's one growing tensor per sequence.

The batch is ragged: the tokens of every request are concatenated into one
flat [total_tokens] vector, and `input_row_offsets` ([batch + 1]) says where
each request starts and ends. A request being prefilled brings its whole
prompt; a request being decoded brings one token. Each request's cache length
says how many of its tokens are already in the cache.

What is GPT-2-specific, and yours to write: the cache shape (GPT-2 has one
key/value head per query head), the learned position of every token in a
ragged batch, attention that stores the new keys and values in the paged
cache and attends over them, and picking each request's last hidden state.
MAX brings the rest: the scheduler, the pages, the HTTP API, the tokenizer.
The modules and parameter names are the ones from steps 09-13, so step 15's
loader turns a Hugging Face checkpoint into these weights unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from max.driver import CPU
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor
from max.nn.attention import MHAMaskVariant
from max.nn.kernels import flash_attention_ragged, store_k_cache_ragged, store_v_cache_ragged

from solutions.solution_01 import GPT2Config
from solutions.solution_09 import GPT2MultiHeadAttention
from solutions.solution_11 import GPT2Block
from solutions.solution_13 import MaxGPT2LMHeadModel

# MAX's kernels are graph functions; F.functional lets them take and return
# the Tensors our modules use.
paged_attention = F.functional(flash_attention_ragged)
store_keys = F.functional(store_k_cache_ragged)
store_values = F.functional(store_v_cache_ragged)


@dataclass(frozen=True)
class CacheShape:
    """What MAX needs to size the paged cache: per layer, per token, per head."""

    num_layers: int
    n_kv_heads: int
    head_dim: int


def cache_shape(config: GPT2Config) -> CacheShape:
    # GPT-2 is plain multi-head attention: every query head has its own key
    # and value head (no grouped-query sharing).
    return CacheShape(
        num_layers=config.n_layer,
        n_kv_heads=config.n_head,
        head_dim=config.n_embd // config.n_head,
    )


# ANCHOR: positions
def ragged_positions(input_row_offsets: Tensor, cache_lengths: Tensor, num_tokens) -> Tensor:
    """The position of every token of a ragged batch: [total_tokens] int64.

    Token t of request b sits at cache_lengths[b] + (t - input_row_offsets[b]):
    after the request's cached tokens, counting from the request's start.
    """
    offsets = F.cast(input_row_offsets, DType.int64)
    starts, ends = offsets[:-1], offsets[1:]
    token_index = Tensor.arange(num_tokens, dtype=DType.int64, device=offsets.device)
    # One row per token, one column per request: 1 where the token belongs
    # to the request. Rows are one-hot because requests do not overlap.
    token_index = F.unsqueeze(token_index, 1)
    belongs = F.cast(token_index >= starts, DType.int64) * F.cast(token_index < ends, DType.int64)
    # MAX cannot prove the cache has one length per request: say so.
    cache_lengths = F.rebind(F.cast(cache_lengths, DType.int64), starts.shape)
    shift = cache_lengths - starts  # where each request's count starts
    return F.squeeze(token_index, 1) + F.sum(belongs * shift, axis=-1).reshape([-1])


# ANCHOR_END: positions


def last_token_rows(hidden_states: Tensor, input_row_offsets: Tensor) -> Tensor:
    """Each request's last row: only its next token is sampled. [batch, n_embd]."""
    last = F.cast(input_row_offsets[1:], DType.int64) - 1
    return F.gather(hidden_states, last, axis=0)


# ANCHOR: attention
class PagedAttention(GPT2MultiHeadAttention):
    """GPT-2 attention over a ragged batch, with keys and values in MAX's paged cache."""

    def forward(self, hidden_states, input_row_offsets, kv_collection, kv_params, layer_idx):
        # hidden_states: [total_tokens, n_embd], every request's new tokens.
        query, key, value = F.split(self.c_attn(hidden_states), [self.embed_dim] * 3, axis=-1)
        heads = [-1, self.num_heads, self.head_dim]  # [total_tokens, heads, head_dim]
        # Write the new keys and values into each request's pages, after its
        # cached tokens; the attention kernel then reads them from there.
        store_keys(kv_collection, key.reshape(heads), input_row_offsets, layer_idx)
        store_values(kv_collection, value.reshape(heads), input_row_offsets, layer_idx)
        # Each query attends over its own request's cache up to itself: the
        # kernel applies the causal mask per request, offset by its cache.
        attn_output = paged_attention(
            kv_params,
            input=query.reshape(heads),
            input_row_offsets=input_row_offsets,
            kv_collection=kv_collection,
            layer_idx=layer_idx,
            mask_variant=MHAMaskVariant.CAUSAL_MASK,
            scale=1 / math.sqrt(self.head_dim),
        )
        return self.c_proj(attn_output.reshape([-1, self.embed_dim]))


# ANCHOR_END: attention


class PagedBlock(GPT2Block):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        self.attn = PagedAttention(config)

    def forward(self, hidden_states, *cache):
        hidden_states = hidden_states + self.attn(self.ln_1(hidden_states), *cache)
        return hidden_states + self.mlp(self.ln_2(hidden_states))


class PagedGPT2LMHeadModel(MaxGPT2LMHeadModel):
    """GPT-2 over a ragged batch with a paged cache. Same parameters as step 13.

    tokens: [total_tokens] int64; input_row_offsets: [batch + 1] uint32;
    cache_lengths: [batch] uint32, each request's tokens already cached.
    Returns each request's next-token logits, [batch, vocab_size] float32.
    """

    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        for index in range(config.n_layer):
            self.transformer.h[index] = PagedBlock(config)

    def forward(self, tokens, input_row_offsets, cache_lengths, kv_collection, kv_params):
        transformer = self.transformer
        positions = ragged_positions(input_row_offsets, cache_lengths, tokens.shape[0])
        hidden_states = transformer.wte(tokens) + transformer.wpe(positions)
        for index, block in enumerate(transformer.h):
            # Each layer has its own keys and values in the cache; the
            # kernels read which one on the host.
            layer_idx = F.constant(index, DType.uint32, device=CPU())
            hidden_states = block(
                hidden_states, input_row_offsets, kv_collection, kv_params, layer_idx
            )
        last = last_token_rows(hidden_states, input_row_offsets)
        # The sampler expects float32 logits whatever the model's dtype.
        return F.cast(self.lm_head(transformer.ln_f(last)), DType.float32)
