"""Step 17: a KV cache.

Goal: keep every layer's keys and values, so that each new token computes
only its own position and attends over the cache, instead of rerunning the
model on the whole sequence. Same parameters, same checkpoint; only forward
changes.

Run: pixi run s17    (or: python -m tests.check 17)
Stuck? Read docs/src/step_17.md (pixi run book).
"""

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor
from max.graph import TensorType

from solutions.solution_01 import GPT2Config
from solutions.solution_02 import causal_mask
from solutions.solution_09 import GPT2MultiHeadAttention
from solutions.solution_11 import GPT2Block
from solutions.solution_13 import MaxGPT2LMHeadModel
from solutions.solution_14 import sample_next_token


class CachedAttention(GPT2MultiHeadAttention):
    """GPT2MultiHeadAttention that appends its keys and values to a cache."""

    def forward(self, hidden_states: Tensor, past_key: Tensor, past_value: Tensor):
        query, key, value = F.split(self.c_attn(hidden_states), [self.embed_dim] * 3, axis=-1)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        # The cache grows along the sequence axis: [batch, heads, past + seq, head_dim].
        # TODO: the new key and value in heads, [batch, heads, seq, head_dim],
        #   each appended to its cache along the sequence axis, the cached
        #   positions first: [batch, heads, past + seq, head_dim] (the page's
        #   "Appending to the cache").
        key = None
        value = None
        # END TODO

        scores = query @ key.transpose(-1, -2) / math.sqrt(self.head_dim)
        seq_length, num_cached = query.shape[2], past_key.shape[2]
        # A single new token is the last position: it may see everything, so
        # it needs no mask. Otherwise new token i sits at position
        # num_cached + i and sees the cache and the new tokens up to itself:
        # step 02's num_tokens argument.
        if seq_length != 1:
            # TODO: the scores plus step 02's causal mask for seq_length new
            #   tokens after num_cached cached ones: [seq, past + seq], like the
            #   scores' last two axes, in their dtype and on their device (the
            #   page's "The mask, offset by the cache").
            scores = None
            # END TODO
        weights = F.softmax(scores, axis=-1)
        attn_output = self._merge_heads(weights @ value, self.num_heads, self.head_dim)
        return self.c_proj(attn_output), key, value


class CachedBlock(GPT2Block):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        self.attn = CachedAttention(config)

    def forward(self, hidden_states: Tensor, past_key: Tensor, past_value: Tensor):
        # TODO: the pre-norm block of step 11, except that attention now also
        #   takes this layer's cache and returns the grown keys and values.
        attn_output, key, value = None, None, None
        hidden_states = None
        hidden_states = None
        return None
        # END TODO


class CachedGPT2LMHeadModel(MaxGPT2LMHeadModel):
    """GPT-2 that takes the cache of past keys and values and returns it grown.

    past_keys, past_values: [n_layer, batch, heads, past, head_dim].
    """

    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        for index in range(config.n_layer):
            self.transformer.h[index] = CachedBlock(config)

    def forward(self, input_ids: Tensor, past_keys: Tensor, past_values: Tensor):
        transformer = self.transformer
        num_cached = past_keys.shape[3]
        # Positions continue after the cached tokens.
        # TODO: the positions of the new tokens, num_cached, num_cached + 1, ...:
        #   one per new token, [seq], int64, on the ids' device.
        positions = None
        # END TODO
        hidden_states = transformer.wte(input_ids) + transformer.wpe(positions)
        keys, values = [], []
        for index, block in enumerate(transformer.h):
            # TODO: run the block with its layer's cache (past_keys[index]) and
            #   collect the keys and values it returns.
            hidden_states, key, value = None, None, None
            # END TODO
            keys.append(key)
            values.append(value)
        logits = self.lm_head(transformer.ln_f(hidden_states))
        # TODO: return the logits and the two grown caches, each layer's
        #   [batch, heads, past + seq, head_dim] stacked into
        #   [n_layer, batch, heads, past + seq, head_dim].
        return None
        # END TODO


# The cache's shape for a model's config; `batch` and `past` are numbers, or
# names (symbolic sizes) for a compiled graph. Step 23 runs these functions
# with its own, for a model whose cache has key/value heads.
KVShape = Callable[[Any, int | str, int | str], list]


def gpt2_kv_shape(config: GPT2Config, batch: int | str, past: int | str) -> list:
    """The keys' cache, and the values': [n_layer, batch, n_head, past, head_dim]."""
    return [config.n_layer, batch, config.n_head, past, config.n_embd // config.n_head]


def empty_cache(
    config: GPT2Config, batch: int = 1, kv_shape: KVShape = gpt2_kv_shape
) -> tuple[Tensor, Tensor]:
    shape = kv_shape(config, batch, 0)
    return Tensor.zeros(shape, dtype=DType.float32), Tensor.zeros(shape, dtype=DType.float32)


def compile_cached(model: CachedGPT2LMHeadModel, kv_shape: KVShape = gpt2_kv_shape):
    """Two graphs: the prompt (any length, empty cache) and one new token
    (any cache length). Each has static sizes where it needs them."""
    config = model.config

    def cache_type(past):
        return TensorType(DType.float32, kv_shape(config, "batch", past), device=model.device)

    def token_type(seq):
        return TensorType(DType.int64, ["batch", seq], device=model.device)

    prefill = model.compile(token_type("seq"), cache_type(0), cache_type(0))
    decode = model.compile(token_type(1), cache_type("past"), cache_type("past"))

    def forward(input_ids: Tensor, past_keys: Tensor, past_values: Tensor):
        step = decode if int(past_keys.shape[3]) else prefill
        return step(input_ids, past_keys, past_values)

    return forward


def generate_cached(
    forward,
    config: GPT2Config,
    prompt_ids,
    max_new_tokens: int,
    *,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int | None = None,
    kv_shape: KVShape = gpt2_kv_shape,
):
    """Decoding with a cache: the prompt once, then one token per step.

    `forward` is the cached model or its compiled form (compile_cached).
    """
    rng = np.random.default_rng(seed)
    past_keys, past_values = empty_cache(config, kv_shape=kv_shape)
    input_ids = np.asarray([prompt_ids], dtype=np.int64)
    for _ in range(max_new_tokens):
        logits, past_keys, past_values = forward(Tensor(input_ids), past_keys, past_values)
        last = np.asarray(logits.to_numpy())[0, -1]
        if do_sample:
            next_id = sample_next_token(last, temperature=temperature, top_k=top_k, rng=rng)
        else:
            next_id = int(np.argmax(last))
        yield next_id
        # TODO: what goes into the model next? (The cache holds the rest.)
        input_ids = None
        # END TODO
