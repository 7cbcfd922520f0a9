"""common/checkpoint.py: what a checkpoint directory must hold, the one
tokenizer loader, hub names resolved through the cache, and the three command
lines (generate, serve, attention_map) finding a checkpoint the same way.

The checkpoints are written here with NumPy and safetensors; the hub is a
stand-in: nothing is downloaded.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from common import checkpoint
from common.checkpoint import Tokenizer
from common.cli import Failure
from common.random_checkpoint import (
    hugging_face_layout,
    random_gpt2_weights,
    write_safetensors_checkpoint,
)
from solutions.solution_01 import GPT2Config
from tests.fixtures import SENTENCES, write_tokenizer
from tools import attention_map, generate, serve

CONFIG = GPT2Config(vocab_size=300, n_positions=16, n_embd=16, n_layer=1, n_head=2)
TEXTS = [*SENTENCES[:4], "  Spaces,\ttabs\nand new lines  ", "naïve café, 東京 🙂", ""]


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small GPT-2 checkpoint with every file, tokenizer.json as its tokenizer."""
    directory = tmp_path_factory.mktemp("whole")
    weights = hugging_face_layout(
        random_gpt2_weights(CONFIG), prefix=False, head=False, buffers=False
    )
    write_safetensors_checkpoint(directory, CONFIG, weights)
    write_tokenizer(directory)
    return directory


def copy_without(source: Path, destination: Path, *left_out: str) -> Path:
    destination.mkdir()
    for path in source.iterdir():
        if path.name not in left_out:
            shutil.copy(path, destination / path.name)
    return destination


def with_vocab_and_merges(source: Path, destination: Path) -> Path:
    """The checkpoint with the same tokenizer stored as vocab.json + merges.txt."""
    from tokenizers import Tokenizer as LibraryTokenizer

    directory = copy_without(source, destination, checkpoint.TOKENIZER)
    LibraryTokenizer.from_file(str(source / checkpoint.TOKENIZER)).model.save(str(directory))
    assert checkpoint.tokenizer_files(directory) == (
        directory / checkpoint.VOCAB,
        directory / checkpoint.MERGES,
    )
    return directory


# -- which files, and the errors ------------------------------------------------------


def test_a_whole_checkpoint_passes(whole: Path) -> None:
    assert checkpoint.check_directory(whole) == whole
    assert checkpoint.model_type(whole) == checkpoint.GPT2


@pytest.mark.parametrize("name", [checkpoint.CONFIG, checkpoint.WEIGHTS, checkpoint.TOKENIZER])
def test_a_missing_file_is_named(whole: Path, tmp_path: Path, name: str) -> None:
    directory = copy_without(whole, tmp_path / "partial", name)
    with pytest.raises(Failure, match="does not exist") as error:
        checkpoint.check_directory(directory)
    message = str(error.value)
    assert message.startswith(str(directory / name)), message
    assert "save_pretrained" in message and "\n" not in message


def test_half_of_vocab_and_merges_is_no_tokenizer(whole: Path, tmp_path: Path) -> None:
    directory = with_vocab_and_merges(whole, tmp_path / "pair")
    checkpoint.check_directory(directory)
    (directory / checkpoint.MERGES).unlink()
    with pytest.raises(Failure, match="tokenizer.json does not exist, nor vocab.json and merges"):
        checkpoint.check_directory(directory)
    with pytest.raises(Failure, match="tokenizer.json does not exist, nor vocab.json and merges"):
        Tokenizer(directory)


def test_no_such_directory(tmp_path: Path) -> None:
    with pytest.raises(Failure, match="no such directory"):
        checkpoint.check_directory(tmp_path / "nowhere")


def test_another_kind_of_model_is_refused(whole: Path, tmp_path: Path) -> None:
    directory = copy_without(whole, tmp_path / "llama")
    config = directory / checkpoint.CONFIG
    config.write_text(config.read_text().replace('"gpt2"', '"llama"'))
    assert checkpoint.model_type(directory) == "llama"
    with pytest.raises(Failure, match="is for a 'llama' model; this command runs 'gpt2'"):
        checkpoint.check_directory(directory)
    assert checkpoint.check_directory(directory, (checkpoint.GPT2, checkpoint.LLAMA)) == directory
    config.write_text(config.read_text().replace('"llama"', '"qwen3"'))
    with pytest.raises(Failure, match="'qwen3' model; this command runs 'gpt2' and 'llama'"):
        checkpoint.check_directory(directory, (checkpoint.GPT2, checkpoint.LLAMA))


def test_a_broken_config_is_one_line(whole: Path, tmp_path: Path) -> None:
    directory = copy_without(whole, tmp_path / "broken")
    (directory / checkpoint.CONFIG).write_text("{not json")
    with pytest.raises(Failure, match="config.json could not be read"):
        checkpoint.check_directory(directory)


# -- the weights -------------------------------------------------------------------------


def test_safetensors_read_without_torch_equal_the_librarys(whole: Path) -> None:
    from safetensors.numpy import load_file

    path = whole / checkpoint.WEIGHTS
    ours, library = checkpoint.read_safetensors(path), load_file(str(path))
    assert ours.keys() == library.keys()
    for name, array in library.items():
        assert ours[name].dtype == np.float32 and np.array_equal(ours[name], array), name


