"""llama.cpp as a benchmark peer: the same GPT-2 weights, written to GGUF here,
decoded greedily through llama-cpp-python with every core.

    python -m devtools.llama_peer DIR OUT.gguf [--type f32|bf16|q8_0]

People who run small models on a CPU use llama.cpp, so it is the peer our
numbers have to hold against. Its package is an optional extra
(`pip install -e ".[peers]"`: it builds llama.cpp from source, about 7
CPU-minutes once); `missing()` says so when it is absent.

The conversion is ours rather than llama.cpp's `convert_hf_to_gguf.py` (which
the wheel does not install, and which refuses a tokenizer it does not know):
GPT-2's tensors under llama.cpp's names, the Conv1D projections transposed to
[out, in], norms and biases in float32, the matrices in the chosen type
(`gguf` quantizes q8_0 and rounds bfloat16 in NumPy). The vocabulary only has
to have the model's size and be a valid byte-level BPE table: the benchmark
feeds token ids, never text.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from common.cli import ArgumentParser, Failure, UsageError, exit_status
from devtools.bench.machine import usable_cpus

TYPES = ("f32", "bf16", "q8_0")
INSTALL = 'pip install -e ".[peers]"'
# Hugging Face GPT-2 name (after "transformer.") -> llama.cpp GGUF name.
BLOCK_NAMES = {
    "ln_1": "attn_norm",
    "attn.c_attn": "attn_qkv",
    "attn.c_proj": "attn_output",
    "ln_2": "ffn_norm",
    "mlp.c_fc": "ffn_up",
    "mlp.c_proj": "ffn_down",
}
TOP_NAMES = {"wte": "token_embd", "wpe": "position_embd", "ln_f": "output_norm"}
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def missing() -> str | None:
    """Why llama.cpp cannot run here, with the command that installs it; None if it can."""
    try:
        import gguf  # noqa: F401
        import llama_cpp  # noqa: F401
    except ImportError as error:
        return f"llama.cpp is not installed ({error.name}): `{INSTALL}` builds it (once)."
    return None


# -- GGUF ------------------------------------------------------------------------


def gguf_name(hf_name: str) -> str | None:
    """llama.cpp's name for a GPT-2 tensor; None for what it does not use
    (the attention's stored masks, a head tied to wte)."""
    name = hf_name.removeprefix("transformer.")
    if name.startswith("lm_head."):
        return "output." + name.split(".")[-1]
    if name.startswith("h."):
        _, layer, rest = name.split(".", 2)
        module, _, kind = rest.rpartition(".")
        if module not in BLOCK_NAMES:
            return None  # attn.bias / attn.masked_bias: causal masks, not weights
        return f"blk.{layer}.{BLOCK_NAMES[module]}.{kind}"
    module, _, kind = name.rpartition(".")
    return f"{TOP_NAMES[module]}.{kind}" if module in TOP_NAMES else None


def byte_alphabet() -> list[str]:
    """GPT-2's byte-level alphabet: one printable character per byte."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars, extra = [], 0
    for byte in range(256):
        if byte in printable:
            chars.append(chr(byte))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def vocabulary(size: int) -> tuple[list[str], list[str]]:
    """`size` distinct byte-level tokens (the last one GPT-2's end of text) and
    merges that build the two-character ones."""
    alphabet = byte_alphabet()
    tokens = list(alphabet[: min(size - 1, 256)])
    merges = []
    index = 0
    while len(tokens) < size - 1:
        first, second = alphabet[index // 256 % 256], alphabet[index % 256]
        tokens.append(first + second + ("" if index < 65536 else str(index)))
        if index < 65536:
            merges.append(f"{first} {second}")
        index += 1
    return tokens + ["<|endoftext|>"], merges


def tensors(directory: Path) -> Iterator[tuple[str, np.ndarray]]:
    from safetensors.numpy import load_file

    for hf_name, array in load_file(directory / "model.safetensors").items():
        name = gguf_name(hf_name)
        if name is None:
            continue
        array = array.astype(np.float32)
        if hf_name.endswith(CONV1D):
            array = np.ascontiguousarray(array.T)  # Conv1D's [in, out] -> [out, in]
        yield name, array


def write_gguf(directory: Path, out: Path, kind: str = "f32") -> Path:
    """Write the checkpoint in `directory` (config.json, model.safetensors) as
    a GGUF file llama.cpp loads, its matrices in `kind`."""
    import gguf

    if kind not in TYPES:
        raise ValueError(f"unknown GGUF type {kind!r}: one of {', '.join(TYPES)}")
    config = json.loads((directory / "config.json").read_text())
    n_embd = config["n_embd"]
    matrix_type = {
        "f32": gguf.GGMLQuantizationType.F32,
        "bf16": gguf.GGMLQuantizationType.BF16,
        "q8_0": gguf.GGMLQuantizationType.Q8_0,
    }[kind]
    file_type = {
        "f32": gguf.LlamaFileType.ALL_F32,
        "bf16": gguf.LlamaFileType.MOSTLY_BF16,
        "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    }[kind]
    writer = gguf.GGUFWriter(str(out), "gpt2")
    writer.add_name("gpt2")
    writer.add_context_length(config["n_positions"])
    writer.add_embedding_length(n_embd)
    writer.add_feed_forward_length(config.get("n_inner") or 4 * n_embd)
    writer.add_block_count(config["n_layer"])
    writer.add_head_count(config["n_head"])
    writer.add_layer_norm_eps(config.get("layer_norm_epsilon", 1e-5))
    writer.add_file_type(file_type)
    tokens, merges = vocabulary(config["vocab_size"])
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    types = [gguf.TokenType.NORMAL] * (len(tokens) - 1) + [gguf.TokenType.CONTROL]
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(len(tokens) - 1)
    writer.add_eos_token_id(len(tokens) - 1)
    write_tensors(writer, tensors(directory), matrix_type)
    return out


def write_tensors(writer, named_arrays: Iterable[tuple[str, np.ndarray]], matrix_type) -> None:
    """Add the tensors to a gguf.GGUFWriter, its matrices in `matrix_type`
    (a gguf.GGMLQuantizationType; the rest float32), and write the file."""
    import gguf

    for name, array in named_arrays:
        if array.ndim == 2 and matrix_type != gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, gguf.quants.quantize(array, matrix_type), raw_dtype=matrix_type)
        else:
            writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# -- decoding --------------------------------------------------------------------


class LlamaGenerator:
    """Greedy decoding with llama.cpp: `generate(prompt, n)` returns n token ids.

    The prompt goes through llama.cpp in one batch (its prefill), then one
    token at a time; the next token is the argmax of the last logits."""

    def __init__(self, path: Path, context: int, threads: int | None = None) -> None:
        import llama_cpp
        from llama_cpp import Llama

        threads = threads or usable_cpus()
        self.llm = Llama(
            model_path=str(path),
            n_ctx=context,
            n_batch=min(context, 512),
            n_ubatch=min(context, 512),
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=False,
            use_mmap=False,  # the weights in this process's memory, as the other contenders'
            verbose=False,
        )
        vocab = self.llm.n_vocab()
        # llama.cpp keeps the logits of each batch's last token; read them in place.
        self._last_logits = lambda: np.ctypeslib.as_array(
            llama_cpp.llama_get_logits_ith(self.llm.ctx, -1), shape=(vocab,)
        )

    def generate(self, prompt: list[int], count: int) -> list[int]:
        return list(self.stream(prompt, count))

    def stream(self, prompt: list[int], count: int) -> Iterator[int]:
        """The n tokens of `generate`, each yielded as soon as it is chosen
        (a benchmark times their arrivals)."""
        llm = self.llm
        llm.reset()
        llm.eval(prompt)
        for made in range(1, count + 1):
            token = int(np.argmax(self._last_logits()))
            yield token
            if made < count:
                llm.eval([token])


def crash_on(path: Path, context: int, seconds: float = 300) -> str | None:
    """Why llama.cpp cannot decode the GGUF file at `path` on this machine,
    or None when it can: a child process loads it and decodes two tokens, so
    that a crash inside llama.cpp (some of its CPU-specific kernels fault on
    some CPUs) costs that child, not the benchmark."""
    import signal
    import subprocess

    from common import max_runtime

    probe = (
        "import sys; from pathlib import Path; from devtools.llama_peer import LlamaGenerator; "
        f"LlamaGenerator(Path(sys.argv[1]), context={context}).generate([1, 2, 3], 2)"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe, str(path)],
            cwd=Path(__file__).resolve().parents[1],
            env=max_runtime.child_env(),
            capture_output=True,
            timeout=seconds,
        )
    except subprocess.TimeoutExpired:
        return f"decoding two tokens took over {seconds:.0f} s"
    if done.returncode == 0:
        return None
    if done.returncode < 0:
        return f"llama.cpp crashed on this CPU ({signal.Signals(-done.returncode).name})"
    return f"llama.cpp failed (exit status {done.returncode})"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(
        prog="python -m devtools.llama_peer", description=__doc__.splitlines()[0]
    )
    parser.add_argument("directory", type=Path, help="checkpoint: config.json, model.safetensors")
    parser.add_argument("out", type=Path, help="the GGUF file to write")
    parser.add_argument("--type", choices=TYPES, default="f32")
    return parser.parse_args(argv)


def convert(args: argparse.Namespace) -> None:
    for needed in ("config.json", "model.safetensors"):
        if not (args.directory / needed).is_file():
            raise UsageError(f"{args.directory / needed} does not exist.")
    try:
        import gguf  # noqa: F401
    except ImportError as error:
        raise Failure(f"the gguf package is missing: `{INSTALL}`.") from error
    write_gguf(args.directory, args.out, args.type)
    print(f"wrote {args.out} ({args.out.stat().st_size / 2**20:.1f} MiB, {args.type})")


def main(argv: list[str] | None = None) -> int:
    return exit_status(lambda: convert(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
