"""`python -m devtools.serve_bench --gguf FILE`: a Llama-family GGUF file
served on the CPU, one contender at a time:

1. `max serve` through fast/'s kernels (`python -m tools.serve --gguf`'s
   command; 127.0.0.1, a free port), streamed greedy completions at each
   concurrency level;
2. llama.cpp's server (llama-cpp-python) on the same file and threads, at
   the same levels (llama_server.py says how it is measured);
3. fast/llama.py on one stream, without a server: what MAX's pipeline costs
   a lone request.

`report_table` writes what the book shows (serve_gguf.md beside
serve_gguf.json in --out).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common.cli import progress
from devtools.serve_bench import llama_server, report
from devtools.serve_bench.load import PROMPTS, completion_body, run_level, token_arrivals
from devtools.serve_bench.peers import one_stream
from tools.serve import (
    free_port,
    gguf_folder,
    max_serve_command,
    served_name,
    start,
    stop,
    wait_ready,
)

SERVER = "max serve (fast/ kernels, llama_serving)"
LLAMA = "llama.cpp's server (llama-cpp-python, the same file)"
FAST = "ours, fast/llama.py, one stream (no server)"


def measure_server(args: argparse.Namespace, serve_args: argparse.Namespace, scratch: Path):
    """`max serve --gguf` (tools.serve's `serve_args`) up, every level
    measured, the server stopped."""
    folder = scratch / "model"
    folder.mkdir()
    command = max_serve_command(serve_args, gguf_folder(serve_args.gguf, folder))
    base_url, name = f"http://127.0.0.1:{serve_args.port}", served_name(serve_args)
    with open(scratch / "max-serve.log", "w") as log:
        server = start(command, log)
        try:
            with progress("max serve --gguf: loading and compiling the model"):
                wait_ready(server, base_url, args.startup_timeout)
            token_arrivals(base_url, completion_body(name, PROMPTS[0], 4))  # warm-up
            levels = []
            for concurrency in args.concurrency:
                with progress(f"max serve --gguf: concurrency {concurrency}"):
                    requests = max(args.requests, 2 * concurrency)
                    levels.append(run_level(base_url, name, concurrency, requests, args.max_tokens))
        finally:
            stop(server)
    return levels


def fast_stream(gguf: Path, max_tokens: int, requests: int) -> dict:
    """fast/llama.py on the file, one request after another."""
    from common.gguf_tokenizer import GGUFTokenizer
    from fast import llama
    from solutions.solution_29 import read_gguf

    generator = llama.FastLlamaGenerator(llama.load_gguf(gguf), context=256)
    tokenizer = GGUFTokenizer(read_gguf(gguf).metadata, str(gguf))
    encoded = [tokenizer.encode(prompt) for prompt in PROMPTS]
    return one_stream(generator, encoded, max_tokens, requests)


def run(args: argparse.Namespace, gguf: Path, scratch: Path) -> dict:
    from devtools.bench.machine import machine_line

    serve_args = argparse.Namespace(
        host="127.0.0.1",
        port=free_port(),
        max_batch_size=max(args.concurrency),
        device=None,
        gguf=gguf,
    )
    served = measure_server(args, serve_args, scratch)
    llama = llama_server.measure_file(
        gguf, scratch, args.concurrency, args.requests, args.max_tokens, served_name(serve_args)
    )
    with progress("fast/llama.py, one stream"):
        fast = fast_stream(gguf, args.max_tokens, min(args.requests, 16))
    return {
        "machine": machine_line(),
        "file": gguf.name,
        "file_mb": round(gguf.stat().st_size / 1e6),
        "max_tokens": args.max_tokens,
        "server": served,
        "llama_server": llama,
        "fast": fast,
    }


def report_table(data: dict) -> str:
    lines = [
        f"Measured on {data['machine']}; `{data['file']}` ({data['file_mb']} MB), "
        f"{data['max_tokens']} greedy tokens per request, one contender at a time.",
        "",
        "| contender | concurrency | tokens/s | TTFT p50 / p99 | ITL p50 / p99 |",
        "|---|---|---|---|---|",
    ]
    lines += [report.row(SERVER, stats) for stats in data["server"]]
    llama = data["llama_server"]
    if "skipped" in llama:
        lines.append(f"| {LLAMA} | | {llama['skipped']} | | |")
    peer_levels = llama.get("levels", [])
    lines += [report.row(LLAMA, stats) for stats in peer_levels]
    lines.append(report.row(FAST, data["fast"]))
    lines.append("")
    for stats in data["server"]:
        concurrency = stats["concurrency"]
        lines += report.ratio(
            f"{concurrency} at once, max serve against llama.cpp's server",
            stats,
            report.level(peer_levels, concurrency),
        )
    lines += report.ratio(
        "One stream, max serve against fast/llama.py without a server",
        report.level(data["server"], 1),
        data["fast"],
    )
    return "\n".join(lines) + "\n"
