"""The reference solutions against Hugging Face transformers, the oracle:
the same checkpoint gives the same logits and the same greedy tokens."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from common import max_runtime
from solutions.solution_13 import MaxGPT2LMHeadModel
from solutions.solution_14 import generate_tokens
from solutions.solution_15 import (
    CheckpointError,
    load_config,
    load_into,
    load_pretrained,
    read_tensors,
    to_max_layout,
)
from tests import reference_gpt2 as ref
from tests.checker.compare import close
from tests.fixtures import hf_model, write_checkpoint

max_runtime.prepare()
PROMPT = [5, 17, 3, 88, 41, 2, 9, 250, 77, 1]


def max_model(directory: Path) -> MaxGPT2LMHeadModel:
    return load_pretrained(directory)


def max_logits(model: MaxGPT2LMHeadModel, ids: list[int]) -> np.ndarray:
    from max.experimental.tensor import Tensor

    return np.asarray(model(Tensor(np.asarray([ids], dtype=np.int64))).to_numpy())


def hf_logits(model, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits.numpy()


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[object, Path]:
    hf = hf_model(initializer_range=0.2)  # larger weights: varied greedy tokens
    return hf, write_checkpoint(tmp_path_factory.mktemp("small"), hf)


def test_logits_match_transformers(small) -> None:
    hf, directory = small
    ours, theirs = max_logits(max_model(directory), PROMPT), hf_logits(hf, PROMPT)
    assert close(ours, theirs), np.abs(ours - theirs).max()


def test_greedy_tokens_match_transformers_generate(small) -> None:
    hf, directory = small
    with torch.no_grad():
        theirs = hf.generate(torch.tensor([PROMPT]), max_new_tokens=12, do_sample=False)
    expected = theirs[0, len(PROMPT) :].tolist()
    assert len(set(expected)) > 3, "the oracle's tokens should vary for a meaningful test"
    assert list(generate_tokens(max_model(directory), PROMPT, 12)) == expected


def test_reference_greedy_matches_transformers(small) -> None:
    """The checkers use the NumPy reference's greedy decoding as ground truth."""
    hf, directory = small
    with torch.no_grad():
        theirs = hf.generate(torch.tensor([PROMPT]), max_new_tokens=8, do_sample=False)
    config = load_config(directory)
    weights = {k: v.astype(np.float64) for k, v in to_max_layout(read_tensors(directory)).items()}
    ours = ref.greedy_generate(
        weights, PROMPT, 8, config.n_layer, config.n_head, config.layer_norm_epsilon
    )
    assert ours == theirs[0, len(PROMPT) :].tolist()


def test_logits_match_at_gpt2_124m_config(tmp_path: Path) -> None:
    """The real 124M configuration: 12 layers, 12 heads, 768 wide, 50257 tokens."""
    hf = hf_model(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
    directory = write_checkpoint(tmp_path, hf)
    ids = [464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13]
    ours, theirs = max_logits(max_model(directory), ids), hf_logits(hf, ids)
    assert ours.shape == (1, len(ids), 50257)
    assert close(ours, theirs), np.abs(ours - theirs).max()
    assert (ours[0].argmax(-1) == theirs[0].argmax(-1)).all()


def test_hub_style_names_and_buffers_load(small, tmp_path: Path) -> None:
    """The hub's gpt2 checkpoint has no `transformer.` prefix and carries the
    old attn.bias mask buffers: both are handled."""
    from safetensors.numpy import save_file

    _, directory = small
    tensors = read_tensors(directory)
    hub = {k.removeprefix("transformer."): v for k, v in tensors.items() if k != "lm_head.weight"}
    hub["h.0.attn.bias"] = np.tril(np.ones((1, 1, 64, 64), np.float32))
    (tmp_path / "config.json").write_text((directory / "config.json").read_text())
    save_file(hub, str(tmp_path / "model.safetensors"))
    assert close(max_logits(max_model(tmp_path), PROMPT), max_logits(max_model(directory), PROMPT))


def test_mismatched_checkpoint_names_the_first_bad_tensor(small, tmp_path: Path) -> None:
    _, directory = small
    config_text = (directory / "config.json").read_text().replace('"n_embd": 64', '"n_embd": 32')
    (tmp_path / "config.json").write_text(config_text)
    (tmp_path / "model.safetensors").write_bytes((directory / "model.safetensors").read_bytes())
    model = MaxGPT2LMHeadModel(load_config(tmp_path))
    with pytest.raises(
        CheckpointError, match=r"tensor transformer\.wte\.weight has shape \[300, 64\]"
    ):
        load_into(model, tmp_path)


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="config.json"):
        load_config(tmp_path)
    with pytest.raises(CheckpointError, match="model.safetensors"):
        read_tensors(tmp_path)
