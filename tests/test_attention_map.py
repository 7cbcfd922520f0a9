"""tools/attention_map.py on a tiny random GPT-2 made here, nothing downloaded.

The checkpoint is written by Hugging Face's `save_pretrained` and the tokenizer
trained on a few sentences with the `tokenizers` library, so the tool reads the
same files it would read for the real GPT-2.
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from common.checkpoint import Tokenizer  # noqa: E402
from tests.fixtures import (  # noqa: E402
    hf_model,
    stand_in_device,
    tutorial_model_devices,
    write_checkpoint,
)
from tools import attention_map  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"
SIZES = dict(vocab_size=300, n_positions=32, n_embd=32, n_layer=2, n_head=4)
PROMPT = "The quick brown fox looks at the fox."


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory):
    """(directory, Hugging Face model) of a tiny random GPT-2."""
    # A wider init than GPT-2's 0.02, so the heads do not all attend uniformly.
    model = hf_model(initializer_range=0.3, attn_implementation="eager", **SIZES)
    return write_checkpoint(tmp_path_factory.mktemp("tiny_gpt2"), model), model


@pytest.fixture(scope="module")
def ours(checkpoint):
    """The tool's model and the prompt's token ids."""
    directory, _ = checkpoint
    return attention_map.load_model(directory), Tokenizer(directory).encode(PROMPT)


@pytest.mark.parametrize("layer", [0, 1])
def test_weights_are_causal_rows_summing_to_one(checkpoint, ours, layer: int) -> None:
    _, hf_model = checkpoint
    model, ids = ours
    weights = attention_map.attention_weights(model, ids, layer)
    seq = len(ids)
    assert weights.shape == (SIZES["n_head"], seq, seq)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-5)
    assert np.all(weights >= 0)
    above = np.triu(np.ones((seq, seq), dtype=bool), k=1)
    assert np.all(weights[:, above] == 0), "a query attends to a later token"
    # ... and they are the weights Hugging Face's GPT-2 computes.
    with torch.no_grad():
        output = hf_model(torch.tensor([ids]), output_attentions=True)
    np.testing.assert_allclose(weights, output.attentions[layer][0].numpy(), atol=1e-5)


def test_writes_one_heat_map_per_head(checkpoint, tmp_path: Path, capsys) -> None:
    directory, _ = checkpoint
    out = tmp_path / "maps" / "attention.svg"
    argv = ["--weights", str(directory), "--prompt", PROMPT, "--layer", "1", "--out", str(out)]
    assert attention_map.main(argv) == 0, capsys.readouterr().err
    root = ElementTree.fromstring(out.read_bytes())  # well-formed XML
    assert root.tag == f"{SVG}svg"
    panels = [g for g in root.iter(f"{SVG}g") if g.get("class") == "head"]
    assert len(panels) == SIZES["n_head"]
    labels = {t.text for t in root.iter(f"{SVG}text")}
    assert "\u2423the" in labels, "token labels missing (a space shows as \u2423)"


def fails_with_one_line(argv: list[str], capsys) -> str:
    status = attention_map.main(argv)
    err = capsys.readouterr().err.strip()
    assert status != 0
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_runs_on_the_cpu_where_max_would_use_a_gpu(checkpoint, tmp_path: Path, monkeypatch) -> None:
    """Step 13's model on the CPU, also where MAX would default to a GPU (a CPU
    object of its own stands in for it): there MAX would make its parameters
    bfloat16, and the float32 checkpoint would not load."""
    from max.experimental.tensor import default_device

    directory, _ = checkpoint
    devices = tutorial_model_devices(monkeypatch)
    argv = ["--weights", str(directory), "--prompt", PROMPT, "--out", str(tmp_path / "a.svg")]
    with default_device(stand_in_device()):
        assert attention_map.main(argv) == 0
    assert devices == ["CPU"]


def test_missing_directory_is_one_line(tmp_path: Path, capsys) -> None:
    argv = ["--weights", str(tmp_path / "nowhere"), "--prompt", "hi", "--out", str(tmp_path / "a")]
    assert "no such directory" in fails_with_one_line(argv, capsys)


def test_missing_file_is_one_line(checkpoint, tmp_path: Path, capsys) -> None:
    directory, _ = checkpoint
    partial = tmp_path / "partial"
    partial.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(directory / name, partial / name)
    argv = ["--weights", str(partial), "--prompt", "hi", "--out", str(tmp_path / "a.svg")]
    assert "tokenizer.json" in fails_with_one_line(argv, capsys)


def test_layer_out_of_range_is_one_line(checkpoint, tmp_path: Path, capsys) -> None:
    directory, _ = checkpoint
    argv = ["--weights", str(directory), "--prompt", "hi", "--layer", "2"]
    assert "--layer 2" in fails_with_one_line([*argv, "--out", str(tmp_path / "a.svg")], capsys)
