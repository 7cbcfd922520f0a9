"""The pieces MAX's pipeline asks of an architecture, for our GPT-2.

- GPT2ServingConfig: reads config.json through MAX's pipeline config and
  sizes the paged KV cache (step 18's cache_shape).
- convert_safetensors: the weight adapter, Hugging Face names and layout to
  ours (step 15's to_max_layout, the same code `tools.generate` loads with).
- GPT2PipelineModel: builds step 18's PagedGPT2LMHeadModel on MAX's device
  and compiles it for MAX's ragged batch inputs. On the CPU the model is
  built with KernelLinear projections, which run through fast/kernels while
  a batch has few tokens.
- GPT2BatchProcessor: MAX's stock ragged batching (the flat token vector,
  the row offsets and the cache inputs), the same its Llama uses.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
from max import tree
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor
from max.graph import DeviceRef
from max.graph.weights import WeightData, Weights
from max.nn.kv_cache import KVCacheInputsPerDevice, KVCacheParamInterface
from max.pipelines.architectures.llama3_modulev3.batch_processor import (
    Llama3ModuleV3BatchProcessor,
)
from max.pipelines.context import TextContext
from max.pipelines.kv_cache import cache_dtype_for_encoding
from max.pipelines.lib import ModuleV3Outputs, ModuleV3PipelineModelWithKVCache
from max.pipelines.lib.config.model_config import _select_quantization_encoding
from max.pipelines.lib.interfaces.arch_config import (
    ArchConfigWithKVCache,
    ArchConfigWithStoredKVParams,
)
from max.pipelines.modeling.config_enums import SupportedEncoding, supported_encoding_dtype

from common import max_runtime
from fast.kernel_ops import linear_few_or_many
from solutions.solution_01 import GPT2Config
from solutions.solution_15 import to_max_layout
from solutions.solution_18 import PagedGPT2LMHeadModel, cache_shape

GPT2BatchProcessor = Llama3ModuleV3BatchProcessor


def tutorial_config(huggingface_config: Any) -> GPT2Config:
    """Our GPT2Config from Hugging Face's (the same field names, step 01)."""
    known = GPT2Config.__dataclass_fields__
    return GPT2Config(**{k: v for k, v in huggingface_config.to_dict().items() if k in known})


@dataclass(kw_only=True)
class GPT2ServingConfig(ArchConfigWithStoredKVParams, ArchConfigWithKVCache):
    DEFAULT_ENCODING: ClassVar[SupportedEncoding] = "float32"
    SUPPORTED_ENCODINGS: ClassVar[set[SupportedEncoding]] = {"float32", "bfloat16"}

    gpt2: GPT2Config
    dtype: DType
    max_seq_len: int
    kv_params: Any
    devices: list[DeviceRef]

    @classmethod
    def construct_kv_params(
        cls,
        huggingface_config,
        pipeline_config,
        devices: list[DeviceRef],
        kv_cache_config,
        cache_dtype: DType,
        *,
        allow_kv_head_replication: bool = False,
    ) -> KVCacheParamInterface:
        shape = cache_shape(tutorial_config(huggingface_config))
        return kv_cache_config.to_params(
            dtype=cache_dtype,
            allow_kv_head_replication=allow_kv_head_replication,
            n_kv_heads=shape.n_kv_heads,
            head_dim=shape.head_dim,
            num_layers=shape.num_layers,
            devices=devices,
            data_parallel_degree=pipeline_config.model.data_parallel_degree,
        )

    @classmethod
    def initialize(cls, pipeline_config, model_config=None, *, max_seq_len: int) -> Self:
        model_config = model_config or pipeline_config.model
        huggingface_config = model_config.huggingface_config
        encoding = _select_quantization_encoding(model_config, cls.DEFAULT_ENCODING)
        devices = [DeviceRef(spec.device_type, spec.id) for spec in model_config.device_specs]
        cache_dtype = cache_dtype_for_encoding(encoding, model_config.kv_cache.kv_cache_format)
        return cls(
            gpt2=tutorial_config(huggingface_config),
            dtype=supported_encoding_dtype(encoding),
            max_seq_len=max_seq_len,
            kv_params=cls.construct_kv_params(
                huggingface_config,
                pipeline_config,
                devices,
                model_config.kv_cache,
                cache_dtype,
            ),
            devices=devices,
        )


def convert_safetensors(state_dict: dict[str, Weights], **unused: Any) -> dict[str, WeightData]:
    """MAX's weight-adapter hook: checkpoint tensors in, our parameters out."""
    arrays = {name: np.from_dlpack(weights.data()) for name, weights in state_dict.items()}
    return {
        # The checkpoint is memory-mapped read-only; MAX takes writable arrays.
        name: WeightData.from_numpy(np.require(array, requirements=["C", "W"]), name)
        for name, array in to_max_layout(arrays).items()
    }


