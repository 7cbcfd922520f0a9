"""The server's turn: `max serve` up, a session recorded, every load level
measured, then the server stopped before any peer runs."""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import time
from pathlib import Path

from common.cli import progress
from common.steps import REPO
from devtools.serve_bench import cross_check
from devtools.serve_bench.executions import EXECUTION_LOG, read_executions, split_execution_time
from devtools.serve_bench.load import (
    PROMPTS,
    completion_body,
    post_json,
    run_level,
    token_arrivals,
)
from tools.serve import SERVED_NAME, free_port, max_serve_command, start, stop, wait_ready

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


def record_session(base_url: str, log_text: str) -> str:
    """What a reader sees: the server's log lines, a curl call and its answer."""
    body = {"model": SERVED_NAME, "prompt": SESSION_PROMPT, "max_tokens": 8, "temperature": 0}
    answer = post_json(f"{base_url}/v1/completions", body)
    log_lines = [
        line.split(" ", 1)[-1]  # drop MAX's wall-clock timestamp
        for line in log_text.splitlines()
        if any(marker in line for marker in LOG_MARKERS)
    ]
    curl = (
        f"curl -s {base_url}/v1/completions -H 'Content-Type: application/json' \\\n"
        f"  -d {shlex.quote(json.dumps(body))}"
    )
    shown = {
        "choices": answer["choices"],
        "usage": {k: answer["usage"][k] for k in ("prompt_tokens", "completion_tokens")},
    }
    text = (
        "$ python -m tools.serve --weights CHECKPOINT --port PORT\n"
        + "\n".join(log_lines)
        + f"\n\n$ {curl}\n"
        + json.dumps(shown, indent=2)
        + "\n"
    )
    return text.replace(base_url, "http://127.0.0.1:PORT")


def start_timed(
    serve_args: argparse.Namespace, directory: Path, log, execution_log: Path
) -> subprocess.Popen:
    """tools.serve's `max serve` with timed_arch registered after gpt2_serving:
    the same model, each of its executions appended to `execution_log`."""
    command = max_serve_command(serve_args, directory) + [
        "--custom-architectures",
        f"{REPO}:devtools.serve_bench.timed_arch",
    ]
    return start(command, log, **{EXECUTION_LOG: str(execution_log)})


def measure_server(args: argparse.Namespace, directory: Path, scratch: Path) -> dict:
    """Start the server, measure every level (and the cross-check), stop it."""
    port = free_port()
    serve_args = argparse.Namespace(
        host="127.0.0.1",
        port=port,
        max_batch_size=max(args.concurrency),
        device=args.device,
        gguf=None,
    )
    base_url = f"http://127.0.0.1:{port}"
    log_path, execution_log = scratch / "max-serve.log", scratch / "executions.log"
    with open(log_path, "w") as log:
        server = start_timed(serve_args, directory, log, execution_log)
        try:
            with progress("max serve: loading and compiling the model"):
                wait_ready(server, base_url, args.startup_timeout)
            session = record_session(base_url, log_path.read_text())
            token_arrivals(base_url, completion_body(SERVED_NAME, PROMPTS[0], 4))  # warm-up
            levels, execution_time = [], None
            for concurrency in args.concurrency:
                with progress(f"max serve: concurrency {concurrency}"):
                    requests = max(args.requests, 2 * concurrency)
                    started = time.monotonic_ns()
                    levels.append(
                        run_level(base_url, SERVED_NAME, concurrency, requests, args.max_tokens)
                    )
                    if concurrency == 1:
                        window = (started, time.monotonic_ns())
                        executions = read_executions(execution_log)
                        execution_time = split_execution_time(executions, window)
            checked = cross_check.run(args, directory, port, scratch)
        finally:
            stop(server)
    return {
        "levels": levels,
        "cross_check": checked,
        "session": session,
        "executions": execution_time,
    }
