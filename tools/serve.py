"""Serve the GPT-2 you built with `max serve`: `pixi run serve`.

Starts MAX's OpenAI-compatible server with this repository's GPT-2
architecture (the gpt2_serving package: step 18's paged-cache model), waits
until it answers, prints how to query it, and stops it (and every process it
started) on Ctrl-C or SIGTERM. With `--gguf FILE` it serves a Llama-family
GGUF file through fast/'s kernels instead (the llama_serving package).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from common import checkpoint, max_runtime
from common.checkpoint import DEFAULT_MODEL
from common.cli import ArgumentParser, Failure, UsageError, exit_status, progress
from common.steps import REPO

SERVED_NAME = "gpt2"  # the `model` field clients send
STOP_SECONDS = 20  # a graceful stop gets this long before SIGKILL


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(prog="python -m tools.serve", description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=Path, help="a local checkpoint directory (fully offline)")
    parser.add_argument("--model", help=f"Hugging Face model id (default {DEFAULT_MODEL})")
    parser.add_argument(
        "--gguf",
        type=Path,
        help="a Llama-family GGUF file (float32/16, Q8_0, Q4_0, Q4_1, a Q6_K head; smollm2: "
        "SmolLM2-135M-Instruct's), served on the CPU through fast/'s kernels",
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    parser.add_argument(
        "--device",
        choices=["cpu", "gpu"],
        default=None,
        help="where the model runs (default: a GPU when there is one, else the CPU)",
    )
    parser.add_argument(
        "--max-batch-size",
        type=int,
        default=16,
        help="requests decoded together in one batch (default 16)",
    )
    parser.add_argument(
        "--startup-timeout",
        type=float,
        default=1200,
        help="seconds to wait for the server to load and compile (default 1200)",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="send MAX's own log to --log instead of the terminal"
    )
    parser.add_argument("--log", type=Path, help="write MAX's log to this file")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be between 1 and 65535, not {args.port}.")
    if args.max_batch_size < 1:
        raise UsageError(f"--max-batch-size must be at least 1, not {args.max_batch_size}.")
    if args.gguf:
        if args.weights or args.model:
            raise UsageError(
                "--gguf names the model to serve: give it without --weights or --model."
            )
        if args.device == "gpu":
            raise UsageError("--gguf runs fast/'s CPU kernels: drop --device gpu.")
    return args


def served_name(args: argparse.Namespace) -> str:
    """The `model` field clients send: "gpt2", or the GGUF file's name."""
    return args.gguf.stem if args.gguf else SERVED_NAME


def max_serve_command(args: argparse.Namespace, directory: Path) -> list[str]:
    architectures = "llama_serving" if args.gguf else "gpt2_serving"
    command = [
        sys.executable,
        "-m",
        "max._entrypoints.pipelines",
        "serve",
        "--custom-architectures",
        f"{REPO}:{architectures}",
        "--model",
        str(directory),
        "--served-model-name",
        served_name(args),
        "--host",
        args.host,
        "--port",
        str(args.port),
        "--max-batch-size",
        str(args.max_batch_size),
    ]
    if args.device:
        command += ["--devices", args.device]
    if args.gguf:  # the model reads the file itself; MAX only opens its header
        command += ["--weight-path", str(args.gguf.resolve())]
    return command


def server_env(**extra: str) -> dict[str, str]:
    # The model directory is local: MAX must not reach for the hub, nor send
    # telemetry, nor bind a second (metrics) port.
    return max_runtime.child_env(
        **extra,
        HF_HUB_OFFLINE="1",
        MAX_SERVE_DISABLE_TELEMETRY="1",
        MAX_SERVE_METRIC_RECORDING_METHOD="NOOP",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )


def start(command: list[str], log, **extra_env: str) -> subprocess.Popen:
    """`max serve` in a process group of its own, so stop() reaches every worker."""
    return subprocess.Popen(
        command,
        cwd=REPO,
        env=server_env(**extra_env),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(server: subprocess.Popen, seconds: float = STOP_SECONDS) -> None:
    """SIGTERM the server's process group, then SIGKILL whatever is left."""
    import psutil

    try:
        family = [psutil.Process(server.pid), *psutil.Process(server.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            pass
        for process in family:  # a worker that left the group
            try:
                process.send_signal(sig)
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(family, timeout=seconds)
        if not alive:
            break
    server.wait(timeout=seconds)


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (for tests and benchmarks)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(
    server: subprocess.Popen,
    base_url: str,
    timeout: float,
    *,
    path: str = "/health",
    name: str = "max serve",
) -> None:
    """Poll `base_url + path` until it answers 200 (bounded by `timeout`);
    Failure if the server exits first or never answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise Failure(f"{name} exited with status {server.returncode} before it was ready.")
        try:
            with urllib.request.urlopen(f"{base_url}{path}", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(1)
    raise Failure(f"{name} did not answer {base_url}{path} within {timeout:.0f} s.")


def usage(base_url: str, name: str = SERVED_NAME) -> str:
    body = json.dumps(
        {
            "model": name,
            "prompt": "The meaning of life is",
            "max_tokens": 20,
            "temperature": 0,
        }
    )
    return f"""
Ready: {"GPT-2" if name == SERVED_NAME else name} answers at {base_url}/v1 (OpenAI-compatible). Try:

  curl -s {base_url}/v1/completions -H 'Content-Type: application/json' \\
    -d '{body}'

  python -c "from openai import OpenAI; c = OpenAI(base_url='{base_url}/v1', api_key='none'); \\
print(c.completions.create(model='{name}', prompt='The meaning of life is', max_tokens=20, temperature=0).choices[0].text)"

Ctrl-C stops the server.
"""


def gguf_folder(gguf: Path, folder: Path) -> Path:
    """The folder of config and tokenizer files MAX reads for a GGUF file."""
    from llama_serving.folder import write_model_folder
    from solutions.solution_29 import GGUFError

    try:
        write_model_folder(gguf, folder)
    except GGUFError as error:
        raise Failure(str(error)) from None
    return folder


def run(args: argparse.Namespace) -> None:
    if not args.gguf:
        serve(args, checkpoint.resolve(args.weights, args.model or DEFAULT_MODEL))
        return
    from tools.generate_files import gguf_file

    args.gguf = gguf_file(args.gguf)
    with tempfile.TemporaryDirectory(prefix="serve-gguf-") as scratch:  # the server's lifetime
        serve(args, gguf_folder(args.gguf, Path(scratch)))


def serve(args: argparse.Namespace, directory: Path) -> None:
    base_url = f"http://{args.host}:{args.port}"
    log = open(args.log, "w") if args.log else (subprocess.DEVNULL if args.quiet else None)
    print(
        f"Starting max serve with {args.gguf or directory} "
        "(loading and compiling: minutes the first time)..."
    )
    server = start(max_serve_command(args, directory), log)

    def terminate(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    try:
        with progress(
            "max serve: loading and compiling the model",
            note="minutes on a machine's first start, about a minute from MAX's cache",
        ):
            wait_ready(server, base_url, args.startup_timeout)
        print(usage(base_url, served_name(args)), flush=True)
        server.wait()
        raise Failure(f"max serve exited with status {server.returncode}.")
    finally:
        stop(server)
        print("Server stopped.", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    max_runtime.prepare()
    # Ctrl-C is how a server is stopped: not an error.
    return exit_status(lambda: run(parse_args(argv)), on_interrupt=0)


if __name__ == "__main__":
    sys.exit(main())