# ANCHOR: kernel_linear
# Up to how many rows (tokens in a batch) our kernel runs; beyond, MAX's
# matmul (prompts). The kernel reads each weight row once for every row of
# the batch, so it wins while the product is memory-bound and loses once the
# arithmetic of many rows is the cost: `python -m devtools.bench --profile`
# times both for 1 to 64 rows (the last table of docs/src/bench/profile.md
# shows where they cross on the machine it was measured on). MAX serves
# bfloat16 on accelerators only, where the kernels do not run.
KERNEL_ROWS = 8


class KernelLinear(Linear):
    """A Linear whose product reads each weight row once for the whole batch
    when the batch is small (fast/kernel_ops.py's linear_rows): decoding is
    memory-bound, so reading the weights fast is what counts. Its output
    keeps the input's dtype."""

    @classmethod
    def sharing(cls, layer: Linear) -> KernelLinear:
        """A KernelLinear holding `layer`'s own parameter tensors, so that a
        tied pair (lm_head and wte) stays one tensor."""
        with F.lazy():  # the random initial values are dropped uncomputed
            kernel = cls(layer.in_dim, layer.out_dim, bias=isinstance(layer.bias, Tensor))
        kernel.weight, kernel.bias = layer.weight, layer.bias
        return kernel

    def forward(self, x: Tensor) -> Tensor:
        return linear_few_or_many(self, x, KERNEL_ROWS).cast(x.dtype)


def with_kernel_linears(module: Module) -> None:
    """Each Linear of `module` replaced by a KernelLinear with its parameters,
    the way step 18 replaces step 11's blocks with PagedBlocks."""
    kernels = {
        name: KernelLinear.sharing(child)
        for name, child in module.descendants
        if type(child) is Linear
    }
    tree.update(module, kernels, leaf=lambda node: isinstance(node, Linear))


# ANCHOR_END: kernel_linear


# ANCHOR: served
class ServedGPT2(PagedGPT2LMHeadModel):
    """The compiled entry point: MAX passes the KV cache as a flat list of
    buffers after the batch inputs; rebuild the cache object from them.
    With kernel_linears (on the CPU) its projections are KernelLinears."""

    def __init__(
        self, config: GPT2Config, kv_params: KVCacheParamInterface, *, kernel_linears: bool
    ) -> None:
        super().__init__(config)
        self.kv_params = kv_params
        if kernel_linears:
            with_kernel_linears(self)

    def forward(self, tokens, return_n_logits, input_row_offsets, *kv_inputs):
        del return_n_logits  # we return only each request's last-token logits
        cache = self.kv_params.unflatten_kv_inputs(iter(x._graph_value for x in kv_inputs))
        kv_collection = tree.leaves(cache, leaf=KVCacheInputsPerDevice)[0]
        cache_lengths = Tensor.from_graph_value(kv_collection.cache_lengths)
        logits = super().forward(
            tokens, input_row_offsets, cache_lengths, kv_collection, self.kv_params
        )
        return ModuleV3Outputs(next_token_logits=logits)


# ANCHOR_END: served


class GPT2PipelineModel(ModuleV3PipelineModelWithKVCache[TextContext]):
    model_config_cls: ClassVar[type[Any]] = GPT2ServingConfig
    batch_processor_cls: ClassVar[type[Any]] = GPT2BatchProcessor

    # The ids of MAX's polling threads set aside at the first execute; None before it.
    pollers_set_aside: list[int] | None = None

    def execute(self, model_inputs):
        if self.pollers_set_aside is not None or not self.devices[0].is_host:
            return super().execute(model_inputs)
        # MAX's logger starts at a process's first execute and polls; on a
        # small CPU it takes a core from our kernels (fast/gpt2.py does the same).
        first = functools.partial(super().execute, model_inputs)
        outputs, self.pollers_set_aside = max_runtime.set_aside_pollers_started_by(first)
        return outputs

    def _create_model_config(self, state_dict: dict[str, Any]) -> GPT2ServingConfig:
        return GPT2ServingConfig.initialize(self.pipeline_config, max_seq_len=self.max_seq_len)

    def _prepare_state_dict(self, state_dict, model_config: GPT2ServingConfig):
        if model_config.dtype == DType.float32:
            return state_dict
        return {name: w.astype(model_config.dtype) for name, w in state_dict.items()}

    def _instantiate_module(self, model_config: GPT2ServingConfig) -> ServedGPT2:
        # fast/kernels are CPU code: on an accelerator MAX's matmul does every product.
        on_host = self.devices[0].is_host
        module = ServedGPT2(model_config.gpt2, self.kv_params, kernel_linears=on_host)
        module.to(self.devices[0])
        return module
