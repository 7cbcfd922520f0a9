"""`python -m tools.generate` end to end on a local checkpoint: streaming
output, reproducibility, and a clear message for every bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.fixtures import (
    hf_model,
    run_tool,
    stand_in_device,
    tutorial_model_devices,
    write_checkpoint,
)
from tools.generate import Tokenizer

PROMPT = "The quick brown fox"
# A bound for a hung run, not a speed check: the first `--step17` run compiles
# the model, minutes on a cold MAX cache with two cores shared by other tests.
TIMEOUT = 900


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> tuple[object, Path]:
    hf = hf_model(initializer_range=0.2)
    return hf, write_checkpoint(tmp_path_factory.mktemp("ckpt"), hf)


def generate(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_tool("tools.generate", *args, timeout=TIMEOUT, **env)


def assert_clean_error(result: subprocess.CompletedProcess[str], code: int, phrase: str) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    assert phrase in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("engine", "flags"),
    [("fast/gpt2.py", []), ("step 17", ["--step17"])],
    ids=["fast", "step17"],
)
def test_greedy_output_is_transformers_greedy(checkpoint, engine: str, flags: list[str]) -> None:
    hf, directory = checkpoint
    tokenizer = Tokenizer(directory)
    ids = tokenizer.encode(PROMPT)
    with torch.no_grad():
        out = hf.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False)
    expected = PROMPT + tokenizer.decode(out[0, len(ids) :].tolist())
    result = generate(
        "--weights", str(directory), "--prompt", PROMPT, "--max-new-tokens", "8", "--greedy", *flags
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip("\n") == expected.rstrip("\ufffd")
    assert f"({engine}, float32 on cpu)" in result.stderr
    assert "tokens/s" in result.stderr


@pytest.mark.parametrize("flags", [["--eager"], ["--step17"]], ids=["eager", "step17"])
def test_the_tutorial_model_runs_on_the_cpu_where_max_would_use_a_gpu(
    checkpoint, flags: list[str], monkeypatch, capsys
) -> None:
    """Beside a GPU, MAX would build the tutorial's model there, in bfloat16,
    and a float32 checkpoint would not load into it (seen on an H200). A CPU
    object of its own stands in for the GPU as MAX's default device."""
    from max.experimental.tensor import default_device

    from tools import generate as tool

    _, directory = checkpoint
    devices = tutorial_model_devices(monkeypatch)
    argv = ["--weights", str(directory), "--prompt", PROMPT, "--max-new-tokens", "2", "--greedy"]
    with default_device(stand_in_device()):
        assert tool.main([*argv, *flags]) == 0, capsys.readouterr().err
    assert devices == ["CPU"]


def test_sampling_is_reproducible_with_a_seed(checkpoint) -> None:
    _, directory = checkpoint
    args = ("--weights", str(directory), "--prompt", PROMPT, "--max-new-tokens", "6", "--seed", "3")
    first, second = generate(*args), generate(*args)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (["--prompt", "   "], "--prompt is empty"),
        (["--prompt", "hi", "--max-new-tokens", "0"], "--max-new-tokens must be between"),
        (["--prompt", "hi", "--max-new-tokens", "-3"], "--max-new-tokens must be between"),
        (["--prompt", "hi", "--max-new-tokens", "100000"], "--max-new-tokens must be between"),
        (["--prompt", "hi", "--temperature", "0"], "--temperature must be above 0"),
        (["--prompt", "hi", "--temperature", "-1"], "--temperature must be above 0"),
        (["--prompt", "hi", "--top-k", "0"], "--top-k must be at least 1"),
        (["--prompt", "hi", "--eager", "--dtype", "bfloat16"], "on the CPU in float32"),
        (["--prompt", "hi", "--steps", "--device", "gpu"], "on the CPU in float32"),
        (["--prompt", "hi", "--step17", "--dtype", "bfloat16"], "--step17 runs the tutorial"),
        (["--prompt", "hi", "--step17", "--eager"], "--step17 is a compiled model"),
        (["--prompt", "hi", "--dtype", "float16"], "invalid choice"),
        (["--prompt", "hi", "--chat"], "--chat reads the chat template of a GGUF file"),
        (["--prompt", "hi", "--gguf", "a.gguf", "--weights", "b"], "give one"),
        (["--prompt", "hi", "--step23", "--eager"], "--step23 runs a Llama-family model"),
    ],
)
def test_bad_arguments_are_usage_errors(args: list[str], phrase: str) -> None:
    assert_clean_error(generate(*args), 2, phrase)


