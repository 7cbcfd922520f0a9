"""A GPT-2 checkpoint for the experiments that look at trained weights, found
without downloading anything (common/checkpoint.py reads and checks it):

- the directory in the GPT2_WEIGHTS environment variable, if it is set;
- else the hub's gpt2, if it is in the local Hugging Face cache (the learner's
  commands, such as `python -m tools.generate`, put it there);
- else none, and `tiny_random` writes a tiny random one to use instead.
"""

import os
import tempfile
from pathlib import Path

from common import checkpoint
from common.random_checkpoint import (
    hugging_face_layout,
    random_gpt2_weights,
    write_safetensors_checkpoint,
)
from solutions.solution_01 import GPT2Config

TINY = GPT2Config(vocab_size=300, n_positions=64, n_embd=64, n_layer=2, n_head=4)


def gpt2_directory() -> Path | None:
    """GPT2_WEIGHTS, else the hub's gpt2 from the local cache; None when neither is there."""
    if os.environ.get("GPT2_WEIGHTS"):
        return checkpoint.check_directory(Path(os.environ["GPT2_WEIGHTS"]))
    from huggingface_hub import snapshot_download

    try:
        cached = snapshot_download(
            checkpoint.DEFAULT_MODEL, allow_patterns=list(checkpoint.FILES), local_files_only=True
        )
    except Exception:  # not in the cache; the experiments never download
        return None
    return Path(cached) if checkpoint.missing(Path(cached)) is None else None


def tiny_random(text: str) -> Path:
    """A random 2-layer GPT-2 (TINY) with a tokenizer trained on `text` alone,
    written to the temporary folder: the same files as a real checkpoint."""
    from tokenizers.implementations import ByteLevelBPETokenizer

    directory = Path(tempfile.gettempdir()) / "max-gpt2-try-it" / "tiny-gpt2"
    directory.mkdir(parents=True, exist_ok=True)
    weights = random_gpt2_weights(TINY)
    tensors = hugging_face_layout(weights, prefix=False, head=False, buffers=False)
    write_safetensors_checkpoint(directory, TINY, tensors)
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(
        [text], vocab_size=TINY.vocab_size, min_frequency=1, show_progress=False
    )
    tokenizer.save(str(directory / checkpoint.TOKENIZER))
    return directory
