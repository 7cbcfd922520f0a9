"""The pieces MAX's pipeline asks of an architecture, for a GGUF file on
fast/llama.py.

- GGUFServingConfig: the sequence length MAX plans for, and the KV cache MAX
  insists on allocating, declared as small as it goes (one layer, one head
  of one number): the keys and values live in the model's own caches.
- FastLlamaPipelineModel: reads the file with fast/llama.py (its blocks as
  stored), compiles the one-token graph once, and keeps a pair of caches per
  request, so that each request's tokens go through llama_decode.mojo's one
  call as `generate --gguf` sends them. MAX batches requests; the model runs
  a batch's requests one after another (each reads every weight), then MAX
  samples the next tokens from the logits it returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

import numpy as np
from max.driver import CPU, Buffer
from max.dtype import DType
from max.graph import DeviceRef
from max.nn.kv_cache import KVCacheParamInterface, MHAKVCacheParams
from max.pipelines.context import TextContext
from max.pipelines.lib import ModelInputs, ModelOutputs, PipelineModelWithKVCache
from max.pipelines.lib.interfaces.arch_config import ArchConfigWithBoundedMaxSeqLen
from max.pipelines.modeling.config_enums import SupportedEncoding

ARCHITECTURE = "FastLlamaFromGGUF"
# The file's blocks are the file's: MAX's encoding names none of Q8_0 and Q4_1,
# and guesses one from the file's name; any it guesses is accepted and unused.
ENCODINGS: set[SupportedEncoding] = {"float32", "bfloat16", "float16", "q4_0", "q4_k", "q6_k"}


# ANCHOR: placeholder
def placeholder_kv_params(devices: list[DeviceRef]) -> MHAKVCacheParams:
    """The smallest paged cache MAX's scheduler can run with (MAX's Mamba
    declares the same): pages of 128 positions of one number."""
    return MHAKVCacheParams(
        dtype=DType.float32, n_kv_heads=1, head_dim=1, num_layers=1, devices=devices, page_size=128
    )


# ANCHOR_END: placeholder


@dataclass(kw_only=True)
class GGUFServingConfig(ArchConfigWithBoundedMaxSeqLen):
    DEFAULT_ENCODING: ClassVar[SupportedEncoding] = "float32"
    SUPPORTED_ENCODINGS: ClassVar[set[SupportedEncoding]] = ENCODINGS

    max_seq_len: int
    devices: list[DeviceRef] = field(default_factory=list)

    @classmethod
    def initialize(cls, pipeline_config, model_config=None, *, max_seq_len: int) -> Self:
        model_config = model_config or pipeline_config.model
        devices = [DeviceRef(spec.device_type, spec.id) for spec in model_config.device_specs]
        return cls(max_seq_len=max_seq_len, devices=devices)

    def get_kv_params(self) -> KVCacheParamInterface:
        return placeholder_kv_params(self.devices)


@dataclass
class Sequence:
    """One request's caches [layers, kv_heads, positions, head_dim] and how
    many of its tokens they hold."""

    caches: tuple[Buffer, Buffer]
    held: int = 0


class BatchInputs(ModelInputs):
    """The batch's requests, in MAX's order (the model reads their tokens)."""

    def __init__(self, contexts: list[TextContext]) -> None:
        self.contexts = contexts


class FastLlamaPipelineModel(PipelineModelWithKVCache[TextContext]):
    model_config_cls: ClassVar[type[Any]] = GGUFServingConfig
    batch_processor_cls: ClassVar[type[Any] | None] = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        from fast import llama

        self.generator = llama.FastLlamaGenerator(
            llama.load_gguf(self.pipeline_config.model.weight_path[0]), context=1
        )
        self.sequences: dict[Any, Sequence] = {}

    @classmethod
    def get_kv_params(
        cls, huggingface_config, pipeline_config, devices, kv_cache_config, cache_dtype
    ):
        return placeholder_kv_params(devices)

    def _prepare_initial_token_inputs(
        self, replica_batches, kv_cache_inputs=None, return_n_logits: int = 1
    ) -> BatchInputs:
        return BatchInputs([context for batch in replica_batches for context in batch])

    def execute(self, model_inputs: ModelInputs) -> ModelOutputs:
        assert isinstance(model_inputs, BatchInputs)
        rows = [self.next_logits(context) for context in model_inputs.contexts]
        logits = Buffer.from_numpy(np.stack(rows).astype(np.float32, copy=False))
        return ModelOutputs(logits=logits, next_token_logits=logits)

    # ANCHOR: next_logits
    def next_logits(self, context: TextContext) -> np.ndarray:
        """The logits after the request's tokens, fed from where its caches stop."""
        tokens = context.tokens
        stop = tokens.processed_length + tokens.active_length
        sequence = self.sequences.get(context.request_id)
        if sequence is None or sequence.held > stop:  # new, or restarted by MAX
            sequence = Sequence(self.new_caches(context.max_length))
            self.sequences[context.request_id] = sequence
        ids = [int(token) for token in tokens.all[sequence.held : stop]]
        if sequence.held == 0:
            logits = self.generator.prompt_logits(ids, caches=sequence.caches)
        else:
            for position, token in enumerate(ids, start=sequence.held):
                logits = self.generator.decoded_logits(token, position, caches=sequence.caches)
        sequence.held = stop
        return logits

    # ANCHOR_END: next_logits

    def new_caches(self, positions: int) -> tuple[Buffer, Buffer]:
        config = self.generator.config
        shape = [config.num_hidden_layers, config.num_key_value_heads, positions, config.head_dim]
        return tuple(Buffer.zeros(shape, self.generator.cache_dtype, CPU()) for _ in range(2))

    def release(self, request_id) -> None:
        """A request ended (or MAX set it back to be run again): its caches go."""
        self.sequences.pop(request_id, None)
