"""Benchmark: our GPT-2 against Hugging Face transformers, same weights, same
prompt, greedy decoding, one run on this machine.

    python -m tools.bench            (pixi run bench)

Prints tokens/s of transformers (PyTorch, its own KV cache) and of our model
eager without a cache, compiled without a cache, and compiled with a KV cache,
each with its ratio to transformers; time to first token and compile time
apart; the fraction of the memory-bandwidth roofline reached. Writes a plot
and a Markdown table into docs/src/bench/ for the book.

Weights are GPT-2 124M's shapes with random N(0, 0.02) values: the speed does
not depend on the values, and nothing has to be downloaded.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tools import max_runtime

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "src" / "bench"
LENGTHS = (32, 128, 512)
PROMPT_LENGTH = 16
GPT2_124M = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)


@dataclass
class Row:
    name: str
    tokens_per_s: dict[int, float] = field(default_factory=dict)
    first_token_s: float | None = None
    note: str = ""


def timed_tokens(tokens: Iterator[int], count: int) -> tuple[float, float]:
    """(tokens/s over `count` tokens, seconds to the first one)."""
    started = time.perf_counter()
    first = None
    for index, _ in enumerate(tokens):
        first = first or time.perf_counter() - started
        if index + 1 == count:
            break
    return count / (time.perf_counter() - started), first or 0.0


def read_bandwidth(megabytes: int = 1024, repeats: int = 5) -> float:
    """Bytes/s this machine reads from memory: a sum over a large array, on
    every core (torch's reduction is multithreaded; NumPy's is not)."""
    import torch

    data = torch.ones(megabytes * 2**20 // 4, dtype=torch.float32)
    data.sum()
    best = min(_time(lambda: data.sum()) for _ in range(repeats))
    return data.numel() * 4 / best


def _time(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def bench_transformers(hf_model, prompt: list[int], lengths) -> Row:
    import torch

    row = Row("transformers (PyTorch, KV cache)")
    ids = torch.tensor([prompt])
    with torch.no_grad():
        hf_model.generate(ids, max_new_tokens=4, do_sample=False)  # warm-up
        for length in lengths:
            started = time.perf_counter()
            hf_model.generate(ids, max_new_tokens=length, min_new_tokens=length, do_sample=False)
            row.tokens_per_s[length] = length / (time.perf_counter() - started)
        started = time.perf_counter()
        hf_model.generate(ids, max_new_tokens=1, do_sample=False)
        row.first_token_s = time.perf_counter() - started
    return row


def machine_line() -> str:
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}"
        for name in ("max", "torch", "transformers", "numpy")
    )
    return (
        f"{platform.machine()} {platform.processor() or platform.system()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, {versions}"
    )


def format_table(rows: list[Row], lengths, baseline: Row) -> str:
    header = "| model | " + " | ".join(f"{n} tokens" for n in lengths) + " | first token |"
    lines = [header, "|---" * (len(lengths) + 2) + "|"]
    for row in rows:
        cells = []
        for n in lengths:
            if n in row.tokens_per_s:
                ratio = row.tokens_per_s[n] / baseline.tokens_per_s[n]
                cells.append(f"{row.tokens_per_s[n]:.2f} tok/s ({ratio:.2f}x)")
            else:
                cells.append("not run")
        first = f"{row.first_token_s * 1000:.0f} ms" if row.first_token_s is not None else "-"
        name = row.name + (f" [{row.note}]" if row.note else "")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {first} |")
    return "\n".join(lines)


def plot(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for row in rows:
        lengths = sorted(row.tokens_per_s)
        if len(lengths) > 1:
            axes.plot(lengths, [row.tokens_per_s[n] for n in lengths], marker="o", label=row.name)
        elif lengths:
            axes.scatter(lengths, [row.tokens_per_s[lengths[0]]], label=row.name)
    axes.set_xscale("log", base=2)
    axes.set_xlabel("generated tokens")
    axes.set_ylabel("tokens / s")
    axes.set_title("GPT-2 124M shapes, float32, batch 1, greedy")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def run(lengths: tuple[int, ...], eager_tokens: int, no_cache_max: int, out: Path) -> str:
    import torch

    from solutions.solution_14 import generate_tokens
    from solutions.solution_15 import load_pretrained
    from solutions.solution_16 import compile_model
    from solutions.solution_17 import CachedGPT2LMHeadModel, compile_cached, generate_cached
    from tests.fixtures import hf_model

    torch.set_num_threads(os.cpu_count() or 1)
    print(f"Machine: {machine_line()}", flush=True)
    hf = hf_model(**GPT2_124M)
    prompt = np.random.default_rng(0).integers(0, GPT2_124M["vocab_size"], PROMPT_LENGTH).tolist()
    with tempfile.TemporaryDirectory() as directory:
        hf.save_pretrained(directory)
        plain = load_pretrained(Path(directory))
        cached = load_pretrained(Path(directory), CachedGPT2LMHeadModel)
    config = plain.config

    bandwidth = read_bandwidth()
    weight_bytes = sum(
        int(np.prod([int(d) for d in t.shape])) * 4
        for _, t in plain.parameters
        if _ != "lm_head.weight"
    )  # tied: the same bytes as wte
    roofline = bandwidth / weight_bytes
    print(
        f"Memory read bandwidth {bandwidth / 1e9:.1f} GB/s; weights {weight_bytes / 1e6:.0f} MB "
        f"-> roofline {roofline:.1f} tokens/s",
        flush=True,
    )

    baseline = bench_transformers(hf, prompt, lengths)
    print(
        f"transformers: { {n: round(v, 2) for n, v in baseline.tokens_per_s.items()} }", flush=True
    )

    started = time.perf_counter()
    compiled_plain = compile_model(plain)
    compile_plain_s = time.perf_counter() - started
    started = time.perf_counter()
    compiled_cached = compile_cached(cached)
    compile_cached_s = time.perf_counter() - started
    print(
        f"compile: {compile_plain_s:.1f} s (no cache), {compile_cached_s:.1f} s (cache, 2 graphs)",
        flush=True,
    )

    rows = [baseline]
    row = Row("ours, compiled, KV cache")
    list(generate_cached(compiled_cached, config, prompt, 2))  # warm-up
    for n in lengths:
        row.tokens_per_s[n], first = timed_tokens(
            generate_cached(compiled_cached, config, prompt, n), n
        )
        row.first_token_s = first
    rows.append(row)

    row = Row("ours, compiled, no cache")
    for n in (n for n in lengths if n <= no_cache_max):
        row.tokens_per_s[n], row.first_token_s = timed_tokens(
            generate_tokens(compiled_plain, prompt, n), n
        )
    rows.append(row)

    row = Row("ours, eager, no cache", note=f"measured over {eager_tokens} tokens")
    rate, row.first_token_s = timed_tokens(
        generate_tokens(plain, prompt, eager_tokens), eager_tokens
    )
    row.tokens_per_s[lengths[0]] = rate
    rows.append(row)

    table = format_table(rows, lengths, baseline)
    best = max(rows[1].tokens_per_s.values())
    summary = (
        f"Machine: {machine_line()}.\n\n{table}\n\n"
        f"Compile time: {compile_plain_s:.1f} s without cache, {compile_cached_s:.1f} s with cache "
        f"(two graphs; a machine's first compile takes minutes, later ones read MAX's cache).\n"
        f"Memory read bandwidth {bandwidth / 1e9:.1f} GB/s and {weight_bytes / 1e6:.0f} MB of float32 "
        f"weights per token give a roofline of {roofline:.1f} tokens/s; the cached compiled model "
        f"reaches {best:.1f} tokens/s, {best / roofline:.0%} of it.\n"
    )
    out.mkdir(parents=True, exist_ok=True)
    plot(rows, out / "tokens_per_second.png")
    (out / "results.md").write_text(summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--eager-tokens", type=int, default=4, help="eager is slow: time this many")
    parser.add_argument(
        "--no-cache-max",
        type=int,
        default=128,
        help="longest run for the no-cache compiled model (it is quadratic)",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    max_runtime.prepare()
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print(
            "error: the benchmark compares against transformers: install the test extras "
            '(pip install -e ".[test]", or use `pixi run bench`).',
            file=sys.stderr,
        )
        return 2
    try:
        print(run(tuple(args.lengths), args.eager_tokens, args.no_cache_max, args.out))
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
