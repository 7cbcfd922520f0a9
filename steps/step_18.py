"""Step 18: serving GPT-2 with `max serve`.

Goal: the GPT-2-specific pieces MAX's server needs to run your model on a
ragged batch of requests with its paged KV cache: the cache's shape, every
token's position, attention that stores keys and values in the cache and
attends over them, and each request's last hidden state. Then
`pixi run serve` answers OpenAI-style HTTP requests with your GPT-2.

Run: pixi run s18    (or: python -m tests.check 18)
Stuck? Read docs/src/step_18.md (pixi run book).
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
    # TODO: how many layers, key/value heads and numbers per head GPT-2
    #   caches, as ints read from the config, in a CacheShape (the class above).
    return None
    # END TODO


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
    # TODO: each request's shift, [batch]: what to add to a token's index in
    #   the batch to get its position. Then every token's index plus its own
    #   request's shift, which belongs ([total_tokens, batch], a single 1 per
    #   row) picks out. Mind the shapes: token_index is a [total_tokens, 1]
    #   column here, a sum over an axis keeps that axis, and the positions are
    #   [total_tokens] (the page's "Positions in a ragged batch").
    shift = None
    return None
    # END TODO


# ANCHOR_END: positions


def last_token_rows(hidden_states: Tensor, input_row_offsets: Tensor) -> Tensor:
    """Each request's last row: only its next token is sampled. [batch, n_embd]."""
    # TODO: the row index of each request's last token, [batch] int64 (request b
    #   ends just before input_row_offsets[b + 1]), then those rows of
    #   hidden_states.
    last = None
    return None
    # END TODO


# ANCHOR: attention
class PagedAttention(GPT2MultiHeadAttention):
    """GPT-2 attention over a ragged batch, with keys and values in MAX's paged cache."""

    def forward(self, hidden_states, input_row_offsets, kv_collection, kv_params, layer_idx):
        # hidden_states: [total_tokens, n_embd], every request's new tokens.
        query, key, value = F.split(self.c_attn(hidden_states), [self.embed_dim] * 3, axis=-1)
        heads = [-1, self.num_heads, self.head_dim]  # [total_tokens, heads, head_dim]
        # Write the new keys and values into each request's pages, after its
        # cached tokens; the attention kernel then reads them from there.
        # TODO: store the new keys and values in the cache, then attend over
        #   it with the query, with GPT-2's causal mask and 1/sqrt(head_dim)
        #   scale. The kernels take [total_tokens, heads, head_dim] (the `heads`
        #   shape above); the page's "Attention with a paged cache" gives each
        #   kernel's arguments.
        attn_output = None
        # END TODO
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
        # TODO: every token's position (ragged_positions, above).
        positions = None
        # END TODO
        hidden_states = transformer.wte(tokens) + transformer.wpe(positions)
        for index, block in enumerate(transformer.h):
            # Each layer has its own keys and values in the cache; the
            # kernels read which one on the host.
            # TODO: this block's layer index, a uint32 scalar constant on the
            #   CPU, where the kernels read it.
            layer_idx = None
            # END TODO
            hidden_states = block(
                hidden_states, input_row_offsets, kv_collection, kv_params, layer_idx
            )
        # TODO: keep only each request's last hidden state (last_token_rows).
        last = None
        # END TODO
        # The sampler expects float32 logits whatever the model's dtype.
        return F.cast(self.lm_head(transformer.ln_f(last)), DType.float32)
