"""The contenders: what generates tokens for the benchmark (transformers in
float32 and bfloat16, our fast model and the tutorial's steps 16 and 17,
llama.cpp), and the worker processes each family of them runs in."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from common import max_runtime
from common.cli import Failure
from devtools.bench.machine import usable_cpus

BASELINE = "transformers"
OURS = ("fast", "step")  # keys of our contenders; every other one is a peer


@dataclass
class Contender:
    """Something that generates: `generate(prompt, n)` returns n token ids."""

    key: str
    name: str
    generate: Callable[[list[int], int], list[int]]
    compile_s: float | None = None
    max_length: int | None = None  # longer runs are skipped (quadratic models)
    bytes_per_weight: float = 4.0  # what one decoded token reads per weight


def transformers_contender(
    hf_model, key: str, name: str, device: str, bytes_per_weight: float = 4.0
) -> Contender:
    """transformers' greedy `generate` with `hf_model` on `device` (cpu or gpu)."""
    import torch

    torch_device = "cuda" if device == "gpu" else "cpu"
    hf_model = hf_model.to(torch_device)

    def generate(prompt: list[int], count: int) -> list[int]:
        ids = torch.tensor([prompt], device=torch_device)
        with torch.no_grad():
            out = hf_model.generate(
                ids, max_new_tokens=count, min_new_tokens=count, do_sample=False
            )
        if torch_device == "cuda":
            torch.cuda.synchronize()
        return out[0, len(prompt) :].tolist()

    return Contender(key, name, generate, bytes_per_weight=bytes_per_weight)


def torch_contenders(directory: Path, dtype: str, device: str | None) -> list[Contender]:
    """transformers on the checkpoint in `directory`: in float32 (the
    baseline), and in bfloat16 too when the run is in bfloat16."""
    import torch
    from transformers import GPT2LMHeadModel

    torch.set_num_threads(usable_cpus())
    device = device or ("gpu" if torch.cuda.is_available() else "cpu")
    model = GPT2LMHeadModel.from_pretrained(directory).eval()
    contenders = [
        transformers_contender(model, BASELINE, "transformers (PyTorch, float32)", device)
    ]
    if dtype == "bfloat16":
        model16 = GPT2LMHeadModel.from_pretrained(directory).eval().to(torch.bfloat16)
        contenders.append(
            transformers_contender(
                model16, "transformers-bf16", "transformers (PyTorch, bfloat16)", device, 2.0
            )
        )
    return contenders


def ours_contenders(directory: Path, dtype_name: str, device_name: str, no_cache_max: int):
    """The fast model (fast/gpt2.py), and on the CPU in float32 the
    tutorial's step 17 (compiled, KV cache) and step 16 (compiled, no cache)."""
    from fast import devices as fast_devices
    from fast import gpt2 as fast_gpt2

    device = fast_devices.device_from_name(device_name)
    dtype = fast_gpt2.DTYPES[dtype_name]
    contenders = []
    started = time.perf_counter()
    fast = fast_gpt2.FastGenerator(fast_gpt2.load(directory, dtype=dtype, device=device))
    contenders.append(
        Contender(
            "fast",
            f"ours, fast (fast/gpt2.py, {dtype_name})",
            lambda prompt, n: list(fast.generate(prompt, n)),
            time.perf_counter() - started,
            bytes_per_weight=2.0 if dtype_name == "bfloat16" else 4.0,
        )
    )
    if dtype_name == "float32" and device_name == "cpu":
        from solutions.solution_14 import generate_tokens
        from solutions.solution_15 import load_pretrained
        from solutions.solution_16 import compile_model
        from solutions.solution_17 import CachedGPT2LMHeadModel, compile_cached, generate_cached

        cached = load_pretrained(directory, CachedGPT2LMHeadModel)
        started = time.perf_counter()
        forward = compile_cached(cached)
        contenders.append(
            Contender(
                "step17",
                "ours, tutorial step 17 (compiled, KV cache)",
                lambda prompt, n: list(generate_cached(forward, cached.config, prompt, n)),
                time.perf_counter() - started,
            )
        )
        if no_cache_max > 0:
            plain = load_pretrained(directory)
            started = time.perf_counter()
            compiled = compile_model(plain)
            contenders.append(
                Contender(
                    "step16",
                    "ours, tutorial step 16 (compiled, no cache)",
                    lambda prompt, n: list(generate_tokens(compiled, prompt, n)),
                    time.perf_counter() - started,
                    max_length=no_cache_max,
                )
            )
    return contenders


