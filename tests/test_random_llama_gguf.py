"""devtools/random_llama_gguf.py: a random model at a real one's shapes
loads in the fast path with those shapes, its tokenizer and chat template
read by ours and by transformers' (the Llama bench's), and every bad
argument is one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from devtools import random_llama_gguf as tool

TINY_QWEN2 = tool.Shape("qwen2", 64, 96, 4, 2, 2, 300, 1e6, "qwen2")
TINY_LLAMA3 = tool.Shape(
    "llama", 64, 96, 4, 2, 2, 300, 5e5, "llama-bpe", llama3=(8.0, 1.0, 4.0, 16)
)


@pytest.mark.parametrize("shape", [TINY_QWEN2, TINY_LLAMA3], ids=["qwen2", "llama3"])
def test_the_file_has_the_shapes_and_a_chat_vocabulary(tmp_path, shape) -> None:
    from common.gguf_tokenizer import GGUFTokenizer
    from devtools.bench import llama_gguf
    from fast.llama import fast_config
    from solutions.solution_29 import read_gguf

    path = tool.write_random(tmp_path / "tiny.Q4_1.gguf", shape, "q4_1")
    gguf = read_gguf(path)
    config = fast_config(gguf)
    assert (config.hidden_size, config.intermediate_size, config.num_hidden_layers) == (64, 96, 2)
    assert (config.num_attention_heads, config.num_key_value_heads, config.vocab_size) == (
        4,
        2,
        300,
    )
    assert config.attention_bias == (shape.architecture == "qwen2")
    assert set(config.kinds.values()) == {"Q4_1"}
    if shape.llama3:
        np.testing.assert_allclose(config.rope_factors, tool.llama3_factors(16, 5e5, *shape.llama3))
    else:
        assert config.rope_factors is None
    ours = GGUFTokenizer(gguf.metadata, str(path))
    prompt = ours.encode(ours.chat_prompt("hello"), add_bos=False)
    assert prompt.count(298) == 2 and prompt.count(299) == 1  # <|im_start|> twice, <|im_end|>
    theirs = llama_gguf.chat_prompt(llama_gguf.transformers_tokenizer(path))
    assert max(theirs) < 300 and theirs.count(298) == 2


@pytest.mark.parametrize(
    ("argv", "code", "said"),
    [
        (["gpt-5", "OUT"], 2, "no shapes for 'gpt-5': one of smollm2-360m"),
        (["qwen2.5-0.5b", "OUT", "--type", "q5_k"], 2, "--type takes q4_1, q4_0, q8_0, f32"),
        (["qwen2.5-0.5b", "missing/OUT"], 1, "is not a folder to write OUT in"),
    ],
)
def test_a_bad_argument_is_one_line(tmp_path, capsys, argv, code, said) -> None:
    argv = [str(tmp_path / arg) if "OUT" in arg else arg for arg in argv]
    assert tool.main(argv) == code
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1
    assert not list(Path(tmp_path).iterdir())
