"""Step 17: a KV cache.

Generating token t+1 reruns the model on all t+1 tokens, although the keys and
values of the first t positions were already computed for token t: causal
attention means a position never changes once it is written. A KV cache keeps
every layer's keys and values; each new token then only computes its own
query, key and value, appends the key and value to the cache, and attends over
the whole cache. Each step costs one position instead of the whole prefix.

The cached model is the same model with the same parameter names, so the same
checkpoint loads into it; only `forward` learns to take and return the cache.
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
        key = F.concat([past_key, self._split_heads(key, self.num_heads, self.head_dim)], axis=2)
        value = F.concat(
            [past_value, self._split_heads(value, self.num_heads, self.head_dim)], axis=2
        )

        scores = query @ key.transpose(-1, -2) / math.sqrt(self.head_dim)
        seq_length, num_cached = query.shape[2], past_key.shape[2]
        # A single new token is the last position: it may see everything, so
        # it needs no mask. Otherwise new token i sits at position
        # num_cached + i and sees the cache and the new tokens up to itself:
        # step 02's num_tokens argument.
        if seq_length != 1:
            scores = scores + causal_mask(
                seq_length, int(num_cached), dtype=scores.dtype, device=scores.device
            )
        weights = F.softmax(scores, axis=-1)
        attn_output = self._merge_heads(weights @ value, self.num_heads, self.head_dim)
        return self.c_proj(attn_output), key, value


class CachedBlock(GPT2Block):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        self.attn = CachedAttention(config)

    def forward(self, hidden_states: Tensor, past_key: Tensor, past_value: Tensor):
        attn_output, key, value = self.attn(self.ln_1(hidden_states), past_key, past_value)
        hidden_states = hidden_states + attn_output
        hidden_states = hidden_states + self.mlp(self.ln_2(hidden_states))
        return hidden_states, key, value


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
        positions = Tensor.arange(
            num_cached, num_cached + input_ids.shape[-1], dtype=DType.int64, device=input_ids.device
        )
        hidden_states = transformer.wte(input_ids) + transformer.wpe(positions)
        keys, values = [], []
        for index, block in enumerate(transformer.h):
            hidden_states, key, value = block(hidden_states, past_keys[index], past_values[index])
            keys.append(key)
            values.append(value)
        logits = self.lm_head(transformer.ln_f(hidden_states))
        return logits, F.stack(keys, axis=0), F.stack(values, axis=0)


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
        input_ids = np.asarray([[next_id]], dtype=np.int64)  # only the new token
