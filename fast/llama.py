"""The Llama family run fast, from a GGUF file's blocks as stored: what
`generate --gguf` uses.

Not tutorial material: step 23's model (RMSNorm, rotary embeddings,
grouped-query attention with its cache, SwiGLU, a tied or untied head), run
the way fast/gpt2.py runs GPT-2, and built for the files people run:

- **The weights stay in their blocks**, Q8_0, Q4_0 or Q4_1 as bytes (a 4-bit
  matrix's regrouped, eight rows' blocks side by side), or float32 and bfloat16
  rows. Our kernels (fast/kernels/ggml_rows.mojo) multiply the blocks as they
  are; a token reads 4.5 to 8.5 bits a weight, where step 23's model widened
  every weight to 32.
- **The weights are the graph's by name, not its constants.** Two compiled
  graphs (a prompt, one token) serve every checkpoint of the same shapes and
  block types: MAX's cache holds them, so a second file, or the same file
  again, starts in seconds.
- **A KV cache allocated once, written in place**, as in fast/gpt2.py; its
  length is symbolic in the graphs, so one compiled pair serves any context.
  It holds float16 (llama.cpp's default: half the bytes a token's attention
  reads), or float32 for a file whose matrices are float32.
- **Fused projections.** q, k and v are one matrix of rows (k's and v's
  after q's), as are gate and up: one kernel call each instead of three and
  two, when their block types agree.
- **A decoded token's layers in one call** (fast/kernels/llama_decode.mojo)
  when every layer's matrices share one block type: as graph operations a
  layer is some thirty of MAX's calls, each handing the cores back to its
  executor. A prompt, and a model of mixed block types, run as MAX's
  operations around our projections and fast/gpt2.py's prompt attention.
  The one call adds Qwen2's q, k and v biases too, each core to the rows it
  made.

Loading (fast/llama_files.py) reads the file with step 29's reader; Llama 3's
scaled rotary frequencies and Qwen2's q/k/v biases load too.
fast/llama_generator.py runs the model: its compiled graphs, the caches, the
tokens chosen.

tests/test_fast_llama.py checks the logits against step 23's model,
tests/test_fast_families.py Qwen2 and Llama 3 files against transformers.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Module, ModuleList
from max.experimental.tensor import Tensor
from max.graph import TensorType

from common.ggml_blocks import BLOCK, BLOCK_FORMATS
from fast import kernel_ops
from fast.kernel_ops import FLOAT32, _kernel_library, bias_or_zeros, prompt_attention
from solutions.solution_21 import LlamaConfig

# Block types our kernels multiply as stored, and the dtypes of plain rows.
BLOCK_KINDS = ("Q8_0", "Q4_0", "Q4_1")
ROW_DTYPES = {"F32": DType.float32, "BF16": DType.bfloat16}
WIDENED = ("F16",)  # widened to float32 when loaded (norms and small tensors)
# Read as another block type our kernels multiply: llama.cpp's quantizer writes
# a Q4 model's head (or tied embedding) in Q6_K, which they do not read.
REBLOCKED = {"Q6_K": "Q8_0"}
ARCHITECTURES = ("llama", "qwen2")


@dataclass
class FastLlamaConfig(LlamaConfig):
    """Step 21's LlamaConfig, and what the file says beyond it: each
    projection's block type, q/k/v biases (Qwen2), and the rotary
    frequencies' divisors (Llama 3)."""

    kinds: dict[str, str] | None = None  # "blk.0.attn_q" -> "Q4_1", ..., "token_embd", "output"
    attention_bias: bool = False
    rope_factors: tuple[float, ...] | None = None


# The file's tensor names in a layer, by where they go (Fused's parts in order).
LAYER_TENSORS = {
    "qkv": ("attn_q", "attn_k", "attn_v"),
    "attn_output": ("attn_output",),
    "gate_up": ("ffn_gate", "ffn_up"),
    "ffn_down": ("ffn_down",),
}
LAYER_NAMES = [name for names in LAYER_TENSORS.values() for name in names]


# -- the layers -------------------------------------------------------------------


