"""A Llama-family GGUF file served by `max serve` through fast/'s kernels.

    python -m tools.serve --gguf FILE

MAX imports this package (`--custom-architectures`) and reads ARCHITECTURES.
`python -m tools.serve --gguf` writes the folder MAX asks for (folder.py: a
config.json naming our architecture and the file's tokenizer in transformers'
files) and passes the file itself as MAX's `--weight-path`; the model
(model.py) reads the file with fast/llama.py and keeps each request's keys and
values in caches of its own.
"""

from .arch import ARCHITECTURE, llama_gguf_arch

ARCHITECTURES = [llama_gguf_arch]

__all__ = ["ARCHITECTURE", "ARCHITECTURES", "llama_gguf_arch"]
