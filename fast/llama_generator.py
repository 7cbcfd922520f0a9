"""fast/llama.py's model run: its two compiled graphs (one token; a prompt's,
built when a prompt first needs it), the KV caches they share, and the tokens
chosen from their logits."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence

import numpy as np
from max.driver import CPU, Buffer
from max.dtype import DType
from max.experimental.tensor import Tensor
from max.graph import BufferType, TensorType

from common import max_runtime
from fast.kernel_ops import FLOAT32
from fast.llama import FastLlama, FastLlamaConfig
from fast.sampling import token_chooser

# Shorter prompts go through the one-token graph a token at a time until the prompt
# graph is built: building it takes seconds even from MAX's cache (150 custom ops).
PROMPT_GRAPH_FROM = 64


class FastLlamaGenerator:
    """The compiled graphs (one token; a prompt's, when a prompt first needs
    it) and the caches they share (cache_dtype's)."""

    def __init__(
        self,
        model: FastLlama,
        context: int | None = None,
        prompt_graph_from: int = PROMPT_GRAPH_FROM,
    ) -> None:
        config = model.config
        self.config = config
        self.context = min(context or 4096, config.max_position_embeddings)
        self.prompt_graph_from = prompt_graph_from
        cpu = CPU()
        kv_shape = [
            config.num_hidden_layers,
            config.num_key_value_heads,
            "context",
            config.head_dim,
        ]
        self.cache_dtype = cache_dtype(config)
        cache_type = BufferType(self.cache_dtype, kv_shape, device=cpu)
        start_type = TensorType(DType.int64, [1], device=cpu)
        self._model = model
        self._prefill_types = (
            TensorType(DType.int64, ["seq"], device=cpu),
            cache_type,
            cache_type,
            start_type,
        )
        self.decode = model.compile(
            TensorType(DType.int64, [1], device=cpu), cache_type, cache_type, start_type
        )
        shape = [*kv_shape[:2], self.context, config.head_dim]
        caches = [Buffer.zeros(shape, self.cache_dtype, cpu) for _ in range(2)]
        self.key_cache, self.value_cache = (Tensor(storage=cache) for cache in caches)
        # A decoded token's id and position, written in place into buffers the
        # decode graph reads (fast/gpt2.py's FastGenerator.decoded_logits).
        ids, first = (Buffer.zeros([1], DType.int64, cpu) for _ in range(2))
        self._decode_ids, self._decode_start = ids.to_numpy(), first.to_numpy()  # views
        self._decode_buffers = (ids, *caches, first)
        self.decode.execute_raw(*self._decode_buffers)  # starts MAX's poller, set aside now
        self.pollers_set_aside = max_runtime.demote_idle_pollers()

    @functools.cached_property
    def prefill(self):
        """The prompt graph, compiled the first time it is asked for."""
        return self._model.compile(*self._prefill_types)

    def prompt_logits(
        self,
        token_ids: Sequence[int],
        prompt_graph: bool | None = None,
        caches: tuple[Buffer, Buffer] | None = None,
    ) -> np.ndarray:
        """The last position's logits [vocab] of a prompt on an empty cache
        (the generator's, or `caches`: another sequence's key and value
        buffers): through the prompt graph if `prompt_graph`, else a token at
        a time through the decode graph; by default by the prompt's length
        (from 2 tokens on once the prompt graph is built)."""
        if not token_ids:
            raise ValueError("the prompt has no tokens")
        by_length = len(token_ids) >= (2 if "prefill" in vars(self) else self.prompt_graph_from)
        if not (by_length if prompt_graph is None else prompt_graph):
            for position, token_id in enumerate(token_ids):
                logits = self.decoded_logits(token_id, position, caches)
            return logits
        ids = np.asarray(token_ids, dtype=np.int64)
        first = np.zeros([1], dtype=np.int64)
        key, value = (
            (self.key_cache, self.value_cache)
            if caches is None
            else (Tensor(storage=cache) for cache in caches)
        )
        logits = self.prefill(Tensor.from_dlpack(ids), key, value, Tensor.from_dlpack(first))
        return np.array(logits.to_numpy())

    def decoded_logits(
        self, token_id: int, start: int, caches: tuple[Buffer, Buffer] | None = None
    ) -> np.ndarray:
        """The logits [vocab] after `token_id` at position `start`, its key and
        value written there (in the generator's caches, or `caches`)."""
        self._decode_ids[0] = token_id
        self._decode_start[0] = start
        buffers = self._decode_buffers
        if caches is not None:
            buffers = (buffers[0], *caches, buffers[-1])
        (logits,) = self.decode.execute_raw(*buffers)
        return np.array(logits.to_numpy())

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int, **sampling) -> Iterator[int]:
        """The prompt once, then a token a step. `sampling`: do_sample and seed,
        and step 14's temperature and top_k."""
        if not prompt_ids:
            raise ValueError("the prompt has no tokens")
        if len(prompt_ids) + max_new_tokens > self.context:
            raise ValueError(
                f"{len(prompt_ids)} prompt tokens + {max_new_tokens} new ones exceed the "
                f"cache's {self.context} positions."
            )
        if max_new_tokens < 1:
            return
        choose = token_chooser(**sampling)
        next_id = choose(self.prompt_logits(prompt_ids))
        for position in range(len(prompt_ids), len(prompt_ids) + max_new_tokens - 1):
            yield next_id
            next_id = choose(self.decoded_logits(next_id, position))
        yield next_id


def cache_dtype(config: FastLlamaConfig) -> DType:
    """The KV cache's dtype: float16, as llama.cpp keeps it, which halves what
    a decoded token's attention reads (SmolLM2's float32 keys and values are
    23 MB at position 500, beside 97 MB of Q4_1 weights); float32 where every
    layer's matrix is float32, so that such a file computes as transformers
    does in float32. Either way each key and value is computed in float32."""
    kinds = config.kinds or {}
    layer_kinds = {kind for name, kind in kinds.items() if name.startswith("blk.")}
    return FLOAT32 if layer_kinds <= {"F32"} else DType.float16
