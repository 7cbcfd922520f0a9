"""Where a decode step's time goes: the operations in the decode graphs of
step 17 and of the fast model, counted by kind, and the largest projection
(the head) timed alone three ways (bench --profile)."""

from __future__ import annotations

import statistics

from devtools.bench.machine import seconds_for
from devtools.bench.stats import round_orders, summary


def decode_graph_ops(config: dict) -> dict:
    """Operations in the one-token (decode) graph of step 17 and of the fast
    model, counted by kind in the traced MLIR (traced, not compiled: cheap).
    Constants and weight references are not counted: they do no work."""
    import re
    from collections import Counter

    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.graph import BufferType, TensorType

    from fast.gpt2 import FastGPT2
    from solutions.solution_01 import GPT2Config
    from solutions.solution_17 import CachedGPT2LMHeadModel

    gpt2 = GPT2Config(**config)
    head_dim = gpt2.n_embd // gpt2.n_head
    cache = [gpt2.n_layer, 1, gpt2.n_head, "past", head_dim]
    token = TensorType(DType.int64, [1, 1], device=CPU())
    with F.lazy():
        step17, fast = CachedGPT2LMHeadModel(gpt2), FastGPT2(gpt2)
    fast.use_kernels = True  # the CPU path the benchmark times
    tensor_cache = TensorType(DType.float32, cache, device=CPU())
    buffer = BufferType(DType.float32, [*cache[:3], gpt2.n_positions, head_dim], device=CPU())
    staged = {
        "step17": step17.trace(token, tensor_cache, tensor_cache),
        "fast": fast.trace(token, buffer, buffer, TensorType(DType.int64, [1], device=CPU())),
    }
    counts = {}
    for key, graph in staged.items():
        ops = Counter(
            op.removeprefix("rmo.").removeprefix("mo.")
            for op in re.findall(r"= \"?((?:rmo|mo)\.[a-z_.]+)", str(graph))
        )
        for free in ("constant", "constant.external", "chain.create"):
            ops.pop(free, None)
        counts[key] = dict(ops.most_common())
    return counts


def projection_profile(config: dict, dtype_name: str, repeats: int = 30) -> dict:
    """Where a decode step's time goes: its largest projection, the head
    (one row x the vocab_size x n_embd embedding table), timed three ways in
    interleaved rounds: MAX's matmul in a one-op graph, our kernel
    (fast/kernels, gpt2_linear_rows) in a one-op graph, and PyTorch's linear.
    Milliseconds per call, and the bytes/s each reaches reading the table."""
    import torch
    from max.driver import CPU, Buffer
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.graph import DeviceRef, Graph, TensorType, ops

    from fast.gpt2 import DTYPES, KERNELS

    n_in, n_out = config["n_embd"], config["vocab_size"]
    dtype = DTYPES[dtype_name]
    torch_dtype = torch.bfloat16 if dtype_name == "bfloat16" else torch.float32
    cpu = DeviceRef.CPU()
    row = TensorType(DType.float32, [1, n_in], device=cpu)
    table = TensorType(dtype, [n_out, n_in], device=cpu)
    bias = TensorType(DType.float32, [n_out], device=cpu)
    session = InferenceSession(devices=[CPU()])
    with Graph("max_matmul", input_types=[row, table]) as graph:
        x, weight = graph.inputs
        graph.output(
            x @ ops.cast(weight, DType.float32).T if dtype_name != "float32" else x @ weight.T
        )
    max_matmul = session.load(graph)
    with Graph("our_kernel", input_types=[row, table, bias], custom_extensions=[KERNELS]) as graph:
        out_type = TensorType(DType.float32, [1, n_out], device=cpu)
        graph.output(ops.custom("gpt2_linear_rows", cpu, list(graph.inputs), [out_type])[0])
    kernel = session.load(graph)
    x = torch.randn(1, n_in)
    weight = (torch.randn(n_out, n_in) * 0.02).to(torch_dtype)
    zero_bias = torch.zeros(n_out)
    buffers = [Buffer.from_dlpack(t) for t in (x, weight, zero_bias)]
    x_torch = x.to(torch_dtype)
    ways = {
        "max_matmul": lambda: max_matmul.execute(*buffers[:2]),
        "our_kernel": lambda: kernel.execute(*buffers),
        "torch_linear": lambda: torch.nn.functional.linear(x_torch, weight),
    }
    samples = {key: [] for key in ways}
    for call in ways.values():  # warm-up
        call()
    for order in round_orders(list(ways), repeats):
        for key in order:
            samples[key].append(seconds_for(ways[key]) * 1000)
    table_bytes = n_out * n_in * (2 if dtype_name == "bfloat16" else 4)
    return dict(
        shape=[n_out, n_in],
        dtype=dtype_name,
        table_bytes=table_bytes,
        milliseconds={key: summary(values) for key, values in samples.items()},
        gb_per_s={
            key: table_bytes / (statistics.median(values) / 1000) / 1e9
            for key, values in samples.items()
        },
    )
