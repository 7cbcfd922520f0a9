"""Step 23's compiled Llama-style model against transformers' LlamaForCausalLM,
decoding the same weights on this CPU.

    python -m devtools.bench.llama [--tokens 64] [--rounds 3] [--out docs/src/bench/llama_decode.md]
    python -m devtools.bench.llama --gguf [FILE] [--files q4_1,q8_0,q4_0,bf16,f32]
        [--tokens 32,128,512] [--contenders ours,llama.cpp] [--out docs/src/bench/llama_gguf_decode.md]

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

--gguf runs the real model instead: SmolLM2-135M-Instruct's GGUF file (or
FILE), against transformers and llama.cpp on the same file (llama_gguf.py);
--files adds llama.cpp's requantizations of it (gguf_files.py), each
measured in turn, and --tokens takes several lengths.
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

from common import smollm2
from common.random_checkpoint import SMOLLM2_135M, write_random_llama
from devtools.bench import command, machine, reporting, stats

PROMPT_LENGTH = 16
SMOLLM2_FILE = Path("SmolLM2-135M-Instruct's file")  # --gguf without a FILE
CONTENDERS = {
    "ours": "ours, step 23 (compiled, KV cache, float32)",
    "transformers": "transformers LlamaForCausalLM (PyTorch, float32)",
}


# A contender: run(prompt_ids, count) decodes `count` tokens greedily and
# returns each token with the time (perf_counter) at which it arrived.
Contender = Callable[[list[int], int], list[tuple[int, float]]]


def ours(model) -> tuple[Contender, float]:
    """Step 23's `model`, compiled; the compile's seconds."""
    from solutions.solution_23 import compile_llama, generate_llama

    started = time.perf_counter()
    forward = compile_llama(model)
    # The first run pays for loading the compiled graphs; run it before timing.
    list(generate_llama(forward, model.config, [1, 2, 3], 2))
    compile_seconds = time.perf_counter() - started

    def run(prompt_ids: list[int], count: int) -> list[tuple[int, float]]:
        tokens = generate_llama(forward, model.config, prompt_ids, count)
        return [(token, time.perf_counter()) for token in tokens]

    return run, compile_seconds


def transformers_contender(model) -> Contender:
    """transformers' greedy `generate` of `model`, its tokens timed as they come."""
    import torch

    def run(prompt_ids: list[int], count: int) -> list[tuple[int, float]]:
        stream = TokenStream()
        ids = torch.tensor([prompt_ids])
        with torch.no_grad():
            model.generate(
                ids,
                # Every position is the prompt's: without the mask transformers
                # guesses one, and hides each prompt token equal to its pad token.
                attention_mask=torch.ones_like(ids),
                max_new_tokens=count,
                min_new_tokens=count,
                do_sample=False,
                streamer=stream,
            )
        return stream.arrivals

    return run


def transformers_llama(directory: Path) -> Contender:
    import torch
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    return transformers_contender(model)


class TokenStream:
    """transformers' streamer protocol: put() gets the prompt, then each new
    token; each token is kept with the time it arrived."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[int, float]] = []
        self.prompt_seen = False

    def put(self, value) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        now = time.perf_counter()
        self.arrivals += [(int(token), now) for token in value.flatten().tolist()]

    def end(self) -> None:
        pass


def timed_run(name: str, run: Contender, prompt: list[int], count: int) -> dict:
    """First-token latency, decode tokens/s and the tokens of one greedy run."""
    started = time.perf_counter()
    arrivals = run(prompt, count)
    if len(arrivals) != count:
        raise RuntimeError(f"{name} made {len(arrivals)} tokens, not {count}")
    times = [at for _, at in arrivals]
    return dict(
        first_token_ms=1000 * (times[0] - started),
        decode_tok_s=(count - 1) / (times[-1] - times[0]),
        tokens=[token for token, _ in arrivals],
    )


def interleaved(
    contenders: dict[str, Contender], prompt: list[int], count: int, rounds: int
) -> tuple[dict[str, list[dict]], dict]:
    """Each contender's timed runs, `rounds` rounds in rotating order after a
    warm-up, and the machine's load meanwhile."""
    for key, run in contenders.items():  # warm-up: the first call of each pays extra
        timed_run(key, run, prompt, 4)
    samples: dict[str, list[dict]] = {key: [] for key in contenders}
    monitor = machine.LoadMonitor()
    for order in stats.round_orders(list(contenders), rounds):
        for key in order:
            # All run in this process: let the last one's thread pool stop
            # spinning first, or the next would share the cores with it.
            machine.wait_until_idle([os.getpid()])
            samples[key].append(timed_run(key, contenders[key], prompt, count))
    return samples, monitor.finish()


def summaries(samples: dict[str, list[dict]]) -> dict:
    """Median and spread of each contender's decode speed and first token."""
    return {
        key: {
            metric: stats.summary([run[metric] for run in runs])
            for metric in ("decode_tok_s", "first_token_ms")
        }
        for key, runs in samples.items()
    }


def paired_ratio(samples: dict[str, list[dict]], key: str, other: str) -> dict:
    """Decode tokens/s of `key` over `other`'s, paired round by round."""
    return stats.summary(
        stats.paired_ratios(
            [run["decode_tok_s"] for run in samples[key]],
            [run["decode_tok_s"] for run in samples[other]],
        )
    )


