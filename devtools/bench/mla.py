"""One attention layer decoding one token after a long context, four ways:
step 24's multi-head latent attention (expand every cached latent, then
attend), step 25's absorbed decode, and step 21's grouped-query and
multi-head attention of the same width.

    python -m devtools.bench.mla [--lengths 256 1024 4096 16384] [--rounds 5] [--out docs/src/bench/mla_decode.md]

The sizes are DeepSeek-V2-Lite's attention with a compressed query: hidden
2048, 16 heads, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64,
v_head_dim 128, q_lora_rank 1536; GQA and MHA have 16 query heads of 128
features, with 4 and 16 key/value heads. Random weights, float32, batch 1.
Every contender is compiled once, for one new token after any number of
cached ones, and returns its output only (its grown cache stays inside the
graph). Each round times every contender once, in an order that rotates from
round to round; the table gives medians and min-max over the rounds and each
contender's cache bytes per token and layer.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

from devtools.bench import command, machine, reporting, stats

HIDDEN, HEADS, HEAD_DIM = 2048, 16, 128
MLA = dict(
    hidden_size=HIDDEN,
    num_attention_heads=HEADS,
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
)
GQA_KV_HEADS = 4
FLOAT32 = 4
# Each contender's two caches, one sequence: MLA's latent and rotary key
# [past, features]; GQA's and MHA's keys and values [kv_heads, past, head_dim].
LATENT_CACHES = (["past", MLA["kv_lora_rank"]], ["past", MLA["qk_rope_head_dim"]])
CACHE_SHAPES = {
    "expand": LATENT_CACHES,
    "absorbed": LATENT_CACHES,
    "gqa": ([GQA_KV_HEADS, "past", HEAD_DIM],) * 2,
    "mha": ([HEADS, "past", HEAD_DIM],) * 2,
}

CONTENDERS = {
    "expand": "MLA, expand then attend (step 24)",
    "absorbed": "MLA, absorbed (step 25)",
    "gqa": f"GQA, {GQA_KV_HEADS} key/value heads (step 21)",
    "mha": f"MHA, {HEADS} key/value heads (step 21)",
}

# A contender decodes one token after the cached ones: decode() runs it once
# and returns when its output is computed.
Decode = Callable[[], object]


def random_weights(module, rng: np.random.Generator) -> None:
    """N(0, 0.02) weights, norm scales of 1: the work per token is the real one's."""
    weights = {}
    for name, tensor in module.parameters:
        shape = tuple(int(d) for d in tensor.shape)
        if len(shape) == 1:
            weights[name] = np.ones(shape, dtype=np.float32)
        else:
            weights[name] = (rng.standard_normal(shape) * 0.02).astype(np.float32)
    module.load_state_dict(weights)


def cache_bytes_per_token() -> dict[str, int]:
    """Bytes one layer caches per token, float32."""
    return {
        key: sum(FLOAT32 * int(np.prod([d for d in shape if d != "past"])) for shape in shapes)
        for key, shapes in CACHE_SHAPES.items()
    }


def compiled_decoders(rng: np.random.Generator) -> dict:
    """Each contender compiled for one new token after any number of cached
    ones ("past" is symbolic): {key: graph}."""
    from max.dtype import DType
    from max.experimental.nn import Module
    from max.graph import TensorType

    from solutions.solution_21 import GroupedQueryAttention, LlamaConfig
    from solutions.solution_24 import MLAConfig, MultiHeadLatentAttention
    from solutions.solution_25 import absorbed_decode

    class OneToken(Module):
        """A contender's decode as one module MAX compiles; the output only."""

        def __init__(self, attention, absorbed: bool = False) -> None:
            self.attention = attention
            self.absorbed = absorbed

        def forward(self, x, past_a, past_b):
            if self.absorbed:
                return absorbed_decode(self.attention, x, past_a, past_b)[0]
            return self.attention(x, past_a, past_b)[0]

    mla = MultiHeadLatentAttention(MLAConfig(**MLA))
    random_weights(mla, rng)
    modules = {"expand": OneToken(mla), "absorbed": OneToken(mla, absorbed=True)}
    for key, kv_heads in (("gqa", GQA_KV_HEADS), ("mha", HEADS)):
        config = LlamaConfig(
            hidden_size=HIDDEN, num_attention_heads=HEADS, num_key_value_heads=kv_heads
        )
        attention = GroupedQueryAttention(config)
        random_weights(attention, rng)
        modules[key] = OneToken(attention)

    def input_type(shape: list) -> TensorType:  # a batch of one
        return TensorType(DType.float32, [1, *shape], device=mla.q_a_proj.weight.device)

    x_type = input_type([1, HIDDEN])
    return {
        key: module.compile(x_type, *(input_type(s) for s in CACHE_SHAPES[key]))
        for key, module in modules.items()
    }


