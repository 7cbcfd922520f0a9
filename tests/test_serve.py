"""`python -m tools.serve` end to end: the real `max serve` with our GPT-2
architecture, queried with the official `openai` client.

One server for the module (it compiles once), on 127.0.0.1 and a free port,
with a small checkpoint and tokenizer made locally; it is stopped with SIGTERM
by PID at the end, and no process it started may survive.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("max.serve", reason="needs max[serve]")
openai = pytest.importorskip("openai", reason="needs the openai client")
psutil = pytest.importorskip("psutil")

from common import max_runtime  # noqa: E402
from common.steps import REPO  # noqa: E402
from devtools.serve_bench.executions import read_executions, split_execution_time  # noqa: E402
from devtools.serve_bench.server import start_timed  # noqa: E402
from tests.fixtures import hf_model, run_tool, write_checkpoint  # noqa: E402
from tools.generate import Tokenizer  # noqa: E402
from tools.serve import SERVED_NAME, free_port, stop, wait_ready  # noqa: E402

STARTUP_SECONDS = 1500  # a cold kernel cache compiles the paged-attention kernels
REQUEST_SECONDS = 120
CONTEXT = 64  # the checkpoint's n_positions
PROMPT = "The quick brown fox"
# Different prompts and lengths for the concurrency test.
PROMPTS = [
    ("The quick brown fox", 9),
    ("A language model predicts", 5),
    ("Attention lets every position look at the positions before it.", 12),
    ("MAX", 7),
    ("The lazy dog", 3),
    ("A language model predicts the next token from the tokens before it.", 10),
    ("MAX compiles the model into a graph", 6),
    ("fox", 11),
]


def family_rss(pid: int) -> int:
    """Resident memory of a process and all its descendants, in bytes."""
    root = psutil.Process(pid)
    total = 0
    for process in [root, *root.children(recursive=True)]:
        try:
            total += process.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


class Server:
    """`python -m tools.serve TOOL_ARGS` running in the background (also
    test_serve_gguf.py's)."""

    def __init__(self, tool_args: list[str], log: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tools.serve",
                *tool_args,
                "--port",
                str(self.port),
                "--device",
                "cpu",
                "--log",
                str(log),
            ],
            cwd=REPO,
            env=max_runtime.child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def wait_ready(self) -> str:
        """Read tools.serve's output to the end of its ready banner (bounded in time)."""
        deadline = time.monotonic() + STARTUP_SECONDS
        seen = []
        os.set_blocking(self.process.stdout.fileno(), False)
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if line:
                seen.append(line)
                if line.startswith("Ctrl-C stops the server"):  # the banner's last line
                    return "".join(seen)
                continue
            if self.process.poll() is not None:
                break
            time.sleep(0.5)
        self.stop()
        pytest.fail(f"the server did not start:\n{''.join(seen)}\n{self.log_tail()}")

    def log_tail(self) -> str:
        return self.log.read_text()[-4000:] if self.log.is_file() else ""

    def descendants(self) -> list:
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> list:
        """SIGTERM by PID; return the started processes still alive after."""
        started = self.descendants()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        _, alive = psutil.wait_procs(started, timeout=10)
        for process in alive:  # do not leak them into the next test
            process.kill()
        return alive


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> tuple[object, Path]:
    hf = hf_model(initializer_range=0.2, n_positions=CONTEXT)
    return hf, write_checkpoint(tmp_path_factory.mktemp("ckpt"), hf)


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    _, weights = checkpoint
    running = Server(
        ["--weights", str(weights)], tmp_path_factory.mktemp("serve") / "max-serve.log"
    )
    running.banner = running.wait_ready()
    yield running
    running.stop()


def openai_client(base_url: str):
    return openai.OpenAI(
        base_url=f"{base_url}/v1", api_key="none", timeout=REQUEST_SECONDS, max_retries=0
    )


@pytest.fixture(scope="module")
def client(server):
    return openai_client(server.base_url)


def greedy(client, prompt: str, max_tokens: int, **extra):
    """A greedy completion request; the response (or the stream)."""
    # ignore_eos: the tiny checkpoint's end-of-text token is id 0, which
    # tools.generate and transformers' generate (below) do not stop at either.
    return client.completions.create(
        model=SERVED_NAME,
        prompt=prompt,
        max_tokens=max_tokens,
        temperature=0,
        extra_body={"ignore_eos": True},
        **extra,
    )


def complete(client, prompt: str, max_tokens: int) -> str:
    return greedy(client, prompt, max_tokens).choices[0].text


def transformers_greedy(checkpoint, prompt: str, max_tokens: int) -> str:
    import torch

    hf, directory = checkpoint
    tokenizer = Tokenizer(directory)
    ids = tokenizer.encode(prompt)
    with torch.no_grad():
        out = hf.generate(
            torch.tensor([ids]), max_new_tokens=max_tokens, do_sample=False, eos_token_id=None
        )
    return tokenizer.decode(out[0, len(ids) :].tolist())


def post(server, body: bytes | str, path: str = "/v1/completions") -> tuple[int, object]:
    data = body.encode() if isinstance(body, str) else body
    request = urllib.request.Request(
        server.base_url + path, data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_SECONDS) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            return error.code, json.loads(raw)
        except json.JSONDecodeError:
            return error.code, raw.decode(errors="replace")


def test_startup_banner_says_how_to_query(server) -> None:
    assert f"{server.base_url}/v1" in server.banner
    assert "curl" in server.banner and "openai" in server.banner
    assert server.process.poll() is None


def test_greedy_completion_is_generate_and_transformers(server, client, checkpoint) -> None:
    _, directory = checkpoint
    served = complete(client, PROMPT, 8)
    assert served == transformers_greedy(checkpoint, PROMPT, 8).rstrip("\ufffd")
    generated = run_tool(
        # --eager: the reference model of steps 13-14, no multi-minute compile.
        "tools.generate",
        "--weights",
        str(directory),
        "--eager",
        "--prompt",
        PROMPT,
        "--max-new-tokens",
        "8",
        "--greedy",
        timeout=900,
    )
    assert generated.returncode == 0, generated.stderr
    assert PROMPT + served == generated.stdout.rstrip("\n")


def test_streamed_chunks_concatenate_to_the_completion(client) -> None:
    whole = complete(client, PROMPT, 10)
    chunks = greedy(client, PROMPT, 10, stream=True)
    pieces = [chunk.choices[0].text for chunk in chunks if chunk.choices]
    assert len([p for p in pieces if p]) > 1  # really streamed, not one blob
    assert "".join(pieces) == whole


def alone_then_together(complete, client, prompts: list[tuple[str, int]]) -> list[str]:
    """Each (prompt, max_tokens) completed alone, then all sent at once: the
    answers alone, once the answers together are checked to be the same
    (also test_serve_gguf.py's)."""
    alone = [complete(client, prompt, n) for prompt, n in prompts]
    with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
        together = list(pool.map(lambda job: complete(client, *job), prompts))
    assert together == alone
    return alone


def test_concurrent_requests_do_not_mix(client, checkpoint) -> None:
    solo = alone_then_together(complete, client, PROMPTS)
    # ... and each is the model's own greedy continuation.
    for (prompt, n), text in zip(PROMPTS, solo, strict=True):
        assert text == transformers_greedy(checkpoint, prompt, n).rstrip("\ufffd"), prompt


def good(**fields) -> str:
    return json.dumps({"model": SERVED_NAME, "prompt": PROMPT, "max_tokens": 4, **fields})


BAD_REQUESTS = {
    "a prompt longer than the context": good(prompt="fox " * (CONTEXT + 10)),
    "max_tokens 0": good(max_tokens=0),
    "max_tokens negative": good(max_tokens=-3),
    "max_tokens beyond the context": good(max_tokens=CONTEXT * 4),
    "an unknown model": good(model="gpt-17"),
    "malformed JSON": '{"model": "gpt2", "prompt": ',
    "prompt of the wrong type": good(prompt={"text": PROMPT}),
    "max_tokens of the wrong type": good(max_tokens="four"),
    "an empty prompt": good(prompt=""),
}


@pytest.mark.parametrize("what", list(BAD_REQUESTS))
def test_bad_request_is_a_4xx_json_error(server, client, what) -> None:
    status, body = post(server, BAD_REQUESTS[what])
    assert 400 <= status < 500, f"{what}: HTTP {status} {body}"
    assert isinstance(body, dict), f"{what}: not a JSON object: {body!r}"
    assert server.process.poll() is None
    # The server goes on answering, correctly.
    assert complete(client, PROMPT, 4) == complete(client, PROMPT, 4)
    status, body = post(server, good(temperature=0, ignore_eos=True))
    assert status == 200, body


def test_the_execution_log_splits_a_token_between_model_and_pipeline(checkpoint, tmp_path) -> None:
    """`max serve` as devtools.serve_bench starts it (its timed_arch after
    gpt2_serving) logs one model execution per generated token of a lone
    request: the bench's split of a token's time."""
    _, weights = checkpoint
    port = free_port()
    serve_args = argparse.Namespace(
        host="127.0.0.1", port=port, max_batch_size=16, device="cpu", gguf=None
    )
    base_url, execution_log = f"http://127.0.0.1:{port}", tmp_path / "executions.log"
    with open(tmp_path / "max-serve.log", "w") as log:
        process = start_timed(serve_args, weights, log, execution_log)
        try:
            wait_ready(process, base_url, STARTUP_SECONDS)
            started = time.monotonic_ns()
            completion = greedy(openai_client(base_url), "The quick brown fox", 6)
            window = (started, time.monotonic_ns())
        finally:
            stop(process)
    split = split_execution_time(read_executions(execution_log), window)
    assert split is not None, "no model executions were logged"
    assert split["executions"] == completion.usage.completion_tokens
    assert split["model_ms"] > 0 and split["between_ms"] > 0


LOAD_REQUESTS = 200
LOAD_CONCURRENCY = 16
LOAD_SECONDS = 900
RSS_GROWTH_BYTES = 256 * 2**20  # the server's whole process tree


def test_bounded_load_all_answered_memory_flat(server, client) -> None:
    def one(index: int) -> int:
        return greedy(client, *PROMPTS[index % len(PROMPTS)]).usage.completion_tokens

    list(map(one, range(LOAD_CONCURRENCY)))  # warm: allocations that stay
    before = family_rss(server.process.pid)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=LOAD_CONCURRENCY) as pool:
        futures = [pool.submit(one, i) for i in range(LOAD_REQUESTS)]
        tokens = [
            f.result(timeout=max(1, LOAD_SECONDS - (time.monotonic() - started))) for f in futures
        ]
    assert len(tokens) == LOAD_REQUESTS
    assert tokens == [PROMPTS[i % len(PROMPTS)][1] for i in range(LOAD_REQUESTS)]
    growth = family_rss(server.process.pid) - before
    assert growth < RSS_GROWTH_BYTES, f"the server grew by {growth / 2**20:.0f} MiB"


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux's SCHED_IDLE")
def test_the_model_worker_sets_maxs_polling_logger_aside(server, client) -> None:
    """MAX's logger starts at the model worker's first execute and polls
    (docs/src/performance.md, "The runtime's logger polls"); the worker sets
    it aside, and none of the server's other threads. If a MAX release stops
    polling, this fails: the workaround can then go."""
    complete(client, PROMPT, 2)
    threads = [thread.id for process in server.descendants() for thread in process.threads()]
    set_aside = [tid for tid in threads if os.sched_getscheduler(tid) == os.SCHED_IDLE]
    assert len(set_aside) == 1, f"{len(set_aside)} of the server's {len(threads)} threads set aside"


def test_sigterm_stops_the_server_and_every_worker(server) -> None:
    """Last: stops the module's server."""
    started = server.descendants()
    assert started, "max serve should have started worker processes"
    alive = server.stop()
    assert server.process.returncode == 0
    assert not alive, f"left behind: {alive}"
    with pytest.raises(OSError):
        urllib.request.urlopen(server.base_url + "/health", timeout=5)


def serve_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_tool("tools.serve", *args, timeout=120, **env)


def test_offline_without_weights_says_what_to_do(tmp_path: Path) -> None:
    result = serve_cli(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "empty-hf-home"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "--weights DIR" in result.stderr and "offline" in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_port_is_a_usage_error() -> None:
    result = serve_cli("--port", "70000")
    assert result.returncode == 2
    assert "--port must be between 1 and 65535" in result.stderr
    assert "Traceback" not in result.stderr
