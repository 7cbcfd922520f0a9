"""What a checkpoint directory holds, and the one way the command lines find
one, check it and read its tokenizer (tools/generate.py, tools/serve.py,
tools/attention_map.py; devtools/serve_bench through tools.generate).

A checkpoint is what Hugging Face's `save_pretrained` writes: config.json (the
sizes, and `model_type`, the kind of model), the weights as model.safetensors,
and the tokenizer as tokenizer.json or as the older pair vocab.json +
merges.txt. It comes from a local directory (--weights) or from the hub, by
name, through the local Hugging Face cache. Every problem is a
`common.cli.Failure` of one line that names the file or the model and says
what to do.

- `resolve(weights, model, kinds)`: the directory a command runs on, checked.
- `check_directory(directory, kinds)`: that directory if it holds a whole
  checkpoint of one of the kinds the command runs (GPT-2 unless it says more).
- `hub_directory(model)`: the hub model's snapshot, cached or downloaded.
- `model_type(directory)`: the kind of model, read from config.json in this one place.
- `read_safetensors(path)`: every tensor of a weights file as float32 NumPy,
  bfloat16 included, without torch (step 23's loader; its page explains the format).
- `Tokenizer(directory)`: the one tokenizer loader (encode, decode).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from common.cli import Failure

DEFAULT_MODEL = "openai-community/gpt2"
CONFIG = "config.json"
WEIGHTS = "model.safetensors"
TOKENIZER = "tokenizer.json"
VOCAB, MERGES = "vocab.json", "merges.txt"
# A tokenizer is stored one of two ways, the first found wins: the `tokenizers`
# library's one file, or GPT-2's original vocabulary and merge list.
TOKENIZER_FORMS = ((TOKENIZER,), (VOCAB, MERGES))
# What a hub download fetches: everything a checkpoint may hold, nothing else
# (a hub repository also carries torch, TensorFlow and Flax copies of the weights).
FILES = (CONFIG, WEIGHTS, *(name for form in TOKENIZER_FORMS for name in form))
# The kinds of model (config.json's `model_type`) the command lines run: GPT-2
# everywhere, Llama-style models (Part II, step 23) in tools.generate. A
# checkpoint without the field is taken for GPT-2, as the tutorial's loader takes it.
GPT2 = "gpt2"
LLAMA = "llama"
MODEL_TYPES = (GPT2,)
NEEDS = (
    f"a checkpoint directory needs {CONFIG}, the weights as {WEIGHTS} and the tokenizer "
    f"as {TOKENIZER} (or {VOCAB} and {MERGES}), as save_pretrained writes them"
)


def first_line(error: BaseException) -> str:
    """An exception as one line of a message: its first line, or its type."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# -- what a directory holds ------------------------------------------------------


def tokenizer_files(directory: Path) -> tuple[Path, ...] | None:
    """The files of the directory's tokenizer, in the first form it holds whole."""
    for form in TOKENIZER_FORMS:
        paths = tuple(directory / name for name in form)
        if all(path.is_file() for path in paths):
            return paths
    return None


def missing(directory: Path) -> str | None:
    """What the directory lacks to be a checkpoint, as a message's start; None if nothing."""
    for name in (CONFIG, WEIGHTS):
        if not (directory / name).is_file():
            return f"{directory / name} does not exist"
    if tokenizer_files(directory) is None:
        return no_tokenizer(directory)
    return None


def no_tokenizer(directory: Path) -> str:
    return f"{directory / TOKENIZER} does not exist, nor {VOCAB} and {MERGES}"