def contenders(graphs: dict, length: int, rng) -> dict[str, Decode]:
    """Each compiled contender's one-token decode after `length` random cached tokens."""
    from max.experimental.tensor import Tensor

    def normal(shape: list) -> Tensor:  # a batch of one, "past" cached tokens
        dims = [1, *(length if d == "past" else d for d in shape)]
        return Tensor(rng.standard_normal(dims).astype(np.float32))

    x = normal([1, HIDDEN])
    decoders = {}
    for key, graph in graphs.items():
        caches = [normal(shape) for shape in CACHE_SHAPES[key]]
        decoders[key] = lambda graph=graph, caches=caches: graph(x, *caches).to_numpy()
    return decoders


def timed(decode: Decode, repeats: int) -> float:
    """Milliseconds per decoded token: the mean of `repeats` back-to-back runs."""
    started = time.perf_counter()
    for _ in range(repeats):
        decode()
    return 1000 * (time.perf_counter() - started) / repeats


def measure(lengths: Sequence[int], rounds: int, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    graphs = compiled_decoders(rng)
    compile_seconds = time.perf_counter() - started
    monitor = machine.LoadMonitor()
    results = {}
    for length in lengths:
        decoders = contenders(graphs, length, rng)
        for decode in decoders.values():  # warm-up: the first run of a length pays extra
            decode()
        samples: dict[str, list[float]] = {key: [] for key in decoders}
        for order in stats.round_orders(list(decoders), rounds):
            for key in order:
                machine.wait_until_idle([os.getpid()])
                samples[key].append(timed(decoders[key], repeats))
        results[str(length)] = {key: stats.summary(ms) for key, ms in samples.items()}
    return dict(
        machine=machine.machine_line(),
        load=monitor.finish(),
        rounds=rounds,
        repeats=repeats,
        lengths=list(lengths),
        compile_seconds=compile_seconds,
        cache_bytes=cache_bytes_per_token(),
        results=results,
    )


def format_report(data: dict) -> str:
    lengths = data["lengths"]
    header = " | ".join(f"{length} cached: ms per token" for length in lengths)
    lines = [
        f"Machine: {data['machine']}. One attention layer, batch 1, float32, each compiled "
        f"once for any cache length ({data['compile_seconds']:.0f} s for the four); "
        f"{data['rounds']} interleaved rounds of {data['repeats']} decodes each after a "
        "warm-up; median (min-max).",
        "",
        reporting.load_line(data["load"]),
        "",
        f"| attention | cache per token and layer | {header} |",
        "|---|---|" + "---|" * len(lengths),
    ]
    for key, label in CONTENDERS.items():
        cells = [
            stats.format_spread(data["results"][str(length)][key], "", 1) for length in lengths
        ]
        lines.append(f"| {label} | {data['cache_bytes'][key]:,} B | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = command.parser("devtools.bench.mla", __doc__, rounds=5)
    parser.add_argument(
        "--lengths",
        type=int,
        nargs="+",
        default=[256, 1024, 4096, 16384],
        help="cached tokens before the decoded one (default 256 1024 4096 16384)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="decodes timed together per sample (default 3)"
    )
    args = parser.parse_args(argv)
    if min(args.lengths) < 1 or args.rounds < 1 or args.repeats < 1:
        parser.error("--lengths, --rounds and --repeats must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return command.main(
        parse_args,
        lambda args: measure(args.lengths, args.rounds, args.repeats),
        format_report,
        argv,
    )


if __name__ == "__main__":
    sys.exit(main())
