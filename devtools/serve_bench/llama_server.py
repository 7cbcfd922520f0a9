"""llama.cpp's OpenAI-compatible server as a serving peer: the same weights,
written to an f32 GGUF file, served by llama-cpp-python's server with every
core, and measured with the same load generator at the same levels.

That server answers one request at a time (it holds a lock around its one
llama.cpp context), so at concurrency above 1 the other requests wait their
turn: its throughput stays at one stream's, and time to first token grows
with the queue. llama.cpp's own C++ `llama-server` decodes parallel slots in
one batch; the Python package does not build it.

Its stream is not one event per token (it holds back the bytes of characters
not yet complete and sends them in other events), so it is measured without
streaming: the tokens its answers count over the wall time, and no
latencies.
"""

from __future__ import annotations

import sys
from pathlib import Path

from common.cli import progress
from devtools import llama_peer
from devtools.bench.machine import usable_cpus
from devtools.serve_bench.load import PROMPTS, completion_body, run_level, token_arrivals
from tools.serve import SERVED_NAME, free_port, start, stop, wait_ready


def server_command(gguf: Path, port: int, threads: int, name: str = SERVED_NAME) -> list[str]:
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        "--n_ctx",
        "1024",
    ]


def measure(
    directory: Path, scratch: Path, levels: list[int], requests: int, max_tokens: int
) -> dict:
    """Every level against llama.cpp's server on the checkpoint's weights
    (written as an f32 GGUF file), or why it was skipped."""
    why = llama_peer.missing()
    if why:
        return {"skipped": why}
    gguf = llama_peer.write_gguf(directory, scratch / "gpt2-f32.gguf", "f32")
    return measure_file(gguf, scratch, levels, requests, max_tokens)


def measure_file(
    gguf: Path,
    scratch: Path,
    levels: list[int],
    requests: int,
    max_tokens: int,
    name: str = SERVED_NAME,
) -> dict:
    """Every level against llama.cpp's server on the GGUF file `gguf`, whose
    requests name the model `name`; or why it was skipped."""
    why = llama_peer.missing()
    if why:
        return {"skipped": why}
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    # An end-of-text may come early (random weights, or a trained model's
    # answer): min_tokens makes every request generate max_tokens, as
    # ignore_eos does for MAX.
    extra = {"min_tokens": max_tokens}
    with open(scratch / "llama-server.log", "w") as log:
        server = start(server_command(gguf, port, usable_cpus(), name), log)
        try:
            wait_ready(server, base_url, 300, path="/v1/models", name="llama.cpp's server")
            token_arrivals(base_url, completion_body(name, PROMPTS[0], 4))  # warm-up
            measured = []
            for concurrency in levels:
                with progress(f"llama.cpp's server: concurrency {concurrency}"):
                    count = max(requests, 2 * concurrency)
                    measured.append(
                        run_level(base_url, name, concurrency, count, max_tokens, extra, False)
                    )
        finally:
            stop(server)
    return {"levels": measured}
