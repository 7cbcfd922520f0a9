"""`python -m tools.generate --gguf FILE` on tiny GGUF files written here
(tests/reference_gguf.py): it decodes what step 23's model decodes from the
same weights, and every file it cannot use is one line naming what is wrong.
SmolLM2's real file is tests/test_smollm2.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.checkpoint import read_safetensors
from common.random_checkpoint import write_random_llama
from tests import reference_gguf as writer
from tools import generate as tool

# tests.fixtures.hf_llama's shapes and constants: the graphs compiled for
# test_llama_model.py are found in MAX's cache instead of compiled again.
CONFIG = dict(
    model_type="llama",
    vocab_size=300,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    rope_theta=5000.0,
    rms_norm_eps=1e-6,
    max_position_embeddings=64,
    tie_word_embeddings=True,
)
PROMPT = "hello"


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> tuple[Path, dict]:
    """A random Llama checkpoint directory and its tensors."""
    directory = write_random_llama(tmp_path_factory.mktemp("llama"), CONFIG)
    return directory, read_safetensors(directory / "model.safetensors")


def write_gguf(path: Path, state: dict, **metadata_changes) -> Path:
    metadata = writer.llama_metadata(
        layers=2, hidden=64, intermediate=96, heads=4, kv_heads=2, theta=5000.0, eps=1e-6,
        context=64,
    )  # fmt: skip
    metadata |= writer.tokenizer_metadata(CONFIG["vocab_size"])
    metadata |= metadata_changes
    tensors = writer.llama_tensors(state, heads=4, kv_heads=2, kind="F32")
    path.write_bytes(writer.gguf_bytes(metadata, tensors).data)
    return path


def generate(capfd, *args: str) -> tuple[int, str, str]:
    code = tool.main(["--greedy", "--max-new-tokens", "6", *args])
    out, err = capfd.readouterr()
    return code, out, err


@pytest.mark.parametrize("flags", [[], ["--step23"]], ids=["fast", "step23"])
def test_it_decodes_step_23s_tokens_from_the_same_weights(state, tmp_path, capfd, flags) -> None:
    """fast/llama.py (the default) and step 23's model (--step23) both."""
    from common.gguf_tokenizer import GGUFTokenizer
    from solutions.solution_23 import compile_llama, generate_llama, load_llama
    from solutions.solution_29 import read_gguf

    directory, tensors = state
    path = write_gguf(tmp_path / "tiny.gguf", tensors)
    code, out, err = generate(capfd, "--gguf", str(path), "--prompt", PROMPT, *flags)
    assert code == 0, err

    tokenizer = GGUFTokenizer(read_gguf(path).metadata, str(path))
    model = load_llama(directory)
    ids = tokenizer.encode(PROMPT)
    expected = list(generate_llama(compile_llama(model), model.config, ids, 6))
    end = expected.index(257) if 257 in expected else len(expected)
    assert out == PROMPT + tokenizer.decode(expected[:end])


@pytest.mark.parametrize("flags", [[], ["--step23"]], ids=["fast", "step23"])
def test_chat_renders_the_files_template(state, tmp_path, capfd, monkeypatch, flags) -> None:
    """--chat feeds the model the template's text, stops at the file's end
    token, and prints the answer alone."""
    from common import gguf_tokenizer

    seen = {}
    real_tally, real_encode = tool.Tally, gguf_tokenizer.GGUFTokenizer.encode

    def spy_tally(tokens, end_id):
        seen["end_id"] = end_id
        return real_tally(tokens, end_id)

    def spy_encode(self, text, **options):
        seen.setdefault("text", text)  # the prompt's, before any other
        return real_encode(self, text, **options)

    monkeypatch.setattr(tool, "Tally", spy_tally)
    monkeypatch.setattr(gguf_tokenizer.GGUFTokenizer, "encode", spy_encode)
    path = write_gguf(tmp_path / "chat.gguf", state[1])
    code, out, err = generate(capfd, "--gguf", str(path), "--chat", "--prompt", PROMPT, *flags)
    assert code == 0, err
    assert seen == {
        "text": "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
        "end_id": 257,
    }
    assert not out.startswith(PROMPT)


def corrupt(path: Path, state: dict) -> Path:
    path.write_bytes(b"PK\x03\x04" + bytes(60))
    return path


def truncated(path: Path, state: dict) -> Path:
    whole = write_gguf(path, state).read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    return path


@pytest.mark.parametrize(
    ("make", "flags", "code", "phrase"),
    [
        (corrupt, [], 1, "is not a GGUF file (it starts with b'PK\\x03\\x04')"),
        (truncated, [], 1, "ends at byte"),
        (
            lambda path, state: write_gguf(
                path, state, **{"general.architecture": (writer.STRING, "gpt2")}
            ),
            [],
            1,
            "holds a 'gpt2' model",
        ),
        (
            lambda path, state: write_gguf(
                path, state, **{"tokenizer.ggml.model": (writer.STRING, "llama")}
            ),
            [],
            1,
            "tokenizer is 'llama' (tokenizer.ggml.model)",
        ),
        (
            lambda path, state: write_gguf(
                path, state, **{"tokenizer.chat_template": (writer.U32, 0)}
            ),
            ["--chat"],
            1,
            "has no chat template",
        ),
        (lambda path, state: path, [], 1, "is not a file"),
        (write_gguf, ["--dtype", "bfloat16"], 2, "is for GPT-2 only"),
    ],
    ids=["corrupt", "truncated", "gpt2", "sentencepiece", "no-template", "missing", "bfloat16"],
)
def test_a_file_it_cannot_use_is_one_line(state, tmp_path, capfd, make, flags, code, phrase):
    path = make(tmp_path / "model.gguf", state[1])
    result, out, err = generate(capfd, "--gguf", str(path), "--prompt", PROMPT, *flags)
    assert result == code, err
    assert phrase in err and "Traceback" not in err, err
    assert out == ""


def test_steps_reads_the_file_with_your_step_29(state, tmp_path, capfd) -> None:
    path = write_gguf(tmp_path / "tiny.gguf", state[1])
    code, _, err = generate(capfd, "--gguf", str(path), "--prompt", PROMPT, "--steps")
    if "placeholders" not in err:
        pytest.skip("steps/step_29.py is finished in this checkout")
    assert code == 1 and "step_29.py still has placeholders" in err, err
    assert "Traceback" not in err
