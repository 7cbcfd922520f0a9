"""The same model in other block types, made by llama.cpp's own quantizer
from the bench's GGUF file and kept for the next run.

From the file as shipped (SmolLM2-135M-Instruct's is Q4_1) the quantizer
widens every tensor to float32 ("f32"); from that float32 file it makes Q8_0,
Q4_0 and bfloat16. Each variant thus comes from the same numbers, one
rounding away from them, as a user's `llama-quantize` would make it.

The files live in REPOSITORY/.bench_files (git ignores it), in a folder named
after the source file's name, size and modification time: a changed source
gets new variants, and a variant present is never made again. A variant is
written under a temporary name and renamed once complete, so a file under
its own name is a whole one.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from common.cli import Failure

REPOSITORY = Path(__file__).resolve().parents[2]
FOLDER = REPOSITORY / ".bench_files"
SOURCE = "source"  # the file as given, in the variants' list
# variant: (the one it is made from, llama.cpp's file type for it).
VARIANTS = {
    "f32": (SOURCE, "LLAMA_FTYPE_ALL_F32"),
    "q8_0": ("f32", "LLAMA_FTYPE_MOSTLY_Q8_0"),
    "q4_0": ("f32", "LLAMA_FTYPE_MOSTLY_Q4_0"),
    "bf16": ("f32", "LLAMA_FTYPE_MOSTLY_BF16"),
}
GGUF_MAGIC = b"GGUF"

# quantize(source, out, file_type): write `out`, `source` in llama.cpp's `file_type`.
Quantize = Callable[[Path, Path, str], None]


def source_name(path: Path) -> str:
    """The name --files gives the file as shipped: its block type from its
    name ("...Q4_1.gguf" -> "q4_1"), else "source"."""
    suffix = path.stem.rpartition(".")[2].lower()
    return suffix if suffix and suffix != path.stem.lower() else SOURCE


def known_names(source: Path) -> list[str]:
    """Every name --files takes for this source: its own, then the variants'."""
    return [source_name(source), *(name for name in VARIANTS if name != source_name(source))]


def variant_folder(source: Path, folder: Path = FOLDER) -> Path:
    """Where the variants of `source` as it is now are kept: a folder named by
    its name, size and modification time."""
    stat = source.stat()
    return folder / f"{source.stem}-{stat.st_size}-{stat.st_mtime_ns}"


def is_whole(path: Path) -> bool:
    """Whether `path` is a GGUF file made to the end (written under a
    temporary name, so one under its own name was renamed when complete)."""
    if not path.is_file():
        return False
    with open(path, "rb") as file:
        return file.read(4) == GGUF_MAGIC


def variant(source: Path, name: str, quantize: Quantize, folder: Path = FOLDER) -> Path:
    """The file of variant `name` of `source`: the one kept, or made now (and
    what it is made from, first) with `quantize`."""
    if name == source_name(source):
        return source
    made_from, file_type = VARIANTS[name]
    out = variant_folder(source, folder) / f"{name}.gguf"
    if is_whole(out):
        return out
    parent = source if made_from == SOURCE else variant(source, made_from, quantize, folder)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".gguf.partial")
    partial.unlink(missing_ok=True)
    quantize(parent, partial, file_type)
    if not is_whole(partial):
        partial.unlink(missing_ok=True)
        raise Failure(f"llama.cpp's quantizer made no GGUF file of {parent} as {name}")
    partial.replace(out)
    return out


def files(
    source: Path, names: Sequence[str], quantize: Quantize | None, folder: Path = FOLDER
) -> tuple[dict[str, Path], str | None]:
    """{name: path} of the files `names` asks for, and None; without a
    quantizer (None: llama.cpp is not installed), the source alone and why
    the rest are left out."""
    own = source_name(source)
    if quantize is None and any(name != own for name in names):
        return {own: source}, (
            "llama.cpp is not installed, so its quantizer made no other variant; "
            f"measured the file alone ({own})"
        )
    return {name: variant(source, name, quantize, folder) for name in names}, None


# -- llama.cpp's quantizer ---------------------------------------------------------


def llama_cpp_quantize() -> Quantize | None:
    """llama.cpp's quantizer through llama-cpp-python; None where it is not installed."""
    try:
        import llama_cpp
    except ImportError:
        return None

    def quantize(source: Path, out: Path, file_type: str) -> None:
        import ctypes

        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, file_type)
        params.allow_requantize = True  # the Q4_1 file's blocks, widened or not
        params.nthread = os.cpu_count() or 1
        with silenced_stderr():  # it logs each of the file's tensors
            status = llama_cpp.llama_model_quantize(
                str(source).encode(), str(out).encode(), ctypes.byref(params)
            )
        if status != 0:
            raise Failure(f"llama.cpp's quantizer failed on {source} (status {status})")

    return quantize


@contextlib.contextmanager
def silenced_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null meanwhile: llama.cpp writes there from C."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
