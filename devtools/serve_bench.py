"""Measure `max serve` with our GPT-2, and record a session for the book.

    python -m devtools.serve_bench [--weights DIR] [--json]

Starts the server (tools.serve's start/stop, 127.0.0.1, a free port), then:

- records a real session: the server's own log lines, a curl call and its
  answer, into docs/src/outputs/serve-session.txt;
- streams bounded batches of greedy completions at concurrency 1, 4 and 16,
  timing each token as it arrives: throughput (generated tokens/s over the
  wall time), time to first token (TTFT) and inter-token latency (ITL);
- runs transformers' single-stream greedy `generate` on the same checkpoint
  in the same run, as the peer every number is compared with.

Without --weights it serves a small GPT-2 made locally (tests/fixtures.py:
nothing is downloaded), so the numbers measure the serving machinery more
than the model. Writes docs/src/bench/serve.json, serve.md and serve.png;
--json also prints the results as JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import shlex
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import max_runtime
from common.steps import REPO
from tools.serve import SERVED_NAME, max_serve_command, start, stop, wait_ready

OUT = REPO / "docs" / "src" / "bench"
SESSION = REPO / "docs" / "src" / "outputs" / "serve-session.txt"
CONCURRENCY = (1, 4, 16)
PROMPTS = [
    "The quick brown fox",
    "A language model predicts",
    "Attention lets every position",
    "MAX compiles the model",
]
SESSION_PROMPT = "The quick brown fox"
# Lines of MAX's log worth showing in the book (they carry no timings of ours).
LOG_MARKERS = (
    "architecture   :",
    "pipeline_model :",
    "devices               :",
    "cache_dtype",
    "page_size",
    "max_batch_size:",
    "Server ready",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def post_json(url: str, body: dict, timeout: float = 120) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def stream_times(base_url: str, prompt: str, max_tokens: int) -> list[float]:
    """Stream one greedy completion; the arrival time of every text chunk."""
    body = {
        "model": SERVED_NAME,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
    }
    request = urllib.request.Request(
        f"{base_url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    started = time.perf_counter()
    arrivals = []
    with urllib.request.urlopen(request, timeout=300) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line.removeprefix("data:"))
            if chunk.get("choices") and chunk["choices"][0].get("text"):
                arrivals.append(time.perf_counter() - started)
    return arrivals


def measure(base_url: str, concurrency: int, requests: int, max_tokens: int) -> dict:
    """`requests` streamed completions, `concurrency` at a time."""
    jobs = [PROMPTS[i % len(PROMPTS)] for i in range(requests)]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        runs = list(pool.map(lambda p: stream_times(base_url, p, max_tokens), jobs))
    seconds = time.perf_counter() - started
    # ignore_eos: every request generates exactly max_tokens tokens. Chunks
    # are not tokens (a chunk may carry several, or none while a character's
    # bytes are incomplete), so inter-token latency is each request's time
    # from its first to its last chunk over the tokens in between.
    tokens = requests * max_tokens
    gaps = [(r[-1] - r[0]) / (max_tokens - 1) for r in runs if len(r) > 1 and max_tokens > 1]
    return {
        "concurrency": concurrency,
        "requests": requests,
        "tokens": tokens,
        "seconds": round(seconds, 3),
        "tokens_per_second": round(tokens / seconds, 2),
        "ttft_ms_median": round(1000 * statistics.median(r[0] for r in runs if r), 2),
        "itl_ms_median": round(1000 * statistics.median(gaps), 2) if gaps else None,
    }


def transformers_peer(directory: Path, max_tokens: int, repeats: int) -> dict:
    """transformers' single-stream greedy generate, same checkpoint, same run."""
    import torch
    from transformers import GPT2LMHeadModel

    from tools.generate import Tokenizer

    model = GPT2LMHeadModel.from_pretrained(directory).eval()
    ids = torch.tensor([Tokenizer(directory).encode(PROMPTS[0])])
    with torch.no_grad():
        model.generate(ids, max_new_tokens=2, do_sample=False)  # warm-up
        started = time.perf_counter()
        for _ in range(repeats):
            model.generate(
                ids, max_new_tokens=max_tokens, min_new_tokens=max_tokens, do_sample=False
            )
        seconds = time.perf_counter() - started
    return {
        "tokens": repeats * max_tokens,
        "seconds": round(seconds, 3),
        "tokens_per_second": round(repeats * max_tokens / seconds, 2),
    }


