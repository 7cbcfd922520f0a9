"""MAX's own load generator, `max benchmark`, once against the same server:
a second opinion on our client's numbers (it needs the `max[benchmark]`
extra; without it the cross-check is skipped and says so)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from common import max_runtime
from tools.serve import SERVED_NAME

TIMEOUT = 900.0  # seconds: a bound on the whole cross-check


def available() -> bool:
    return importlib.util.find_spec("max.benchmark.benchmark_serving") is not None and (
        importlib.util.find_spec("datasets") is not None
    )


def command(args: argparse.Namespace, directory: Path, port: int, result: Path) -> list[str]:
    concurrency = args.cross_check_concurrency
    return [
        sys.executable, "-m", "max._entrypoints.pipelines", "benchmark",
        "--model", SERVED_NAME,
        "--tokenizer", str(directory),
        "--tokenizer-local-files-only",
        "--backend", "modular",
        "--endpoint", "/v1/completions",
        "--host", "127.0.0.1",
        "--port", str(port),
        "--dataset-name", "random",
        "--random-input-len", "8",
        "--random-output-len", str(args.max_tokens),
        # It leaves the first and last `concurrency` requests out of its statistics.
        "--num-prompts", str(max(args.requests, 12 * concurrency)),
        "--max-concurrency", str(concurrency),
        "--temperature", "0",
        "--disable-tqdm",
        "--result-filename", str(result),
    ]  # fmt: skip


def run(args: argparse.Namespace, directory: Path, port: int, scratch: Path) -> dict:
    """`max benchmark`'s throughput, TTFT and ITL at one concurrency, or why not."""
    if not available():
        return {"skipped": "max benchmark needs the extra: pip install 'max[benchmark]'"}
    result = scratch / "max-benchmark.json"
    finished = subprocess.run(
        command(args, directory, port, result),
        cwd=scratch,  # it writes a log folder into its working directory
        env=max_runtime.child_env(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1"),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    if finished.returncode != 0 or not result.is_file():
        tail = (finished.stdout + finished.stderr).strip().splitlines()[-5:]
        return {"skipped": "max benchmark failed: " + " / ".join(tail)}
    data = json.loads(result.read_text())
    return {
        "concurrency": args.cross_check_concurrency,
        # Its token counts re-encode the output text, which a locally made
        # tokenizer does not round-trip: count requests, each max_tokens long.
        "tokens_per_second": round(data["request_throughput"] * args.max_tokens, 2),
        "ttft_ms": {"p50": data.get("median_ttft_ms"), "p99": data.get("p99_ttft_ms")},
        "itl_ms": {"p50": data.get("median_itl_ms"), "p99": data.get("p99_itl_ms")},
    }
