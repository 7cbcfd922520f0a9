"""Step 23's compiled Llama-style model against transformers' LlamaForCausalLM,
decoding the same weights on this CPU.

    python -m devtools.bench.llama [--tokens 64] [--rounds 3] [--out docs/src/bench/llama_decode.md]

Both run a SmolLM2-135M-shaped checkpoint of random weights written here
(30 layers, 9 query heads sharing 3 key/value heads, hidden 576, vocabulary
49152, tied head; float32): the same safetensors file loads into both. Each
round runs each model once, in an order that rotates from round to round,
greedily from the same 16-token prompt; a run is timed from its first token
to its last, so decode speed excludes the prompt (reported apart as the
first token's latency). The table gives medians and min-max over the
rounds, and the ratio of the two paired round by round. Both run in this
process, so each timed run waits until the process is idle (the last run's
thread pool has stopped spinning). Random weights make no text; the work per
token is the real model's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from common.random_checkpoint import SMOLLM2_135M, write_random_llama
from devtools.bench import command, machine, reporting, stats

PROMPT_LENGTH = 16
CONTENDERS = {
    "ours": "ours, step 23 (compiled, KV cache, float32)",
    "transformers": "transformers LlamaForCausalLM (PyTorch, float32)",
}


# A contender: arrivals(prompt_ids, count) decodes `count` tokens greedily and
# returns the time (perf_counter) at which each one arrived.
Contender = Callable[[list[int], int], list[float]]


def ours(directory: Path) -> tuple[Contender, float]:
    """Step 23's model, loaded and compiled; the compile's seconds."""
    from solutions.solution_23 import compile_llama, generate_llama, load_llama

    model = load_llama(directory)
    started = time.perf_counter()
    forward = compile_llama(model)
    # The first run pays for loading the compiled graphs; run it before timing.
    list(generate_llama(forward, model.config, [1, 2, 3], 2))
    compile_seconds = time.perf_counter() - started

    def arrivals(prompt_ids: list[int], count: int) -> list[float]:
        return [
            time.perf_counter() for _ in generate_llama(forward, model.config, prompt_ids, count)
        ]

    return arrivals, compile_seconds


def transformers_llama(directory: Path) -> Contender:
    import torch
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()

    def arrivals(prompt_ids: list[int], count: int) -> list[float]:
        stream = TokenStream()
        with torch.no_grad():
            model.generate(
                torch.tensor([prompt_ids]),
                max_new_tokens=count,
                min_new_tokens=count,
                do_sample=False,
                streamer=stream,
            )
        return stream.times

    return arrivals


class TokenStream:
    """transformers' streamer protocol: put() gets the prompt, then each new
    token; the time each token arrives is kept."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.prompt_seen = False

    def put(self, value) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.times += [time.perf_counter()] * value.numel()

    def end(self) -> None:
        pass


def timed_run(name: str, arrivals: Contender, prompt: list[int], count: int) -> dict:
    """First-token latency and decode tokens/s of one greedy run."""
    started = time.perf_counter()
    times = arrivals(prompt, count)
    if len(times) != count:
        raise RuntimeError(f"{name} made {len(times)} tokens, not {count}")
    return dict(
        first_token_ms=1000 * (times[0] - started),
        decode_tok_s=(count - 1) / (times[-1] - times[0]),
    )


def measure(directory: Path, count: int, rounds: int) -> dict:
    contenders: dict[str, Contender] = {}
    contenders["ours"], compile_seconds = ours(directory)
    contenders["transformers"] = transformers_llama(directory)
    prompt = np.random.default_rng(1).integers(1, SMOLLM2_135M["vocab_size"], PROMPT_LENGTH)
    prompt = [int(t) for t in prompt]
    for key, arrivals in contenders.items():  # warm-up: the first call of each pays extra
        timed_run(key, arrivals, prompt, 4)
    samples: dict[str, list[dict]] = {key: [] for key in contenders}
    monitor = machine.LoadMonitor()
    for order in stats.round_orders(list(contenders), rounds):
        for key in order:
            # Both run in this process: let the last one's thread pool stop
            # spinning first, or the next would share the cores with it.
            machine.wait_until_idle([os.getpid()])
            samples[key].append(timed_run(key, contenders[key], prompt, count))
    load = monitor.finish()
    summaries = {
        key: {
            metric: stats.summary([run[metric] for run in runs])
            for metric in ("decode_tok_s", "first_token_ms")
        }
        for key, runs in samples.items()
    }
    ratio = stats.summary(
        stats.paired_ratios(
            [run["decode_tok_s"] for run in samples["ours"]],
            [run["decode_tok_s"] for run in samples["transformers"]],
        )
    )
    return dict(
        machine=machine.machine_line(),
        load=load,
        tokens=count,
        rounds=rounds,
        compile_seconds=compile_seconds,
        summaries=summaries,
        ratio=ratio,
    )


def format_report(data: dict) -> str:
    lines = [
        f"Machine: {data['machine']}. A SmolLM2-135M-shaped checkpoint of random weights, "
        f"float32, batch 1, {PROMPT_LENGTH}-token prompt, {data['tokens']} tokens greedy; "
        f"{data['rounds']} interleaved rounds after a warm-up.",
        "",
        reporting.load_line(data["load"]),
        "",
        "| model | decode | first token | compile |",
        "|---|---|---|---|",
    ]
    for key, label in CONTENDERS.items():
        summary = data["summaries"][key]
        compile_cell = f"{data['compile_seconds']:.1f} s" if key == "ours" else "-"
        lines.append(
            f"| {label} | {stats.format_spread(summary['decode_tok_s'], ' tok/s', 1)} "
            f"| {stats.format_spread(summary['first_token_ms'], ' ms', 0)} | {compile_cell} |"
        )
    lines += [
        "",
        f"Decode tokens/s, ours / transformers, paired round by round: "
        f"**{stats.format_spread(data['ratio'], 'x')}**.",
    ]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = command.parser("devtools.bench.llama", __doc__, rounds=3)
    parser.add_argument("--tokens", type=int, default=64, help="tokens per run (default 64)")
    parser.add_argument(
        "--layers",
        type=int,
        default=SMOLLM2_135M["num_hidden_layers"],
        help="fewer layers for a quick try (default: SmolLM2-135M's 30)",
    )
    args = parser.parse_args(argv)
    if args.tokens < 2 or args.rounds < 1 or args.layers < 1:
        parser.error("--tokens must be at least 2, --rounds and --layers at least 1")
    return args


def measure_args(args: argparse.Namespace) -> dict:
    """`measure` on a random checkpoint of SmolLM2-135M's shapes, written for the run."""
    config = dict(SMOLLM2_135M, num_hidden_layers=args.layers)
    with tempfile.TemporaryDirectory() as scratch:
        directory = write_random_llama(Path(scratch) / "smollm2-135m-random", config)
        return measure(directory, args.tokens, args.rounds)


def main(argv: Sequence[str] | None = None) -> int:
    return command.main(parse_args, measure_args, format_report, argv)


if __name__ == "__main__":
    sys.exit(main())