def record_session(base_url: str, log_text: str) -> str:
    body = {"model": SERVED_NAME, "prompt": SESSION_PROMPT, "max_tokens": 8, "temperature": 0}
    answer = post_json(f"{base_url}/v1/completions", body)
    for volatile in ("id", "created"):
        answer[volatile] = "..."
    log_lines = [
        line.split(" ", 1)[-1]  # drop MAX's wall-clock timestamp
        for line in log_text.splitlines()
        if any(marker in line for marker in LOG_MARKERS)
    ]
    curl = (
        f"curl -s {base_url}/v1/completions -H 'Content-Type: application/json' \\\n"
        f"  -d {shlex.quote(json.dumps(body))}"
    )
    return (
        "$ python -m tools.serve --weights CHECKPOINT --port PORT\n"
        + "\n".join(log_lines)
        + f"\n\n$ {curl}\n"
        + json.dumps(
            {
                "choices": answer["choices"],
                "usage": {k: answer["usage"][k] for k in ("prompt_tokens", "completion_tokens")},
            },
            indent=2,
        )
        + "\n"
    ).replace(base_url, "http://127.0.0.1:PORT")


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    serving = results["serving"]
    labels = [f"max serve\nconcurrency {r['concurrency']}" for r in serving]
    values = [r["tokens_per_second"] for r in serving]
    labels.append("transformers\ngenerate, 1 stream")
    values.append(results["transformers"]["tokens_per_second"])
    figure, axis = plt.subplots(figsize=(7, 3.6))
    axis.bar(labels, values, color=["#4c72b0"] * len(serving) + ["#999999"])
    axis.set_ylabel("generated tokens / s")
    axis.set_title(f"Greedy completions, {results['max_tokens']} tokens each ({results['device']})")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def table(results: dict) -> str:
    peer = results["transformers"]["tokens_per_second"]
    rows = [
        "| | tokens/s | vs transformers | TTFT median | ITL median |",
        "|---|---|---|---|---|",
    ]
    for r in results["serving"]:
        rows.append(
            f"| max serve, concurrency {r['concurrency']} | {r['tokens_per_second']} | "
            f"{r['tokens_per_second'] / peer:.2f}x | {r['ttft_ms_median']} ms | {r['itl_ms_median']} ms |"
        )
    rows.append(f"| transformers `generate`, one stream | {peer} | 1.00x | | |")
    return "\n".join(rows) + "\n"


def run(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.weights
        if directory is None:
            from tests.fixtures import hf_model, write_checkpoint

            directory = write_checkpoint(Path(scratch) / "gpt2", hf_model(initializer_range=0.2))
        port = free_port()
        serve_args = argparse.Namespace(
            host="127.0.0.1", port=port, max_batch_size=16, device=args.device
        )
        log_path = Path(scratch) / "max-serve.log"
        base_url = f"http://127.0.0.1:{port}"
        with open(log_path, "w") as log:
            server = start(max_serve_command(serve_args, Path(directory)), log)
            try:
                wait_ready(server, base_url, args.startup_timeout)
                session = record_session(base_url, log_path.read_text())
                stream_times(base_url, PROMPTS[0], 4)  # warm-up
                serving = [
                    measure(base_url, c, max(args.requests, 4 * c), args.max_tokens)
                    for c in CONCURRENCY
                ]
            finally:
                stop(server)
        return {
            "device": args.device or "default device",
            "max_tokens": args.max_tokens,
            "serving": serving,
            "transformers": transformers_peer(Path(directory), args.max_tokens, args.peer_repeats),
            "session": session,
        }


def main(argv: list[str] | None = None) -> int:
    max_runtime.prepare()
    parser = argparse.ArgumentParser(
        prog="python -m devtools.serve_bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--weights", type=Path, help="a local checkpoint (default: a small local GPT-2)"
    )
    parser.add_argument("--device", choices=["cpu", "gpu"], default=None)
    parser.add_argument(
        "--requests", type=int, default=32, help="requests per level (at least 4 x concurrency)"
    )
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens per completion")
    parser.add_argument("--peer-repeats", type=int, default=4, help="transformers generate runs")
    parser.add_argument("--startup-timeout", type=float, default=1800)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--session", type=Path, default=SESSION)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    try:
        results = run(args)
    except KeyboardInterrupt:
        return 130
    args.out.mkdir(parents=True, exist_ok=True)
    args.session.write_text(results.pop("session"))
    (args.out / "serve.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "serve.md").write_text(table(results))
    plot(results, args.out / "serve.png")
    print(json.dumps(results, indent=2) if args.json else table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
