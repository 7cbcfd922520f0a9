"""The registration MAX reads: which classes build, batch and serve GPT-2."""

from max.graph.weights import WeightsFormat
from max.pipelines.context import TextContext
from max.pipelines.kv_cache.memory_planner import PagedMemoryPlanner
from max.pipelines.lib import SupportedArchitecture
from max.pipelines.modeling.types import PipelineTask

from .model import GPT2BatchProcessor, GPT2PipelineModel, GPT2ServingConfig, convert_safetensors
from .tokenizer import GPT2Tokenizer

gpt2_arch = SupportedArchitecture(
    # Must equal config.json's "architectures"[0] for GPT-2 checkpoints.
    name="GPT2LMHeadModel",
    example_repo_ids=["openai-community/gpt2", "openai-community/gpt2-medium"],
    default_encoding=GPT2ServingConfig.DEFAULT_ENCODING,
    supported_encodings=GPT2ServingConfig.SUPPORTED_ENCODINGS,
    pipeline_model=GPT2PipelineModel,
    tokenizer=GPT2Tokenizer,  # MAX's, plus OpenAI's checks on max_tokens
    context_type=TextContext,
    default_weights_format=WeightsFormat.safetensors,
    multi_gpu_supported=False,
    weight_adapters={WeightsFormat.safetensors: convert_safetensors},
    task=PipelineTask.TEXT_GENERATION,
    config=GPT2ServingConfig,
    batching=GPT2BatchProcessor,
    memory_planner=PagedMemoryPlanner,  # the paged KV cache
    supports_overlap_scheduler=False,
    supports_device_graph_capture=False,
)
