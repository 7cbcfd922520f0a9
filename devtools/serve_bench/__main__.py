"""`python -m devtools.serve_bench`: see the package's docstring."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from common import max_runtime
from common.cli import ArgumentParser, UsageError, exit_status, progress
from common.steps import REPO
from devtools.serve_bench import llama_server, report
from devtools.serve_bench.peers import fast_single_stream, transformers_levels
from devtools.serve_bench.server import measure_server

OUT = REPO / "docs" / "src" / "bench"
SESSION = REPO / "docs" / "src" / "outputs" / "serve-session.txt"
GPT2_124M = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(prog="python -m devtools.serve_bench", description=__doc__)
    parser.add_argument("--weights", type=Path, help="a checkpoint (default: 124M-shaped, local)")
    parser.add_argument(
        "--gguf",
        type=Path,
        help="a Llama-family GGUF file (or smollm2): max serve through fast/'s kernels "
        "against llama.cpp's server on it (gguf.py)",
    )
    parser.add_argument("--device", choices=["cpu", "gpu"], default=None)
    parser.add_argument(
        "--concurrency", type=int, nargs="+", default=[1, 4, 16, 64], help="levels to measure"
    )
    parser.add_argument("--requests", type=int, default=32, help="requests per level (at least)")
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens per request")
    parser.add_argument("--cross-check-concurrency", type=int, default=16)
    parser.add_argument("--startup-timeout", type=float, default=1800)
    parser.add_argument("--out", type=Path, default=OUT, help="where serve.md/.json/.png go")
    parser.add_argument("--session", type=Path, default=SESSION)
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args(argv)
    if min(args.concurrency) < 1 or args.requests < 1 or args.max_tokens < 2:
        raise UsageError("--concurrency and --requests take positive numbers, --max-tokens >= 2.")
    if args.gguf and (args.weights or args.device == "gpu"):
        raise UsageError("--gguf serves the file on the CPU: drop --weights and --device gpu.")
    return args


def checkpoint(args: argparse.Namespace, scratch: Path) -> Path:
    if args.weights:
        if not (args.weights / "config.json").is_file():
            raise UsageError(f"{args.weights} has no config.json: not a checkpoint.")
        return args.weights
    from tests.fixtures import hf_model, write_checkpoint

    with progress("making a GPT-2 124M-shaped checkpoint (random weights)"):
        return write_checkpoint(scratch / "gpt2-124m", hf_model(**GPT2_124M))


def run(args: argparse.Namespace) -> dict:
    from devtools.bench.machine import machine_line

    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        directory = checkpoint(args, scratch)
        served = measure_server(args, directory, scratch)
        with progress("transformers generate, batched"):
            batched = transformers_levels(
                directory, args.concurrency, args.requests, args.max_tokens
            )
        llama = llama_server.measure(
            directory, scratch, args.concurrency, args.requests, args.max_tokens
        )
        with progress("fast/gpt2.py, one stream"):
            fast = fast_single_stream(directory, args.max_tokens, min(args.requests, 16))
    return {
        "machine": machine_line(),
        "device": args.device or "default device",
        "max_tokens": args.max_tokens,
        "server": served["levels"],
        "server_executions": served["executions"],
        "cross_check": served["cross_check"],
        "transformers": batched,
        "llama_server": llama,
        "fast": fast,
        "session": served["session"],
    }


def write(data: dict, args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    args.session.write_text(data.pop("session"))
    text = json.dumps(data, indent=2) + "\n"
    (args.out / "serve.json").write_text(text)
    if args.json:
        args.json.write_text(text)
    (args.out / "serve.md").write_text(report.table(data))
    report.plot(data, args.out / "serve.png")
    print(report.table(data))


def run_gguf(args: argparse.Namespace) -> None:
    """--gguf: measure, then write serve_gguf.md and .json in --out."""
    from devtools.serve_bench import gguf
    from tools.generate_files import gguf_file

    with tempfile.TemporaryDirectory() as folder:
        data = gguf.run(args, gguf_file(args.gguf), Path(folder))
    args.out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2) + "\n"
    (args.out / "serve_gguf.json").write_text(text)
    if args.json:
        args.json.write_text(text)
    (args.out / "serve_gguf.md").write_text(gguf.report_table(data))
    print(gguf.report_table(data))


def main(argv: list[str] | None = None) -> int:
    max_runtime.prepare()

    def measure_and_write() -> None:
        args = parse_args(argv)
        if args.gguf:
            run_gguf(args)
        else:
            write(run(args), args)

    return exit_status(measure_and_write)


if __name__ == "__main__":
    sys.exit(main())
