"""Step 23's model (solutions/solution_23.py) on Llama checkpoints made here:
compiled with its cache, its logits and greedy tokens equal transformers'
LlamaForCausalLM; the loader reads bfloat16 and float32 safetensors without
torch and refuses what it cannot run in one line; tools.generate runs a
Llama checkpoint end to end."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from common.checkpoint import read_safetensors
from solutions.solution_15 import CheckpointError
from solutions.solution_23 import compile_llama, empty_cache, generate_llama, load_llama
from tests.checker.compare import close
from tests.fixtures import (
    hf_llama,
    run_tool,
    stand_in_device,
    tutorial_model_devices,
    write_tokenizer,
)

PROMPT = [5, 17, 42, 7, 99, 3]


def save(model, directory: Path, dtype=torch.float32) -> Path:
    model.to(dtype).save_pretrained(directory)
    model.float()
    write_tokenizer(directory, vocab_size=model.config.vocab_size)
    return directory


@pytest.fixture(scope="module")
def tied(tmp_path_factory) -> tuple[object, Path]:
    model = hf_llama(seed=1)
    return model, save(model, tmp_path_factory.mktemp("tied"))


@pytest.fixture(scope="module")
def compiled(tied):
    model = load_llama(tied[1])
    return model, compile_llama(model)


def test_compiled_logits_equal_transformers(tied, compiled) -> None:
    hf, directory = tied
    # A tied checkpoint stores the table once: the loader fills the head from it.
    assert "lm_head.weight" not in read_safetensors(directory / "model.safetensors")
    model, forward = compiled
    ids = np.asarray([PROMPT], dtype=np.int64)
    from max.experimental.tensor import Tensor

    logits, keys, _ = forward(Tensor(ids), *empty_cache(model.config))
    with torch.no_grad():
        want = hf(torch.tensor(ids)).logits.numpy()
    assert close(np.asarray(logits.to_numpy()), want, rtol=1e-4, atol=1e-5)
    assert tuple(int(d) for d in keys.shape) == (2, 1, 2, len(PROMPT), 16)


def test_greedy_tokens_equal_transformers(tied, compiled) -> None:
    hf, _ = tied
    model, forward = compiled
    ours = list(generate_llama(forward, model.config, PROMPT, 12))
    with torch.no_grad():
        theirs = hf.generate(torch.tensor([PROMPT]), max_new_tokens=12, do_sample=False)
    assert ours == theirs[0, len(PROMPT) :].tolist()


def test_an_untied_head_loads_its_own_weights(tmp_path: Path) -> None:
    from max.experimental.tensor import Tensor

    hf = hf_llama(seed=2, tie_word_embeddings=False)
    model = load_llama(save(hf, tmp_path))
    ids = np.asarray([PROMPT], dtype=np.int64)
    logits, _, _ = model(Tensor(ids), *empty_cache(model.config))
    with torch.no_grad():
        want = hf(torch.tensor(ids)).logits.numpy()
    assert close(np.asarray(logits.to_numpy()), want, rtol=1e-4, atol=1e-5)


def test_bfloat16_is_widened_exactly(tmp_path: Path) -> None:
    hf = hf_llama(seed=3)
    save(hf, tmp_path, torch.bfloat16)
    tensors = read_safetensors(tmp_path / "model.safetensors")
    want = hf.to(torch.bfloat16).float().state_dict()["model.layers.0.mlp.up_proj.weight"]
    assert np.array_equal(tensors["model.layers.0.mlp.up_proj.weight"], want.numpy())


def edit_config(directory: Path, **changes) -> None:
    path = directory / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        (
            {"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5}},
            "'llama3' rotary scaling",
        ),
        ({"sliding_window": 4}, "sliding window of 4"),
        ({"attention_bias": True}, "biases"),
        ({"rope_interleaved": True}, "interleaved"),
        ({"hidden_act": "gelu"}, "'gelu'"),
        ({"num_key_value_heads": 4}, "self_attn.k_proj.weight has shape [32, 64]"),
    ],
)
def test_a_checkpoint_it_cannot_run_is_named(tmp_path: Path, changes: dict, said: str) -> None:
    save(hf_llama(seed=4), tmp_path)
    edit_config(tmp_path, **changes)
    with pytest.raises(CheckpointError, match=re.escape(said)):
        load_llama(tmp_path)


@pytest.mark.parametrize("flags", [[], ["--step23"]], ids=["fast", "step23"])
def test_generate_runs_a_llama_checkpoint(tied, flags) -> None:
    """On fast/llama.py by default, on step 23's model with --step23."""
    _, directory = tied
    result = run_tool(
        "tools.generate",
        *("--weights", str(directory), "--prompt", "The quick brown fox"),
        *("--max-new-tokens", "5", "--greedy", *flags),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("The quick brown fox")
    assert "5 tokens in" in result.stderr


def test_generate_runs_a_llama_checkpoint_on_the_cpu_where_max_would_use_a_gpu(
    tied, monkeypatch, capsys
) -> None:
    """Step 23's model is built on the CPU, also where MAX would make its
    tensors on a GPU, in bfloat16 (a CPU object of its own stands in)."""
    from max.experimental.tensor import default_device

    from tools import generate

    _, directory = tied
    devices = tutorial_model_devices(monkeypatch, "solutions.solution_23", "load_llama")
    argv = ["--weights", str(directory), "--prompt", "Hi", "--max-new-tokens", "2", "--greedy"]
    argv.append("--step23")
    with default_device(stand_in_device()):
        assert generate.main(argv) == 0, capsys.readouterr().err
    assert devices == ["CPU"]


def test_generate_refuses_gpt2_only_flags_for_llama(tied) -> None:
    _, directory = tied
    result = run_tool(
        "tools.generate", "--weights", str(directory), "--prompt", "Hi", "--eager", timeout=120
    )
    assert result.returncode == 2
    assert "Llama-style model" in result.stderr and "--eager" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_benchmarks_checkpoint_loads_and_its_report_names_the_machine(tmp_path: Path) -> None:
    from common.random_checkpoint import SMOLLM2_135M, write_random_llama
    from devtools.bench import llama as llama_bench

    config = dict(
        SMOLLM2_135M,
        vocab_size=64,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    model = load_llama(write_random_llama(tmp_path, config))
    assert model.config.num_key_value_heads == 2 and model.config.tie_word_embeddings
    summary = {"median": 2.0, "min": 1.0, "max": 3.0}
    report = llama_bench.format_report(
        dict(
            machine="Some CPU, 2 cores",
            load=dict(loadavg_before=[0.5], loadavg_after=[0.6], other_processes_cpu_fraction=0.0),
            tokens=8,
            rounds=1,
            compile_seconds=1.0,
            summaries={
                key: {"decode_tok_s": summary, "first_token_ms": summary}
                for key in llama_bench.CONTENDERS
            },
            ratio={"median": 1.0, "min": 0.9, "max": 1.1},
        )
    )
    assert report.startswith("Machine: Some CPU, 2 cores.")
    assert "**1.00x (0.90-1.10)**" in report