def llama_contenders(directory: Path, dtype: str) -> list[Contender]:
    """llama.cpp on the same weights: float32, and with bfloat16 weights its
    bf16 and (one byte a weight, a different trade of accuracy) q8_0."""
    from devtools import llama_peer

    config = json.loads((directory / "config.json").read_text())
    kinds = ["f32"] if dtype == "float32" else ["bf16", "q8_0"]
    bytes_per_weight = {"f32": 4.0, "bf16": 2.0, "q8_0": 34 / 32}  # q8_0: 32 int8 + a scale
    contenders = []
    for kind in kinds:
        path = llama_peer.write_gguf(directory, directory / f"model-{kind}.gguf", kind)
        crash = llama_peer.crash_on(path, config["n_positions"])
        if crash:
            print(f"llama.cpp ({kind}) is left out: {crash}.", file=sys.stderr, flush=True)
            continue
        generator = llama_peer.LlamaGenerator(path, context=config["n_positions"])
        label = f"llama.cpp ({kind}{', 8-bit weights' if kind == 'q8_0' else ''})"
        contenders.append(
            Contender(
                f"llama.cpp-{kind}",
                label,
                generator.generate,
                bytes_per_weight=bytes_per_weight[kind],
            )
        )
    return contenders


# --- each family of contenders in its own process ------------------------------
#
# MAX and PyTorch each keep a pool of worker threads, one per core, that keep
# spinning for a while after their work is done, waiting for more. In one
# process the two pools fight over the cores, and whichever side runs after
# the other can lose more than half its speed.
# So PyTorch's contenders and ours run in two worker processes, started
# before MAX is loaded (MAX's runtime rewrites the environment a child
# inherits); the rounds alternate between them, and only one works at a time.


def _contender_child(
    connection, family: str, directory: str, dtype: str, device: str | None, extra: dict
):
    """The child side of a ContenderProcess (a spawned process imports it
    from here): builds one family's contenders, then runs the generate
    requests it is sent until it is told to stop."""
    try:
        if family == "torch":
            contenders = torch_contenders(Path(directory), dtype, device)
        elif family == "llama":
            contenders = llama_contenders(Path(directory), dtype)
        else:
            max_runtime.prepare()
            from fast import devices as fast_devices

            device = device or fast_devices.default_device_name()
            contenders = ours_contenders(Path(directory), dtype, device, extra["no_cache_max"])
        by_key = {c.key: c for c in contenders}
        described = [
            (c.key, c.name, c.compile_s, c.max_length, c.bytes_per_weight) for c in contenders
        ]
        connection.send(("ready", described))
    except Exception as error:  # the parent reports it, cleanly
        connection.send(("error", f"{family} contenders could not be built: {error!r}"))
        return
    while True:
        request = connection.recv()
        if request[0] == "stop":
            return
        _, key, prompt, count = request
        try:
            connection.send(("ok", by_key[key].generate(prompt, count)))
        except Exception as error:
            connection.send(("error", f"{key} failed: {error!r}"))


class ContenderProcess:
    """The parent's handle on a worker process and the contenders it holds."""

    NOTES = {
        "max": "compiling MAX graphs: minutes on a machine's first run, seconds from MAX's cache",
        "llama": "writing GGUF files and loading them",
        "torch": "loading transformers",
    }

    def __init__(self, family: str, directory: str, args: argparse.Namespace) -> None:
        import multiprocessing

        self.family = family
        self.note = self.NOTES.get(family, "")
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        extra = dict(no_cache_max=args.no_cache_max)
        self.process = context.Process(
            target=_contender_child,
            args=(child, family, directory, args.dtype, args.device, extra),
            daemon=False,  # MAX compiles in processes of its own
        )
        self.process.start()

    def contenders(self) -> list[Contender]:
        status, payload = self.connection.recv()
        if status != "ready":
            raise Failure(payload)
        return [
            Contender(key, name, self._generator(key), compile_s, max_length, bytes_per_weight)
            for key, name, compile_s, max_length, bytes_per_weight in payload
        ]

    def _generator(self, key: str) -> Callable[[list[int], int], list[int]]:
        def generate(prompt: list[int], count: int) -> list[int]:
            self.connection.send(("generate", key, prompt, count))
            status, payload = self.connection.recv()
            if status != "ok":
                raise RuntimeError(payload)
            return payload

        return generate

    def stop(self) -> None:
        if self.process.is_alive():
            self.connection.send(("stop",))
            self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.kill()
