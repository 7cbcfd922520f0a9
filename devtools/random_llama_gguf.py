"""A GGUF file of random weights at a real Llama-family model's shapes, for
the Llama bench (`python -m devtools.bench.llama --gguf FILE`).

    python -m devtools.random_llama_gguf qwen2.5-0.5b OUT.gguf [--type q4_1|q4_0|q8_0|f32]

SmolLM2-135M is the one trained model the project reaches offline; a model
several times its size answers what the bench cannot answer on it: how the
fast path and llama.cpp compare when the head and the layers' matrices are
larger. Random weights decode as fast as trained ones (the kernels read every
byte whatever it holds), so the file needs only the shapes: matrices drawn
from N(0, 0.02), norms of ones, Qwen2's q, k and v biases, Llama 3's rotary
factors (rope_freqs.weight) as llama.cpp's converter writes them, and a
byte-level vocabulary of the model's size (llama_peer.vocabulary) with
ChatML's control tokens and chat template. A file named `NAME.Q4_1.gguf`
is the bench's "q4_1", and llama.cpp's quantizer makes its other types.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common.cli import ArgumentParser, Failure, UsageError, exit_status

TYPES = ("q4_1", "q4_0", "q8_0", "f32")
CONTROL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # the vocabulary's last ids
# ChatML, as SmolLM2's and Qwen2's files hold it.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class Shape:
    architecture: str  # general.architecture: "llama" or "qwen2" (q, k and v biases)
    hidden: int
    inner: int
    heads: int
    kv_heads: int
    layers: int
    vocab: int
    theta: float
    pre: str  # tokenizer.ggml.pre: how the model's tokenizer splits words
    llama3: tuple[float, float, float, int] | None = None  # factor, low, high, original context


SHAPES = {
    "smollm2-360m": Shape("llama", 960, 2560, 15, 5, 32, 49152, 1e5, "smollm"),
    "qwen2.5-0.5b": Shape("qwen2", 896, 4864, 14, 2, 24, 151936, 1e6, "qwen2"),
    "llama-3.2-1b": Shape(
        "llama", 2048, 8192, 32, 8, 16, 128256, 5e5, "llama-bpe", llama3=(32.0, 1.0, 4.0, 8192)
    ),
}


def llama3_factors(
    head_dim: int, theta: float, factor: float, low: float, high: float, original: int
) -> np.ndarray:
    """llama.cpp's converter's rope_freqs.weight for Llama 3's scaling: each
    rotary frequency's divisor, 1 for wavelengths under original / high,
    `factor` over original / low, and between them a blend."""
    divisors = []
    for i in range(0, head_dim, 2):
        wavelength = 2 * math.pi * theta ** (i / head_dim)
        if wavelength < original / high:
            divisors.append(1.0)
        elif wavelength > original / low:
            divisors.append(factor)
        else:
            smooth = (original / wavelength - low) / (high - low)
            divisors.append(1 / ((1 - smooth) / factor + smooth))
    return np.asarray(divisors, dtype=np.float32)


def random_tensors(shape: Shape, seed: int = 0) -> Iterator[tuple[str, np.ndarray]]:
    """The model's tensors by llama.cpp's names, drawn one at a time."""
    rng = np.random.default_rng(seed)
    head_dim = shape.hidden // shape.heads
    kv = shape.kv_heads * head_dim

    def matrix(rows: int, cols: int) -> np.ndarray:
        return rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(0.02)

    yield "token_embd.weight", matrix(shape.vocab, shape.hidden)  # the head, tied
    yield "output_norm.weight", np.ones(shape.hidden, np.float32)
    if shape.llama3:
        yield "rope_freqs.weight", llama3_factors(head_dim, shape.theta, *shape.llama3)
    for layer in range(shape.layers):
        blk = f"blk.{layer}"
        yield f"{blk}.attn_norm.weight", np.ones(shape.hidden, np.float32)
        for name, rows in (("attn_q", shape.hidden), ("attn_k", kv), ("attn_v", kv)):
            yield f"{blk}.{name}.weight", matrix(rows, shape.hidden)
            if shape.architecture == "qwen2":
                yield f"{blk}.{name}.bias", matrix(1, rows)[0]
        yield f"{blk}.attn_output.weight", matrix(shape.hidden, shape.hidden)
        yield f"{blk}.ffn_norm.weight", np.ones(shape.hidden, np.float32)
        yield f"{blk}.ffn_gate.weight", matrix(shape.inner, shape.hidden)
        yield f"{blk}.ffn_up.weight", matrix(shape.inner, shape.hidden)
        yield f"{blk}.ffn_down.weight", matrix(shape.hidden, shape.inner)


def write_random(path: Path, shape: Shape, kind: str = "q4_1") -> Path:
    """Write a random model of `shape` to `path`, its matrices in `kind`."""
    import gguf

    from devtools import llama_peer

    writer = gguf.GGUFWriter(str(path), shape.architecture)
    writer.add_context_length(4096)
    writer.add_embedding_length(shape.hidden)
    writer.add_feed_forward_length(shape.inner)
    writer.add_block_count(shape.layers)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_freq_base(shape.theta)
    writer.add_layer_norm_rms_eps(1e-6)
    tokens, merges = llama_peer.vocabulary(shape.vocab - len(CONTROL_TOKENS) + 1)
    tokens = [*tokens[:-1], *CONTROL_TOKENS]
    normal = len(tokens) - len(CONTROL_TOKENS)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(shape.pre)
    writer.add_token_list(tokens)
    control = [gguf.TokenType.CONTROL] * len(CONTROL_TOKENS)
    writer.add_token_types([gguf.TokenType.NORMAL] * normal + control)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokens.index("<|endoftext|>"))
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_chat_template(CHAT_TEMPLATE)
    matrix_type = gguf.GGMLQuantizationType[kind.upper()]
    llama_peer.write_tensors(writer, random_tensors(shape), matrix_type)
    return path


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(prog="python -m devtools.random_llama_gguf", description=__doc__)
    parser.add_argument("model", help=f"whose shapes: {', '.join(SHAPES)}")
    parser.add_argument("out", type=Path, help="the GGUF file to write")
    parser.add_argument("--type", default="q4_1", help=f"the matrices' type: {', '.join(TYPES)}")
    args = parser.parse_args(argv)
    if args.model not in SHAPES:
        raise UsageError(f"no shapes for {args.model!r}: one of {', '.join(SHAPES)}.")
    if args.type not in TYPES:
        raise UsageError(f"--type takes {', '.join(TYPES)}, not {args.type!r}.")
    if not args.out.parent.is_dir():
        raise Failure(f"{args.out.parent} is not a folder to write {args.out.name} in.")
    return args


def run(argv: Sequence[str] | None) -> None:
    args = parse_args(argv)
    write_random(args.out, SHAPES[args.model], args.type)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.0f} MB)")


def main(argv: Sequence[str] | None = None) -> int:
    return exit_status(lambda: run(argv))


if __name__ == "__main__":
    sys.exit(main())
