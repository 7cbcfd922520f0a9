"""common/gguf_tokenizer.py's split of a text into words before the merges,
for each tokenizer.ggml.pre it reads, against the pattern transformers holds
for the same tokenizer: Qwen2's (its Qwen2 tokenizer's) and Llama 3's (the
one it converts Llama 3's tiktoken vocabulary with). SmolLM2's and GPT-2's
splits are tests/test_smollm2.py's, against transformers' tokenizer of the
real file."""

from __future__ import annotations

import inspect

import pytest

from common.cli import Failure
from tests import reference_gguf as writer

TEXTS = [
    "In 2024, I'M 12345 years' old!\n\n  Hello   world",
    "3.14159 and 1,000,000 -- don't STOP 'Ll we'VE",
    "tabs\tand\r\nlines  \n\n",
    "naïve café 東京 2024年 ½ ٣٤٥",
    "   leading spaces, trailing ones   ",
]


def transformers_pattern(pre: str) -> str:
    from transformers.convert_slow_tokenizer import TikTokenConverter
    from transformers.models.qwen2 import tokenization_qwen2

    if pre == "qwen2":
        return tokenization_qwen2.PRETOKENIZE_REGEX
    return inspect.signature(TikTokenConverter.__init__).parameters["pattern"].default


def metadata(pre: str) -> dict:
    """A byte-level vocabulary (no merges) split the `pre` way."""
    return {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": pre,
        "tokenizer.ggml.tokens": writer.byte_alphabet(),
        "tokenizer.ggml.merges": [],
    }


@pytest.mark.parametrize("pre", ["qwen2", "llama-bpe"])
def test_the_words_are_transformers(pre) -> None:
    import regex

    from common.gguf_tokenizer import GGUFTokenizer

    tokenizer = GGUFTokenizer(metadata(pre), "file.gguf")
    pattern = regex.compile(transformers_pattern(pre))
    for text in TEXTS:
        pieces = tokenizer._tokenizer.pre_tokenizer.pre_tokenize_str(text)
        words = [text[start:end] for _, (start, end) in pieces]
        assert words == pattern.findall(text), text
        assert tokenizer.decode(tokenizer.encode(text)) == text


def test_a_split_it_does_not_know_is_named() -> None:
    from common.gguf_tokenizer import GGUFTokenizer

    with pytest.raises(Failure, match=r"file.gguf splits words before BPE the 'tekken' way"):
        GGUFTokenizer(metadata("tekken"), "file.gguf")