def test_unreadable_weights_are_one_line(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(b"\x10\x00")
    with pytest.raises(Failure, match="cut.safetensors could not be read"):
        checkpoint.read_safetensors(cut)
    doubles = tmp_path / "doubles.safetensors"
    save_file({"w": np.zeros((2, 3), np.float64)}, str(doubles))
    with pytest.raises(Failure, match="tensor w is F64; expected F32, F16 or BF16"):
        checkpoint.read_safetensors(doubles)


# -- the tokenizer ----------------------------------------------------------------------


def test_vocab_and_merges_encode_like_tokenizer_json(whole: Path, tmp_path: Path) -> None:
    one_file = Tokenizer(whole)
    pair = Tokenizer(with_vocab_and_merges(whole, tmp_path / "pair"))
    for text in TEXTS:
        ids = one_file.encode(text)
        assert pair.encode(text) == ids, text
        assert pair.decode(ids) == one_file.decode(ids) == text
    assert len(one_file.encode(SENTENCES[0])) < len(SENTENCES[0].encode()), "no merges applied"


def test_an_unreadable_tokenizer_is_one_line(whole: Path, tmp_path: Path) -> None:
    directory = copy_without(whole, tmp_path / "bad", checkpoint.TOKENIZER)
    (directory / checkpoint.TOKENIZER).write_text("{}")
    with pytest.raises(Failure, match="tokenizer.json could not be read"):
        Tokenizer(directory)


# -- hub names ------------------------------------------------------------------------


class FakeHub:
    """huggingface_hub.snapshot_download without the network: `cached` answers
    local_files_only calls (None: not in the cache), `remote` the others."""

    def __init__(self, cached: Path | None, remote: Path | None) -> None:
        self.cached, self.remote, self.downloads = cached, remote, 0

    def __call__(self, model: str, *, allow_patterns, local_files_only: bool = False) -> str:
        assert set(allow_patterns) == set(checkpoint.FILES)
        if local_files_only:
            if self.cached is None:
                raise FileNotFoundError(f"{model} is not in the cache")
            return str(self.cached)
        self.downloads += 1
        if self.remote is None:
            raise ConnectionError("no network\nsecond line")
        return str(self.remote)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch):
    def install(cached: Path | None, remote: Path | None) -> FakeHub:
        fake = FakeHub(cached, remote)
        monkeypatch.setattr("huggingface_hub.snapshot_download", fake)
        return fake

    return install


def test_a_whole_cached_snapshot_is_not_downloaded(hub, whole: Path) -> None:
    fake = hub(cached=whole, remote=None)
    assert checkpoint.resolve(None, "someone/gpt2") == whole
    assert fake.downloads == 0


def test_a_partial_cached_snapshot_is_downloaded(hub, whole: Path, tmp_path: Path) -> None:
    fake = hub(cached=copy_without(whole, tmp_path / "partial", checkpoint.WEIGHTS), remote=whole)
    assert checkpoint.resolve(None, "someone/gpt2") == whole
    assert fake.downloads == 1


def test_no_cache_and_no_network_says_what_to_do(hub) -> None:
    hub(cached=None, remote=None)
    with pytest.raises(Failure) as error:
        checkpoint.resolve(None, "someone/gpt2")
    message = str(error.value)
    assert "'someone/gpt2'" in message and "(no network)" in message
    assert "offline" in message and "--weights DIR" in message and "\n" not in message


def test_given_weights_win_over_the_hub(hub, whole: Path) -> None:
    fake = hub(cached=None, remote=None)
    assert checkpoint.resolve(whole, "someone/gpt2") == whole
    assert fake.downloads == 0


# -- the three command lines find a checkpoint the same way -----------------------------


def failure_line(main, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def tool_errors(source: list[str], capsys, tmp_path: Path, *, hub: bool = False) -> set[str]:
    """The error lines of the tools for the same --weights (or --model, where
    `hub`: attention_map reads --weights only)."""
    out = str(tmp_path / "map.svg")
    runs = [(generate.main, [*source, "--prompt", "hi"]), (serve.main, source)]
    if not hub:
        runs.append((attention_map.main, [*source, "--prompt", "hi", "--out", out]))
    return {failure_line(main, argv, capsys) for main, argv in runs}


def test_the_tools_refuse_a_missing_directory_alike(tmp_path: Path, capsys) -> None:
    nowhere = tmp_path / "nowhere"
    errors = tool_errors(["--weights", str(nowhere)], capsys, tmp_path)
    assert errors == {f"error: --weights {nowhere}: no such directory."}


@pytest.mark.parametrize("name", [checkpoint.CONFIG, checkpoint.WEIGHTS, checkpoint.TOKENIZER])
def test_the_tools_refuse_a_partial_directory_alike(whole, tmp_path, capsys, name) -> None:
    directory = copy_without(whole, tmp_path / "partial", name)
    (error,) = tool_errors(["--weights", str(directory)], capsys, tmp_path)
    assert error.startswith(f"error: {directory / name} does not exist"), error


def test_generate_and_serve_resolve_a_hub_name_alike(hub, whole, tmp_path, capsys) -> None:
    # A hub model without safetensors weights: both name the snapshot's missing file.
    snapshot = copy_without(whole, tmp_path / "snapshot", checkpoint.WEIGHTS)
    hub(cached=snapshot, remote=snapshot)
    (error,) = tool_errors(["--model", "someone/gpt2"], capsys, tmp_path, hub=True)
    assert error.startswith(f"error: {snapshot / checkpoint.WEIGHTS} does not exist"), error
