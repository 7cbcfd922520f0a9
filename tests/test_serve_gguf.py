"""`python -m tools.serve --gguf`: SmolLM2-135M-Instruct's Q4_1 file served
by the real `max serve` through fast/'s kernels (llama_serving), queried
with the official `openai` client.

What the server answers is what the fast path in this process chooses
greedily from the same file: a chat question through the file's own chat
template, and prompts sent together, each of which must come back as it
does alone (each request has caches of its own; a prompt of 64 tokens or
more goes through the prompt graph). One server for the module, on
127.0.0.1 and a free port, stopped with SIGTERM by PID at the end.
"""

from __future__ import annotations

import pytest

pytest.importorskip("max.serve", reason="needs max[serve]")
openai = pytest.importorskip("openai", reason="needs the openai client")
pytest.importorskip("psutil")

from common import smollm2  # noqa: E402
from tests.fixtures import run_tool  # noqa: E402
from tests.test_serve import (  # noqa: E402
    STARTUP_SECONDS,
    Server,
    alone_then_together,
    family_rss,
    openai_client,
)

GGUF = smollm2.gguf_path()
pytestmark = pytest.mark.skipif(GGUF is None, reason=f"needs SmolLM2's file: {smollm2.INSTALL}")
NAME = GGUF.stem if GGUF else ""  # the model name clients send: the file's
QUESTION = "What is the capital of France?"
LONG = "Attention lets every position look at the positions before it. " * 8  # > 64 tokens
PROMPTS = [
    ("The capital of France is", 8),
    ("Once upon a time", 5),
    (LONG, 6),
    ("def add(a, b):", 10),
]


@pytest.fixture(scope="module")
def fast():
    """The fast path in this process on the same file, and its tokenizer."""
    from common.gguf_tokenizer import GGUFTokenizer
    from fast import llama
    from solutions.solution_29 import read_gguf

    generator = llama.FastLlamaGenerator(llama.load_gguf(GGUF), context=256)
    return generator, GGUFTokenizer(read_gguf(GGUF).metadata, str(GGUF))


def fast_greedy(fast, prompt: str, max_tokens: int, *, stop_at_end: bool = False) -> str:
    generator, tokenizer = fast
    ids = []
    for token in generator.generate(tokenizer.encode(prompt), max_tokens):
        if stop_at_end and token == tokenizer.eos_id:
            break
        ids.append(token)
    return tokenizer.decode(ids)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = Server(["--gguf", str(GGUF)], tmp_path_factory.mktemp("serve") / "max-serve.log")
    running.banner = running.wait_ready()
    # The first prompt of 64 tokens or more builds the prompt graph (minutes
    # when the kernels' cache is cold): once here, within the startup's bound.
    warm = openai.OpenAI(base_url=f"{running.base_url}/v1", api_key="none", timeout=STARTUP_SECONDS)
    try:
        warm.completions.create(model=NAME, prompt=LONG, max_tokens=1, temperature=0)
    except openai.OpenAIError as error:
        running.stop()
        pytest.fail(f"the server did not answer a first long prompt: {error}\n{running.log_tail()}")
    yield running
    running.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai_client(server.base_url)


def complete(client, prompt: str, max_tokens: int) -> str:
    # ignore_eos: every request makes max_tokens tokens, as generate() does.
    completion = client.completions.create(
        model=NAME,
        prompt=prompt,
        max_tokens=max_tokens,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    return completion.choices[0].text


def test_the_banner_names_the_file(server) -> None:
    assert f"{server.base_url}/v1" in server.banner and NAME in server.banner


def test_a_chat_answer_is_the_fast_paths_greedy_answer(client, fast) -> None:
    _, tokenizer = fast
    answer = client.chat.completions.create(
        model=NAME,
        messages=[{"role": "user", "content": QUESTION}],
        max_tokens=16,
        temperature=0,
    )
    expected = fast_greedy(fast, tokenizer.chat_prompt(QUESTION), 16, stop_at_end=True)
    assert answer.choices[0].message.content == expected
    assert "Paris" in expected  # the trained model's answer, not noise


def test_prompts_sent_together_answer_as_alone(client, fast) -> None:
    alone = alone_then_together(complete, client, PROMPTS)
    for (prompt, n), text in zip(PROMPTS, alone, strict=True):
        assert text == fast_greedy(fast, prompt, n).rstrip("\ufffd"), prompt


def test_an_ended_request_gives_its_caches_back(server, client) -> None:
    """A chat request without max_tokens may run to the context's end, so its
    caches are sized for all 8,192 positions (189 MB for SmolLM2); the model
    frees them when MAX releases the request. Kept, six would hold 1.1 GB."""

    def ask() -> None:
        messages = [{"role": "user", "content": QUESTION}]
        client.chat.completions.create(model=NAME, messages=messages, temperature=0)

    ask()  # allocations that stay
    before = family_rss(server.process.pid)
    for _ in range(6):
        ask()
    growth = family_rss(server.process.pid) - before
    assert growth < 256 * 2**20, f"the server grew by {growth / 2**20:.0f} MiB"


def test_sigterm_stops_the_server_and_every_worker(server) -> None:
    """Last: stops the module's server."""
    assert server.descendants(), "max serve should have started worker processes"
    alive = server.stop()
    assert server.process.returncode == 0
    assert not alive, f"left behind: {alive}"


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["--gguf", "no-such.gguf"], 1, "no-such.gguf is not a file"),
        (["--gguf", "README.md"], 1, "README.md"),
        (["--gguf", "smollm2", "--weights", "x"], 2, "without --weights or --model"),
        (["--gguf", "smollm2", "--device", "gpu"], 2, "drop --device gpu"),
    ],
)
def test_a_bad_gguf_argument_is_one_line(args, status, message) -> None:
    result = run_tool("tools.serve", *args, timeout=120)
    assert result.returncode == status, result.stdout + result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