def read_config(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Failure(f"{path} could not be read: {first_line(error)}") from None
    if not isinstance(config, dict):
        raise Failure(f"{path} is not a model configuration (a JSON object).")
    return config


def model_type(directory: Path) -> str:
    """config.json's `model_type`: which model the checkpoint is for."""
    return str(read_config(directory).get("model_type", GPT2))


def check_directory(directory: Path, kinds: Sequence[str] = MODEL_TYPES) -> Path:
    """`directory` if it holds a whole checkpoint of one of `kinds`, else a Failure."""
    if not directory.is_dir():
        raise Failure(f"--weights {directory}: no such directory.")
    lacking = missing(directory)
    if lacking:
        raise Failure(f"{lacking}: {NEEDS}.")
    kind = model_type(directory)
    if kind not in kinds:
        raise Failure(
            f"{directory / CONFIG} is for a {kind!r} model; this command runs "
            f"{' and '.join(repr(known) for known in kinds)} checkpoints."
        )
    return directory


# -- where a directory comes from -------------------------------------------------


def hub_directory(model: str) -> Path:
    """The hub model's snapshot directory: from the local Hugging Face cache when
    it holds a whole checkpoint, else downloaded (only the checkpoint's files)."""
    from huggingface_hub import snapshot_download

    try:
        cached = Path(snapshot_download(model, allow_patterns=list(FILES), local_files_only=True))
        if missing(cached) is None:
            return cached
    except Exception:  # not in the cache: the hub decides
        pass
    try:
        return Path(snapshot_download(model, allow_patterns=list(FILES)))
    except Exception as error:
        raise Failure(
            f"Could not get the weights of {model!r}: they are not in the local Hugging Face "
            f"cache, and downloading them from the Hugging Face hub failed ({first_line(error)}). "
            "If you are offline or behind a firewall, copy a GPT-2 checkpoint directory to this "
            f"machine and pass it with --weights DIR ({NEEDS})."
        ) from None


def resolve(
    weights: Path | None, model: str = DEFAULT_MODEL, kinds: Sequence[str] = MODEL_TYPES
) -> Path:
    """The checkpoint directory a command runs on: `weights` (--weights) when
    given, else the snapshot of the hub's `model` (--model); checked either way."""
    return check_directory(hub_directory(model) if weights is None else weights, kinds)


# -- the weights ----------------------------------------------------------------------

# The dtypes read_safetensors widens to float32; bfloat16 is read as the 16-bit
# integers it is stored as (NumPy has no bfloat16).
SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


# ANCHOR: read_safetensors
def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as float32 NumPy, bfloat16 included."""
    try:
        data = Path(path).read_bytes()
        (header_size,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + header_size])
    except (OSError, struct.error, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Failure(f"{path} could not be read: {first_line(error)}") from None
    body = memoryview(data)[8 + header_size :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] not in SAFETENSORS_DTYPES:
            raise Failure(f"{path}: tensor {name} is {entry['dtype']}; expected F32, F16 or BF16.")
        start, end = entry["data_offsets"]
        array = np.frombuffer(body[start:end], dtype=SAFETENSORS_DTYPES[entry["dtype"]])
        if entry["dtype"] == "BF16":  # the top 16 bits of a float32
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array.astype(np.float32).reshape(entry["shape"])
    return tensors


# ANCHOR_END: read_safetensors


# -- the tokenizer --------------------------------------------------------------------


class Tokenizer:
    """The checkpoint's byte-level BPE (GPT-2's kind) from the `tokenizers`
    library, read from tokenizer.json or else vocab.json + merges.txt: text in,
    ids out, and back."""

    def __init__(self, directory: Path) -> None:
        paths = tokenizer_files(directory)
        if paths is None:
            raise Failure(f"{no_tokenizer(directory)}: {NEEDS}.")
        try:
            self._tokenizer = read_tokenizer(paths)
        except Exception as error:  # the tokenizers library raises a bare Exception
            raise Failure(f"{paths[0]} could not be read: {first_line(error)}") from None

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text).ids

    def decode(self, ids: Sequence[int]) -> str:
        return self._tokenizer.decode(list(ids))


def read_tokenizer(paths: tuple[Path, ...]):
    """A `tokenizers` tokenizer from one of the TOKENIZER_FORMS."""
    from tokenizers import Tokenizer as LibraryTokenizer
    from tokenizers.implementations import ByteLevelBPETokenizer

    if len(paths) == 1:
        return LibraryTokenizer.from_file(str(paths[0]))
    vocab, merges = paths
    return ByteLevelBPETokenizer.from_file(str(vocab), str(merges))
