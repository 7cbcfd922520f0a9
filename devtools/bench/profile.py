"""Where a decode step's time goes: the operations in the decode graphs of
step 17 and of the fast model, counted by kind, and the largest projection
(the head) timed alone three ways, and our kernel against MAX's matmul as
the rows of a batch grow (bench --profile)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from common import max_runtime
from devtools.bench.machine import seconds_for
from devtools.bench.stats import round_orders, summary


def decode_graph_ops(config: dict, use_kernels: bool = True) -> dict:
    """Operations in the one-token (decode) graph of step 17 and of the fast
    model, counted by kind in the traced MLIR (traced, not compiled: cheap).
    Constants, weight references and reshapes of them are not counted: they
    do no work once compiled (a reshape of a weight is a view; the fast
    model's decode graph with 384 more of them ran as fast). The
    fast model's graph is the one the benchmark times: with our kernels on a
    CPU, MAX's operations alone on a GPU (use_kernels=False)."""
    import re
    from collections import Counter

    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import default_device
    from max.graph import BufferType, TensorType

    from fast.gpt2 import FastGPT2
    from solutions.solution_01 import GPT2Config
    from solutions.solution_17 import CachedGPT2LMHeadModel

    gpt2 = GPT2Config(**config)
    head_dim = gpt2.n_embd // gpt2.n_head
    cache = [gpt2.n_layer, 1, gpt2.n_head, "past", head_dim]
    token = TensorType(DType.int64, [1, 1], device=CPU())
    # On the CPU, like the inputs, even where MAX would default to an accelerator.
    with F.lazy(), default_device(CPU()):
        step17, fast = CachedGPT2LMHeadModel(gpt2), FastGPT2(gpt2)
    fast.use_kernels = use_kernels
    tensor_cache = TensorType(DType.float32, cache, device=CPU())
    buffer = BufferType(DType.float32, [*cache[:3], gpt2.n_positions, head_dim], device=CPU())
    staged = {
        "step17": step17.trace(token, tensor_cache, tensor_cache),
        "fast": fast.trace(token, buffer, buffer, TensorType(DType.int64, [1], device=CPU())),
    }
    operation = re.compile(r"(%\w+)(?::\d+)? = \"?((?:rmo|mo)\.[a-z_.]+)\"?(?:\((%\w+))?")
    counts = {}
    for key, graph in staged.items():
        ops, views = Counter(), set()  # views: constants, and reshapes of one
        for result, op, operand in operation.findall(str(graph)):
            name = op.removeprefix("rmo.").removeprefix("mo.")
            if name in ("constant", "constant.external", "chain.create"):
                views.add(result)
            elif name == "reshape" and operand in views:
                views.add(result)
            else:
                ops[name] += 1
        counts[key] = dict(ops.most_common())
    return counts


def kernel_ops(dtype_name: str) -> dict[str, str]:
    """Our projection kernels worth timing for weights in `dtype_name`: the
    one the model calls and, for bfloat16 on a CPU with bfloat16 dot
    products (which the model's kernel uses), the widening path a CPU
    without them takes; on one with AMX too (which the model's kernel uses
    from AMX_FROM rows), the vector dot products alone."""
    from fast.kernel_ops import kernels_built_for

    ops = {"our_kernel": "gpt2_linear_rows"}
    bf16_dot, _width, amx = kernels_built_for()
    if dtype_name == "bfloat16" and amx:
        ops["our_kernel_dot"] = "gpt2_linear_rows_dot"
    if dtype_name == "bfloat16" and bf16_dot:
        ops["our_kernel_widening"] = "gpt2_linear_rows_widening"
    return ops


def one_op_graphs(
    n_out: int,
    n_in: int,
    dtype_name: str,
    rows,
    kernels: dict[str, str] | None = None,
    library: Path | None = None,
) -> dict:
    """Compiled one-op graphs computing x @ W.T + b for float32 x [rows,
    n_in] and W [n_out, n_in] in `dtype_name`: MAX's matmul and each of
    kernel_ops' kernels, or only `kernels` ({key: op name}) when given, from
    fast/kernels or the kernel library `library`. Each size is a number or a
    symbolic name."""
    from max.driver import CPU
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.graph import DeviceRef, Graph, TensorType, ops

    from fast.gpt2 import DTYPES
    from fast.kernel_ops import KERNELS

    cpu = DeviceRef.CPU()
    inputs = [
        TensorType(DType.float32, [rows, n_in], device=cpu),
        TensorType(DTYPES[dtype_name], [n_out, n_in], device=cpu),
        TensorType(DType.float32, [n_out], device=cpu),
    ]
    session = InferenceSession(devices=[CPU()])
    graphs = {}
    if kernels is None:
        with Graph("max_matmul", input_types=inputs) as graph:
            x, weight, bias = graph.inputs
            # MAX's matmul in the weights' dtype, as a model in that dtype runs it.
            product = ops.cast(x, weight.dtype) @ weight.T
            graph.output(ops.cast(product, DType.float32) + bias)
        graphs["max_matmul"] = session.load(graph)
    for key, op in (kernels or kernel_ops(dtype_name)).items():
        with Graph(
            key, input_types=inputs, custom_extensions=[max_runtime.precompiled(library or KERNELS)]
        ) as graph:
            x = graph.inputs[0]
            out_type = TensorType(DType.float32, [x.shape[0], n_out], device=cpu)
            graph.output(ops.custom(op, cpu, list(graph.inputs), [out_type])[0])
        graphs[key] = session.load(graph)
    return graphs


def random_operands(n_out: int, n_in: int, dtype_name: str, rows: int, seed: int = 0):
    """x, W (0.02 scale, in `dtype_name`) and a zero bias, as torch tensors."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    torch_dtype = torch.bfloat16 if dtype_name == "bfloat16" else torch.float32
    x = torch.randn(rows, n_in, generator=generator)
    weight = (torch.randn(n_out, n_in, generator=generator) * 0.02).to(torch_dtype)
    return x, weight, torch.zeros(n_out)


# Before each way's turn, the threads of the way before it go quiet: PyTorch's
# OpenMP workers spin for milliseconds after a call, and on a machine with few
# cores they take them from the next call. Then a few calls wake the way's own
# threads, and its round's figure is the median of a burst of calls.
PAUSE_S = 0.02
WARM_CALLS = 3
BURST = 10


def interleaved_milliseconds(ways: dict, repeats: int) -> dict:
    """Each call of `ways` timed in `repeats` rounds of rotating order, a
    round's figure the median of a burst of calls after a pause and a few
    untimed ones: {name: summary of milliseconds per call}."""
    samples = {key: [] for key in ways}
    for way in ways.values():  # a first execute starts MAX's polling logger
        way()
    max_runtime.demote_idle_pollers()  # as the fast model's generator does
    for order in round_orders(list(ways), repeats):
        for key in order:
            time.sleep(PAUSE_S)
            for _ in range(WARM_CALLS):
                ways[key]()
            burst = [seconds_for(ways[key]) * 1000 for _ in range(BURST)]
            samples[key].append(statistics.median(burst))
    return {key: summary(values) for key, values in samples.items()}


def projection_profile(config: dict, dtype_name: str, repeats: int = 30) -> dict:
    """Where a decode step's time goes: its largest projection, the head
    (one row x the vocab_size x n_embd embedding table), timed three ways in
    interleaved rounds: MAX's matmul in a one-op graph, our kernel
    (fast/kernels, gpt2_linear_rows) in a one-op graph, and PyTorch's linear.
    Milliseconds per call, and the bytes/s each reaches reading the table."""
    import torch
    from max.driver import Buffer

    n_in, n_out = config["n_embd"], config["vocab_size"]
    graphs = one_op_graphs(n_out, n_in, dtype_name, 1)
    x, weight, zero_bias = random_operands(n_out, n_in, dtype_name, 1)
    buffers = [Buffer.from_dlpack(t) for t in (x, weight, zero_bias)]
    x_torch = x.to(weight.dtype)
    ways = {key: (lambda g=g: g.execute(*buffers)) for key, g in graphs.items()}
    ways["torch_linear"] = lambda: torch.nn.functional.linear(x_torch, weight)
    milliseconds = interleaved_milliseconds(ways, repeats)
    table_bytes = weight.numel() * weight.element_size()
    return dict(
        shape=[n_out, n_in],
        dtype=dtype_name,
        table_bytes=table_bytes,
        milliseconds=milliseconds,
        gb_per_s={
            key: table_bytes / (stats["median"] / 1000) / 1e9 for key, stats in milliseconds.items()
        },
    )


ROW_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 512)


def rows_profile(
    config: dict, dtype_name: str, repeats: int = 15, second_projection: bool = False
) -> dict:
    """Our kernels against MAX's matmul and PyTorch's linear as the rows grow,
    from a server's batch of decoded tokens to a prompt, on the MLP's first
    projection (4 n_embd x n_embd), or with `second_projection` its second
    (n_embd x 4 n_embd: four times the inputs, where the bfloat16 tiles'
    slices of k matter most). The float32 kernel reads each weight row
    once for all rows, so it wins while the product is memory-bound and loses
    once it is compute-bound (where it stops winning is the served model's
    KERNEL_ROWS); the bfloat16 kernel's tiles are what a prompt runs on a CPU
    with bfloat16 dot products."""
    import torch
    from max.driver import Buffer

    n_in, n_out = config["n_embd"], 4 * config["n_embd"]
    if second_projection:
        n_in, n_out = n_out, n_in
    graphs = one_op_graphs(n_out, n_in, dtype_name, "rows")
    x, weight, zero_bias = random_operands(n_out, n_in, dtype_name, max(ROW_COUNTS))
    per_rows = {}
    for rows in ROW_COUNTS:
        x_rows = x[:rows].contiguous()
        buffers = [Buffer.from_dlpack(t) for t in (x_rows, weight, zero_bias)]
        ways = {key: (lambda g=g, b=buffers: g.execute(*b)) for key, g in graphs.items()}
        x_torch = x_rows.to(weight.dtype)
        ways["torch_linear"] = lambda x_torch=x_torch: torch.nn.functional.linear(x_torch, weight)
        per_rows[rows] = interleaved_milliseconds(ways, repeats)
    return dict(shape=[n_out, n_in], dtype=dtype_name, milliseconds=per_rows)


PROMPT_LENGTHS = (64, 512)


def attention_profile(config: dict, dtype_name: str, repeats: int = 15) -> dict:
    """A prompt's causal self-attention alone, from c_attn's output [1, seq,
    3 n_embd] to the heads' outputs merged [1, seq, n_embd], by prompt
    length, three ways in interleaved rounds: MAX's operations as the
    prompt's graph had them before our kernel (split into heads, every
    score, the causal mask, softmax, the values, merged), our kernel
    (gpt2_prompt_attention), and PyTorch's scaled_dot_product_attention in
    the weights' dtype (the transformers model's attention). With bfloat16
    weights "our kernel" is the one our bfloat16 model runs
    (gpt2_prompt_attention_bf16: AMX's tiles where the CPU has them), timed
    beside the float32 one."""
    import torch
    from max.driver import Buffer

    heads, embed = config["n_head"], config["n_embd"]
    torch_dtype = torch.bfloat16 if dtype_name == "bfloat16" else torch.float32
    generator = torch.Generator().manual_seed(0)
    kernels = {"our_kernel": prompt_attention_graph(embed)}  # one graph for every length
    if dtype_name == "bfloat16":
        kernels = {
            "our_kernel": prompt_attention_graph(embed, "gpt2_prompt_attention_bf16"),
            "our_kernel_float32": kernels["our_kernel"],
        }
    per_length = {}
    for seq in PROMPT_LENGTHS:
        max_ops = max_ops_attention_graph(seq, heads, embed)
        qkv = torch.randn(1, seq, 3 * embed, generator=generator)
        buffers = [Buffer.from_dlpack(qkv), Buffer.from_dlpack(torch.tensor([heads]))]
        ways = {"max_ops": lambda g=max_ops, b=buffers: g.execute(b[0])}
        for key, kernel in kernels.items():
            ways[key] = lambda g=kernel, b=buffers: g.execute(*b)
        parts = qkv.to(torch_dtype).view(1, seq, 3, heads, embed // heads).permute(2, 0, 3, 1, 4)

        def torch_attention(query=parts[0], key=parts[1], value=parts[2], seq=seq):
            out = torch.nn.functional.scaled_dot_product_attention(
                query, key, value, is_causal=True
            )
            return out.transpose(1, 2).reshape(1, seq, embed)

        ways["torch_sdpa"] = torch_attention
        per_length[seq] = interleaved_milliseconds(ways, repeats)
    return dict(heads=heads, head_dim=embed // heads, dtype=dtype_name, milliseconds=per_length)


def prompt_attention_graph(embed: int, name: str = "gpt2_prompt_attention"):
    """Our kernel `name` (gpt2_prompt_attention or _bf16) alone, compiled: qkv [batch, seq,
    3 * embed] and the number of heads in, [batch, seq, embed] out (batch
    and seq symbolic: one graph for every prompt)."""
    from max.driver import CPU
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.graph import DeviceRef, Graph, TensorType, ops

    from fast.kernel_ops import KERNELS

    cpu = DeviceRef.CPU()
    inputs = [
        TensorType(DType.float32, ["batch", "seq", 3 * embed], device=cpu),
        TensorType(DType.int64, [1], device=cpu),
    ]
    with Graph(
        "prompt_attention", input_types=inputs, custom_extensions=[max_runtime.precompiled(KERNELS)]
    ) as graph:
        qkv, heads = graph.inputs
        out_type = TensorType(DType.float32, [qkv.shape[0], qkv.shape[1], embed], device=cpu)
        graph.output(ops.custom(name, cpu, [qkv, heads], [out_type])[0])
    return InferenceSession(devices=[CPU()]).load(graph)


def max_ops_attention_graph(seq: int, heads: int, embed: int):
    """A prompt's attention of `seq` tokens as MAX's operations, compiled, as
    the prompt's graph had it before our kernel: qkv [1, seq, 3 * embed] in,
    [1, seq, embed] out."""
    import numpy as np
    from max.driver import CPU
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.graph import DeviceRef, Graph, TensorType, ops

    cpu = DeviceRef.CPU()
    head_dim = embed // heads
    qkv_type = TensorType(DType.float32, [1, seq, 3 * embed], device=cpu)
    with Graph("max_ops", input_types=[qkv_type]) as graph:
        qkv = graph.inputs[0].tensor
        query, key, value = (
            ops.transpose(ops.reshape(part, [1, seq, heads, head_dim]), 1, 2)
            for part in ops.split(qkv, [embed] * 3, axis=-1)
        )
        scores = query @ ops.transpose(key, -1, -2) * (1.0 / head_dim**0.5)
        mask = np.triu(np.full((seq, seq), -np.inf, dtype=np.float32), 1)
        weights = ops.softmax(scores + ops.constant(mask, DType.float32, device=cpu))
        graph.output(ops.reshape(ops.transpose(weights @ value, 1, 2), [1, seq, embed]))
    return InferenceSession(devices=[CPU()]).load(graph)
