"""Our Mojo kernels (the package fast/kernels/) as operations of a MAX graph.

Each function here adds one call of a kernel to the graph being built:
a few rows' products (`linear_rows`), a prompt's causal attention
(`prompt_attention`), a server batch's products whichever its size
(`linear_few_or_many`), and the kernels that write the caches in place
(`cache_kernel`). MAX builds the kernels from source on first use and
caches the build; `kernels_built_for` asks the build what it runs.

Activations go in and out as float32, whatever the weights' dtype.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from max.driver import CPU
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Linear
from max.experimental.tensor import Tensor
from max.graph import Graph, TensorType

from common import max_runtime

KERNELS = Path(__file__).with_name("kernels")  # a Mojo package, built on first use
FLOAT32 = DType.float32


def as_float32(tensor: Tensor) -> Tensor:
    """`tensor` in float32: itself if it is, else a cast (bfloat16 weights)."""
    return tensor if tensor.dtype == FLOAT32 else tensor.cast(FLOAT32)


@functools.cache
def kernels_built_for() -> tuple[bool, int, bool]:
    """(AVX512_BF16's dot products, float32 lanes a vector: 16 with AVX-512,
    8 with AVX2, a prompt's rows through AMX's tiles) of our kernels as MAX
    builds them and this CPU runs them. Asked of the kernels (a one-op graph,
    once per process): what the compiler enables can differ from the CPU."""
    from max.engine import InferenceSession
    from max.graph import DeviceRef, ops

    library = max_runtime.precompiled(KERNELS)
    with Graph("built_for", input_types=[], custom_extensions=[library]) as graph:
        facts_type = TensorType(DType.int32, [3], device=DeviceRef.CPU())
        graph.output(ops.custom("gpt2_built_for", DeviceRef.CPU(), [], [facts_type])[0])
    bf16_dot, width, amx = InferenceSession(devices=[CPU()]).load(graph).execute()[0].to_numpy()
    return bool(bf16_dot), int(width), bool(amx)


def bias_or_zeros(layer: Linear, device, dtype: DType | None = None) -> Tensor:
    """The layer's bias as stored, or zeros for Linear(bias=False) (which
    holds a 0), in `dtype` (by default its weight's)."""
    if isinstance(layer.bias, Tensor):
        return layer.bias
    zeros_dtype = layer.weight.dtype if dtype is None else dtype
    return Tensor.zeros([layer.weight.shape[0]], dtype=zeros_dtype, device=device)


def linear_rows(
    layer: Linear, rows: Tensor, bias: Tensor | None = None, *, widening: bool = False
) -> Tensor:
    """layer(rows) for float32 rows [m, in] through our kernel, which reads
    each weight row once for all m rows: the fastest way for a few rows,
    slower than MAX's matmul from a few dozen on (but with bfloat16 weights
    and the CPU's bfloat16 dot products). `widening`: bfloat16 weights
    widened to float32 even where the dot products are. Returns float32 [m, out]."""
    bias = as_float32(bias_or_zeros(layer, rows.device, FLOAT32)) if bias is None else bias
    name = "gpt2_linear_rows_widening" if widening else "gpt2_linear_rows"
    return _custom(name, [rows, layer.weight, bias], [rows.shape[0], layer.weight.shape[0]])


def prompt_attention(qkv: Tensor, heads: int, bf16: bool = False) -> Tensor:
    """Causal self-attention of a prompt on an empty cache through our kernel,
    which computes only the scores a query may see: qkv is c_attn's float32
    output [batch, seq, 3 * embed]; returns the heads merged, [batch, seq, embed].
    With `bf16` (a bfloat16 model), in bfloat16 through AMX's tiles where the CPU has them."""
    batch, seq_length, width = qkv.shape
    values = [qkv, Tensor([heads], dtype=DType.int64, device=qkv.device)]
    name = "gpt2_prompt_attention_bf16" if bf16 else "gpt2_prompt_attention"
    return _custom(name, values, [batch, seq_length, int(width) // 3])


def _custom(name: str, values: list, out_shape: list) -> Tensor:
    """Our kernel `name` on `values`, one float32 output of `out_shape`."""
    device = values[0].device
    out_type = TensorType(FLOAT32, out_shape, device=device)
    return F.custom(name, device, values, [out_type], custom_extensions=_kernel_library())[0]


def linear_few_or_many(layer: Linear, rows: Tensor, kernel_rows: int) -> Tensor:
    """layer(rows) for rows [m, in] whose count is known only when the graph
    runs (a server's batch): our kernel for at most `kernel_rows` rows (a
    batch of decoded tokens), MAX's matmul for more (a prompt). The graph
    holds both and picks one per call. Returns float32 [m, out]."""
    # The parameters enter the graph where first used: here, outside both
    # branches, so that each branch may read them.
    for parameter in (layer.weight, layer.bias):
        if isinstance(parameter, Tensor):
            parameter.__tensorvalue__()
    count = F.shape_to_tensor([rows.shape[0]]).reshape([])
    few = count <= kernel_rows
    out_type = TensorType(FLOAT32, [rows.shape[0], layer.weight.shape[0]], device=rows.device)
    (output,) = F.cond(
        few,
        [out_type],
        lambda: linear_rows(layer, as_float32(rows)),
        # Linear's own product, whatever forward a subclass of it has.
        lambda: as_float32(Linear.forward(layer, rows)),
    )
    return output


def _kernel_library() -> Path | None:
    """KERNELS, built, for the first of our ops in the graph being built, then
    None: a 12-layer graph calls our kernels 61 times."""
    return None if Graph.current.kernel_libraries_paths else max_runtime.precompiled(KERNELS)


def cache_kernel(
    name: str,
    values: list,
    layer: int,
    out_type: TensorType | None = None,
    parameters: Sequence[Tensor] = (),
):
    """One of our in-place cache kernels from transformer layer `layer` on:
    its `values`, the layer, then the blocks' `parameters`."""
    device = values[0].device
    # The layer is a run-time input, not a kernel parameter: one compiled
    # kernel serves all twelve layers.
    layer_index = Tensor([layer], dtype=DType.int64, device=device)
    outputs = F.inplace_custom(
        name,
        device.to_device(),
        [*values, layer_index, *parameters],
        [out_type] if out_type is not None else None,
        custom_extensions=_kernel_library(),
    )
    return outputs[0] if out_type is not None else None
