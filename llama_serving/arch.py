"""The registration MAX reads: which classes build, batch and serve the file."""

from max.graph.weights import WeightsFormat
from max.pipelines.context import TextContext
from max.pipelines.kv_cache.memory_planner import PagedMemoryPlanner
from max.pipelines.lib import SupportedArchitecture
from max.pipelines.modeling.types import PipelineTask

from gpt2_serving.tokenizer import GPT2Tokenizer

from .model import ARCHITECTURE, FastLlamaPipelineModel, GGUFServingConfig

llama_gguf_arch = SupportedArchitecture(
    # config.json's "architectures"[0] in the folder folder.py writes: a name of
    # our own, so that MAX's own Llama never takes the file.
    name=ARCHITECTURE,
    example_repo_ids=[],
    default_encoding=GGUFServingConfig.DEFAULT_ENCODING,
    supported_encodings=GGUFServingConfig.SUPPORTED_ENCODINGS,
    pipeline_model=FastLlamaPipelineModel,
    tokenizer=GPT2Tokenizer,  # MAX's text tokenizer with OpenAI's max_tokens checks
    context_type=TextContext,
    default_weights_format=WeightsFormat.gguf,
    multi_gpu_supported=False,
    weight_adapters={},  # the model reads the file itself
    task=PipelineTask.TEXT_GENERATION,
    config=GGUFServingConfig,
    memory_planner=PagedMemoryPlanner,  # asked for by MAX; our caches are the model's
    # Each request's prompt reaches the model whole, from its first token.
    required_arguments={"enable_prefix_caching": False, "enable_chunked_prefill": False},
    supports_overlap_scheduler=False,
    supports_device_graph_capture=False,
)
