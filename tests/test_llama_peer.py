"""llama.cpp as a benchmark peer (devtools/llama_peer.py): our GGUF file of a
local checkpoint decodes, in llama.cpp, to transformers' greedy tokens.

Runs when the `peers` extra is installed (`pip install -e ".[peers]"`), and
skips with that reason otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools import llama_peer
from devtools.bench.contenders import llama_contenders
from tests.fixtures import hf_model, write_checkpoint

REASON = llama_peer.missing()
needs_llama = pytest.mark.skipif(REASON is not None, reason=REASON or "")
PROMPT = [5, 17, 42, 3, 250, 7]
NEW_TOKENS = 24


def test_tensor_names_follow_llama_cpp() -> None:
    assert llama_peer.gguf_name("transformer.h.3.attn.c_attn.weight") == "blk.3.attn_qkv.weight"
    assert llama_peer.gguf_name("transformer.h.0.mlp.c_proj.bias") == "blk.0.ffn_down.bias"
    assert llama_peer.gguf_name("transformer.wpe.weight") == "position_embd.weight"
    assert llama_peer.gguf_name("transformer.ln_f.bias") == "output_norm.bias"
    assert llama_peer.gguf_name("transformer.h.0.attn.bias") is None  # a stored mask


def test_the_vocabulary_has_the_models_size_and_distinct_tokens() -> None:
    tokens, merges = llama_peer.vocabulary(50257)
    assert len(tokens) == len(set(tokens)) == 50257
    assert tokens[-1] == "<|endoftext|>"
    assert all(" " in merge for merge in merges)


def test_missing_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_llama(name, *args, **kwargs):
        if name == "llama_cpp":
            raise ImportError("no llama_cpp", name="llama_cpp")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_llama)
    assert '.[peers]"' in llama_peer.missing()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory):
    # Peaked logits (initializer_range 0.2): greedy choices are far from ties.
    model = hf_model(initializer_range=0.2)
    return write_checkpoint(tmp_path_factory.mktemp("llama"), model), model


def transformers_greedy(model, prompt: list[int], count: int) -> list[int]:
    import torch

    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt]), max_new_tokens=count, min_new_tokens=count, do_sample=False
        )
    return out[0, len(prompt) :].tolist()


@needs_llama
def test_llama_cpp_decodes_our_gguf_as_transformers_does(checkpoint) -> None:
    directory, model = checkpoint
    path = llama_peer.write_gguf(directory, directory / "model-f32.gguf", "f32")
    generator = llama_peer.LlamaGenerator(path, context=model.config.n_positions)
    expected = transformers_greedy(model, PROMPT, NEW_TOKENS)
    assert generator.generate(PROMPT, NEW_TOKENS) == expected
    assert generator.generate(PROMPT, NEW_TOKENS) == expected  # a second run starts afresh
    assert generator.generate(PROMPT[:2], 3) == transformers_greedy(model, PROMPT[:2], 3)


@needs_llama
def test_the_bench_contenders_run_on_the_tiny_fixture(checkpoint) -> None:
    directory, model = checkpoint
    (f32,) = llama_contenders(Path(directory), "float32")
    assert f32.key == "llama.cpp-f32" and f32.bytes_per_weight == 4.0
    assert f32.generate(PROMPT, 8) == transformers_greedy(model, PROMPT, 8)
    by_key = {c.key: c for c in llama_contenders(Path(directory), "bfloat16")}
    assert set(by_key) <= {"llama.cpp-bf16", "llama.cpp-q8_0"} and "llama.cpp-bf16" in by_key
    if "llama.cpp-q8_0" not in by_key:  # left out only where llama.cpp crashes on the CPU
        assert llama_peer.crash_on(Path(directory) / "model-q8_0.gguf", model.config.n_positions)
    for contender in by_key.values():
        tokens = contender.generate(PROMPT, 8)
        assert len(tokens) == 8 and all(0 <= t < model.config.vocab_size for t in tokens)


@needs_llama
def test_a_file_llama_cpp_cannot_run_is_named_not_fatal(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + bytes(60))
    reason = llama_peer.crash_on(broken, context=64)
    assert reason is not None and reason.startswith("llama.cpp"), reason