def test_bfloat16_runs_and_reports_its_dtype(checkpoint) -> None:
    _, directory = checkpoint
    args = ("--weights", str(directory), "--prompt", PROMPT, "--max-new-tokens", "4", "--greedy")
    result = generate(*args, "--dtype", "bfloat16", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert "bfloat16 on cpu" in result.stderr
    assert result.stdout.startswith(PROMPT)


def test_gpu_without_an_accelerator_is_a_usage_error(checkpoint) -> None:
    from max.driver import accelerator_count

    if accelerator_count():
        pytest.skip("this machine has an accelerator")
    _, directory = checkpoint
    result = generate("--weights", str(directory), "--prompt", "hi", "--device", "gpu")
    assert_clean_error(result, 2, "sees no accelerator")


def test_top_k_above_the_vocabulary(checkpoint) -> None:
    _, directory = checkpoint
    result = generate("--weights", str(directory), "--prompt", "hi", "--top-k", "301")
    assert_clean_error(result, 2, "at most the vocabulary size, 300")


def test_prompt_longer_than_the_context(checkpoint) -> None:
    _, directory = checkpoint
    result = generate("--weights", str(directory), "--prompt", "fox " * 100)
    assert_clean_error(result, 2, "context window is 64")


def test_missing_weights_directory(tmp_path: Path) -> None:
    result = generate("--weights", str(tmp_path / "nowhere"), "--prompt", "hi")
    assert_clean_error(result, 1, "no such directory")


def test_offline_without_a_local_copy_says_what_to_do(tmp_path: Path) -> None:
    result = generate("--prompt", "hi", HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path))
    assert_clean_error(result, 1, "--weights DIR")
    assert "openai-community/gpt2" in result.stderr


def test_checkpoint_that_does_not_fit_its_config(checkpoint, tmp_path: Path) -> None:
    _, directory = checkpoint
    for name in ("model.safetensors", "tokenizer.json"):
        (tmp_path / name).write_bytes((directory / name).read_bytes())
    config = (directory / "config.json").read_text().replace('"n_layer": 2', '"n_layer": 3')
    (tmp_path / "config.json").write_text(config)
    result = generate("--weights", str(tmp_path), "--prompt", "hi")
    assert_clean_error(result, 1, "transformer.h.2.")


def test_unfinished_steps_are_reported(checkpoint) -> None:
    _, directory = checkpoint
    result = generate("--weights", str(directory), "--prompt", "hi", "--steps")
    if "placeholders" not in result.stderr:
        pytest.skip("steps/step_13.py and step_14.py are finished in this checkout")
    assert_clean_error(result, 1, "still has placeholders")


def test_native_writes_to_stdout_land_on_stderr_while_text_is_printed() -> None:
    """MAX's compile notices are written to descriptor 1 by native code; generate
    runs inside stdout_for_text_only, so they reach stderr and stdout holds the text."""
    script = (
        "import os, sys\n"
        "from common.max_runtime import stdout_for_text_only\n"
        "print('before', flush=True)\n"
        "with stdout_for_text_only():\n"
        "    os.write(1, b'compiled data_movement_BroadcastToOp on the fly\\n')\n"
        "    print('the text', end='', flush=True)\n"
        "print(' after')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "before\nthe text after\n"
    assert "compiled data_movement_BroadcastToOp on the fly" in result.stderr