def stored_shape(kind: str, n_out: int, n_in: int) -> tuple[list[int], DType]:
    """How a [n_out, n_in] matrix of `kind` is held: blocks as bytes, or rows."""
    if kind in BLOCK_KINDS:
        return [n_out, n_in // BLOCK * BLOCK_FORMATS[kind].size], DType.uint8
    return [n_out, n_in], ROW_DTYPES.get(kind, DType.float32)


class BlockLinear(Module[[Tensor], Tensor]):
    """x [rows, in] float32 times a weight kept as the file stores it; float32 out: through
    ggml_rows.mojo (a prompt's rows in panels of widened weights), or fast/gpt2.py's kernel
    for bfloat16 rows on a CPU with bfloat16 dot products and rows not in 32s."""

    def __init__(self, kind: str, n_in: int, n_out: int, bias: bool = False) -> None:
        self.kind = kind if kind in BLOCK_KINDS or kind in ROW_DTYPES else "F32"
        shape, dtype = stored_shape(self.kind, n_out, n_in)
        self.weight = Tensor.zeros(shape, dtype=dtype)
        self.bias = Tensor.zeros([n_out], dtype=FLOAT32) if bias else None
        self.n_out = n_out
        bf16_dot = self.kind == "BF16" and kernel_ops.kernels_built_for()[0]
        plain = self.kind not in BLOCK_KINDS and (n_in % BLOCK != 0 or bf16_dot)
        self.op = "gpt2_linear_rows" if plain else f"ggml_rows_{self.kind.lower()}"

    def forward(self, x: Tensor) -> Tensor:
        out_type = TensorType(FLOAT32, [x.shape[0], self.n_out], device=x.device)
        values = [x, self.weight]
        if self.op == "gpt2_linear_rows":  # its bias in the kernel
            values.append(bias_or_zeros(self, x.device, FLOAT32))
        y = F.custom(self.op, x.device, values, [out_type], custom_extensions=_kernel_library())[0]
        return y + self.bias if self.bias is not None and self.op != "gpt2_linear_rows" else y


class Fused(Module[[Tensor], Tensor]):
    """Projections of one input side by side: one BlockLinear for their rows
    concatenated when their block types agree, else one each."""

    def __init__(self, kinds: Sequence[str], n_in: int, n_outs: Sequence[int], bias: bool) -> None:
        if len(set(kinds)) == 1:
            self.parts = ModuleList([BlockLinear(kinds[0], n_in, sum(n_outs), bias)])
        else:
            self.parts = ModuleList(
                [BlockLinear(k, n_in, n, bias) for k, n in zip(kinds, n_outs, strict=True)]
            )

    def forward(self, x: Tensor) -> Tensor:
        outputs = [part(x) for part in self.parts]
        return outputs[0] if len(outputs) == 1 else F.concat(outputs, axis=-1)


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Step 19's rotation of x [seq, heads, head_dim] by the half-split pairs."""
    half = x.shape[-1] // 2
    first, second = x[:, :, :half], x[:, :, half:]
    return F.concat([first * cos - second * sin, second * cos + first * sin], axis=-1)


class FastLlamaLayer(Module[..., Tensor]):
    def __init__(self, config: FastLlamaConfig, index: int) -> None:
        hidden = config.hidden_size
        kinds = {name: config.kinds[f"blk.{index}.{name}"] for name in LAYER_NAMES}
        heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
        head_dim = config.head_dim
        self.config = config
        self.attn_norm = Tensor.ones([hidden], dtype=FLOAT32)
        self.qkv = Fused(
            [kinds["attn_q"], kinds["attn_k"], kinds["attn_v"]],
            hidden,
            [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim],
            config.attention_bias,
        )
        self.attn_output = BlockLinear(kinds["attn_output"], heads * head_dim, hidden)
        self.ffn_norm = Tensor.ones([hidden], dtype=FLOAT32)
        inner = config.intermediate_size
        self.gate_up = Fused([kinds["ffn_gate"], kinds["ffn_up"]], hidden, [inner, inner], False)
        self.ffn_down = BlockLinear(kinds["ffn_down"], inner, hidden)

    def forward(self, hidden, caches, index: int, rope, bounds) -> Tensor:
        config = self.config
        heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
        head_dim = config.head_dim
        seq = hidden.shape[0]
        key_cache, value_cache = caches
        first, stop = bounds
        x = F.rms_norm(hidden, self.attn_norm, config.rms_norm_eps)
        query, key, value = F.split(
            self.qkv(x), [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], axis=-1
        )
        query = rotate(query.reshape([seq, heads, head_dim]), *rope)
        key = rotate(key.reshape([seq, kv_heads, head_dim]), *rope)
        value = value.reshape([seq, kv_heads, head_dim])
        # This step's keys and values into the caches [layers, kv_heads, context, head_dim].
        key_cache[index, :, (slice(first, stop), seq), :] = as_cached(key, key_cache)
        value_cache[index, :, (slice(first, stop), seq), :] = as_cached(value, value_cache)
        if seq == 1:
            attended = self._attend_cache(query, caches, index, stop)
        else:
            attended = self._attend_prompt(query, key, value)
        hidden = hidden + self.attn_output(attended)
        x = F.rms_norm(hidden, self.ffn_norm, config.rms_norm_eps)
        gate, up = F.split(self.gate_up(x), [config.intermediate_size] * 2, axis=-1)
        return hidden + self.ffn_down(F.silu(gate) * up)

    def _attend_cache(self, query: Tensor, caches, index: int, stop) -> Tensor:
        """One token's query [1, heads, head_dim] over the cached positions and
        its own: each key/value head serves a group of query heads, the group
        an axis of the queries rather than copies of the keys."""
        config = self.config
        kv_heads, head_dim = config.num_key_value_heads, config.head_dim
        group = config.num_attention_heads // kv_heads
        key_cache, value_cache = caches
        keys = key_cache[index, :, (slice(0, stop), "total"), :]  # [kv_heads, total, head_dim]
        values = value_cache[index, :, (slice(0, stop), "total"), :]
        if keys.dtype != FLOAT32:
            keys, values = keys.cast(FLOAT32), values.cast(FLOAT32)
        query = query.reshape([kv_heads, group, head_dim])
        scores = query @ keys.transpose(-1, -2) * (1.0 / math.sqrt(head_dim))
        attended = F.softmax(scores, axis=-1) @ values  # [kv_heads, group, head_dim]
        return attended.reshape([1, kv_heads * group * head_dim])

    def _attend_prompt(self, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        """A prompt's causal attention on an empty cache through fast/gpt2.py's
        kernel, which computes only the scores the mask keeps: the key/value
        heads repeated for their groups, queries, keys and values side by side."""
        config = self.config
        heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
        head_dim = config.head_dim
        seq, group = query.shape[0], heads // kv_heads

        def repeated(x: Tensor) -> Tensor:  # [seq, kv_heads, head_dim] -> [seq, heads * head_dim]
            x = x.reshape([seq, kv_heads, 1, head_dim])
            return F.broadcast_to(x, [seq, kv_heads, group, head_dim]).reshape([seq, -1])

        qkv = F.concat([query.reshape([seq, -1]), repeated(key), repeated(value)], axis=-1)
        return prompt_attention(qkv.reshape([1, seq, -1]), heads).reshape([seq, -1])


def as_cached(rows: Tensor, cache: Tensor) -> Tensor:
    """A step's keys or values [seq, kv_heads, head_dim] as the cache holds
    them: [kv_heads, seq, head_dim], in its dtype."""
    rows = rows.permute([1, 0, 2])
    return rows if rows.dtype == cache.dtype else rows.cast(cache.dtype)


class TokenEmbedding(Module[[Tensor], Tensor]):
    """Rows of the token table, widened to float32: kept as stored."""

    def __init__(self, kind: str, vocab: int, hidden: int) -> None:
        self.kind = kind if kind in BLOCK_KINDS or kind in ROW_DTYPES else "F32"
        shape, dtype = stored_shape(self.kind, vocab, hidden)
        self.weight = Tensor.zeros(shape, dtype=dtype)
        self.hidden = hidden

    def forward(self, ids: Tensor) -> Tensor:
        if self.kind not in BLOCK_KINDS:
            rows = F.gather(self.weight, ids, axis=0)
            return rows if rows.dtype == FLOAT32 else rows.cast(FLOAT32)
        out_type = TensorType(FLOAT32, [ids.shape[0], self.hidden], device=ids.device)
        name = f"ggml_gather_{self.kind.lower()}"
        values = [ids, self.weight]
        return F.custom(name, ids.device, values, [out_type], custom_extensions=_kernel_library())[
            0
        ]


class FastLlama(Module[..., Tensor]):
    """forward(ids [seq], key_cache, value_cache, start [1]) -> logits [vocab]
    (float32) of the last position. The caches are [layers, kv_heads,
    context, head_dim] buffers (float32 or float16); `start` is how many
    positions they hold already."""

    def __init__(self, config: FastLlamaConfig) -> None:
        self.config = config
        kinds, hidden, vocab = config.kinds, config.hidden_size, config.vocab_size
        self.token_embd = TokenEmbedding(kinds["token_embd"], vocab, hidden)
        self.layers = ModuleList(
            [FastLlamaLayer(config, index) for index in range(config.num_hidden_layers)]
        )
        self.output_norm = Tensor.ones([hidden], dtype=FLOAT32)
        self.output = BlockLinear(kinds["output"], hidden, vocab)
        if config.tie_word_embeddings:
            self.output.weight = self.token_embd.weight
        # Step 19's frequencies (over Llama 3's divisors): a parameter, so
        # that theta is the checkpoint's, not the compiled graph's.
        self.inv_freq = Tensor.zeros([config.head_dim // 2], dtype=FLOAT32)

    def forward(self, ids: Tensor, key_cache: Tensor, value_cache: Tensor, start: Tensor) -> Tensor:
        seq = ids.shape[0]
        hidden = self.token_embd(ids)
        if seq == 1 and self.one_block_kind():
            hidden = self._decode_layers(hidden, key_cache, value_cache, start)
        else:
            hidden = self._layers(hidden, key_cache, value_cache, start)
        last = F.rms_norm(hidden[-1:], self.output_norm, self.config.rms_norm_eps)
        return self.output(last).reshape([self.config.vocab_size])

    def one_block_kind(self) -> str | None:
        """The block type (or float32 or bfloat16 rows) every layer's matrices
        share, if they do, with each layer's q/k/v and gate/up fused."""
        kinds = {
            part.kind
            for layer in self.layers
            for module in (layer.qkv, layer.attn_output, layer.gate_up, layer.ffn_down)
            for part in (module.parts if isinstance(module, Fused) else [module])
        }
        fused = all(len(layer.qkv.parts) == len(layer.gate_up.parts) == 1 for layer in self.layers)
        kind = next(iter(kinds)) if len(kinds) == 1 else None
        return kind if (kind in BLOCK_KINDS or kind in ROW_DTYPES) and fused else None

    def _decode_layers(self, hidden: Tensor, key_cache: Tensor, value_cache: Tensor, start):
        """One token through every layer in one call of our kernel
        (fast/kernels/llama_decode.mojo), its key and value written at `start`."""
        config = self.config
        matrices = []
        for layer in self.layers:
            for module in (layer.qkv.parts[0], layer.attn_output, layer.gate_up.parts[0]):
                matrices.append(module.weight)
            matrices.append(layer.ffn_down.weight)
        norms = F.stack(
            [F.stack([layer.attn_norm, layer.ffn_norm]) for layer in self.layers]
        )  # [layers, 2, hidden]
        biased = config.attention_bias
        settings = Tensor(
            [config.rms_norm_eps, config.num_attention_heads, float(biased)],
            dtype=FLOAT32,
            device=hidden.device,
        )
        # Qwen2's q, k and v biases [layers, qkv rows], added in the kernel;
        # a Llama's kernel reads none (settings' third number is 0).
        biases = (
            F.stack([layer.qkv.parts[0].bias for layer in self.layers])
            if biased
            else Tensor.zeros([1, 1], dtype=FLOAT32, device=hidden.device)
        )
        cache = [key_cache.__buffervalue__(), value_cache.__buffervalue__()]
        values = [*cache, hidden, norms, biases, self.inv_freq, settings, start, *matrices]
        out_type = TensorType(FLOAT32, hidden.shape, device=hidden.device)
        name = f"llama_decode_blocks_{self.one_block_kind().lower()}"
        device = cache[0].device.to_device()
        (output,) = F.inplace_custom(
            name, device, values, [out_type], custom_extensions=_kernel_library()
        )
        return output

    def _layers(self, hidden: Tensor, key_cache: Tensor, value_cache: Tensor, start) -> Tensor:
        """Every layer as MAX's operations around our projections: a prompt,
        and one token of a model whose matrices' block types differ."""
        seq = hidden.shape[0]
        first = start.__tensorvalue__().reshape([])  # a graph scalar: slice bounds
        stop = first + F.shape_to_tensor([seq]).__tensorvalue__().reshape([])
        positions = Tensor.arange(seq, dtype=DType.int64, device=hidden.device) + start
        angles = positions.cast(FLOAT32).reshape([seq, 1]) * self.inv_freq.reshape([1, -1])
        rope = (F.cos(angles).reshape([seq, 1, -1]), F.sin(angles).reshape([seq, 1, -1]))
        for index, layer in enumerate(self.layers):
            hidden = layer(hidden, (key_cache, value_cache), index, rope, (first, stop))
        return hidden


# Loading lives in fast/llama_files.py, which builds the classes above, and
# running in fast/llama_generator.py: found here when first asked for, so that
# any of the modules may be imported first.
_ELSEWHERE = dict.fromkeys(
    ("fast_config", "grouped_blocks", "load_checkpoint", "load_gguf"), "llama_files"
)
_ELSEWHERE["FastLlamaGenerator"] = "llama_generator"


def __getattr__(name: str):
    if name not in _ELSEWHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"fast.{_ELSEWHERE[name]}"), name)


__all__ = ["FastLlama", *_ELSEWHERE]