def measure(directory: Path, count: int, rounds: int) -> dict:
    from solutions.solution_23 import load_llama

    contenders: dict[str, Contender] = {}
    contenders["ours"], compile_seconds = ours(load_llama(directory))
    contenders["transformers"] = transformers_llama(directory)
    prompt = np.random.default_rng(1).integers(1, SMOLLM2_135M["vocab_size"], PROMPT_LENGTH)
    samples, load = interleaved(contenders, [int(t) for t in prompt], count, rounds)
    return dict(
        machine=machine.machine_line(),
        load=load,
        tokens=count,
        rounds=rounds,
        compile_seconds=compile_seconds,
        summaries=summaries(samples),
        ratio=paired_ratio(samples, "ours", "transformers"),
    )


def table_head(data: dict, what_ran: str, columns: list[str]) -> list[str]:
    """The lines above a table's rows: the machine and what ran on it, its
    load meanwhile, the columns (none where each table below has its own)."""
    lines = [f"Machine: {data['machine']}. {what_ran}", "", reporting.load_line(data["load"])]
    if columns:
        lines += ["", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return lines


def format_report(data: dict) -> str:
    lines = table_head(
        data,
        "A SmolLM2-135M-shaped checkpoint of random weights, "
        f"float32, batch 1, {PROMPT_LENGTH}-token prompt, {data['tokens']} tokens greedy; "
        f"{data['rounds']} interleaved rounds after a warm-up.",
        ["model", "decode", "first token", "compile"],
    )
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


def comma_list(text: str) -> list[str]:
    """ "a,b, c" -> ["a", "b", "c"]."""
    return [item.strip() for item in text.split(",") if item.strip()]


def lengths(text: str) -> list[int]:
    """--tokens: one length or several, "32,128,512"."""
    try:
        return [int(item) for item in comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a length or lengths like 32,128,512"
        ) from None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    from devtools.bench import gguf_files, llama_gguf

    parser = command.parser("devtools.bench.llama", __doc__, rounds=3)
    parser.add_argument(
        "--tokens",
        type=lengths,
        help="tokens per run (default 64); with --gguf one length or several, "
        f"comma-separated (default {','.join(map(str, llama_gguf.LENGTHS))})",
    )
    parser.add_argument(
        "--layers",
        type=int,
        help="fewer layers for a quick try (default: SmolLM2-135M's 30; not with --gguf)",
    )
    parser.add_argument(
        "--gguf",
        nargs="?",
        const=SMOLLM2_FILE,
        type=Path,
        metavar="FILE",
        help="run a real GGUF file (default: SmolLM2-135M-Instruct's) against transformers "
        "and llama.cpp on the same file",
    )
    parser.add_argument(
        "--files",
        type=comma_list,
        metavar="NAMES",
        help="with --gguf: the file as given (by its block type, e.g. q4_1) and llama.cpp's "
        f"variants of it, comma-separated, from {','.join(gguf_files.VARIANTS)} "
        "(default: the file alone)",
    )
    parser.add_argument(
        "--contenders",
        type=comma_list,
        metavar="KEYS",
        help=f"with --gguf: which contenders run, comma-separated, from "
        f"{','.join(llama_gguf.CONTENDERS)} (default: all)",
    )
    args = parser.parse_args(argv)
    if args.gguf is None:
        for option in ("files", "contenders"):
            if getattr(args, option) is not None:
                parser.error(f"--{option} is for --gguf's files")
        if args.tokens is not None and len(args.tokens) > 1:
            parser.error("--tokens takes one length without --gguf")
    if args.gguf is not None and args.layers is not None:
        parser.error("--layers is for the random checkpoint; --gguf runs the file's layers")
    args.tokens = args.tokens or (list(llama_gguf.LENGTHS) if args.gguf is not None else [64])
    args.layers = args.layers or SMOLLM2_135M["num_hidden_layers"]
    if min(args.tokens) < 2 or args.rounds < 1 or args.layers < 1:
        parser.error("--tokens must be at least 2, --rounds and --layers at least 1")
    if args.gguf is SMOLLM2_FILE:
        args.gguf = smollm2.gguf_path()
        if args.gguf is None:
            parser.error(f"SmolLM2-135M-Instruct's GGUF file is not installed: `{smollm2.INSTALL}`")
    elif args.gguf is not None and not args.gguf.is_file():
        parser.error(f"{args.gguf} is not a file")
    if args.gguf is not None:
        check_names(parser, "--files", args.files, gguf_files.known_names(args.gguf))
        check_names(parser, "--contenders", args.contenders, list(llama_gguf.CONTENDERS))
        args.contenders = args.contenders or list(llama_gguf.CONTENDERS)
        args.files = args.files or [gguf_files.source_name(args.gguf)]
    return args


def check_names(parser, option: str, given: list[str] | None, known: list[str]) -> None:
    """A usage error naming what `option` takes when it names anything else."""
    unknown = [name for name in given or [] if name not in known]
    if unknown:
        parser.error(f"{option} takes {', '.join(known)}, not {', '.join(unknown)}")


def measure_args(args: argparse.Namespace) -> dict:
    """`measure` on the GGUF file with --gguf, else on a random checkpoint of
    SmolLM2-135M's shapes, written for the run."""
    if args.gguf is not None:
        from devtools.bench import llama_gguf

        return llama_gguf.measure(args.gguf, args.tokens, args.rounds, args.files, args.contenders)
    config = dict(SMOLLM2_135M, num_hidden_layers=args.layers)
    with tempfile.TemporaryDirectory() as scratch:
        directory = write_random_llama(Path(scratch) / "smollm2-135m-random", config)
        return measure(directory, args.tokens[0], args.rounds)


def report(data: dict) -> str:
    """The table of either mode, from its data."""
    if "file" in data or "files" in data:
        from devtools.bench import llama_gguf_table

        return llama_gguf_table.format_report(data)
    return format_report(data)


def main(argv: Sequence[str] | None = None) -> int:
    return command.main(parse_args, measure_args, report, argv)


if __name__ == "__main__":
    sys.exit(main())
