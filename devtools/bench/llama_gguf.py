"""The Llama bench on real GGUF files (`python -m devtools.bench.llama --gguf`):
SmolLM2-135M-Instruct's own file, and the same model requantized by
llama.cpp's own quantizer (gguf_files.py), each decoded by step 23's model,
by transformers, by llama.cpp and by the other contenders below.

SmolLM2's file keeps its matrices in ggml's Q4_1 blocks and its token
embedding in Q8_0. Step 23's model and transformers widen a file's blocks
to float32 when they load and compute in float32; llama.cpp computes from
the blocks as stored, reading under a fifth of the bytes a token. All get
the same token ids (the file's chat template around one question) and
choose each next token greedily, with no stop token, so every run makes the
same number of tokens; besides, a 512-token prompt (a paragraph of text,
repeated) is timed to its first token. Each round runs every contender, in
an order that rotates from round to round; right before each decode, the
memory's read rate is probed (probe.py), so that a decode's tokens/s can be
set against what the memory allowed it then. The table gives medians and
min-max over the rounds, the reference's speed over each peer's, paired
round by round, and how many leading greedy tokens of each agree with the
reference's.
"""

from __future__ import annotations

import gc
import importlib.util
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from devtools.bench import gguf_files, machine, stats

QUESTION = "Explain why the sky is blue."
# The long prompt's text, repeated until it makes LONG_PROMPT tokens.
PARAGRAPH = (
    "Sunlight is a mixture of every colour. As it crosses the atmosphere, it meets "
    "molecules of nitrogen and oxygen far smaller than its wavelengths, and they "
    "scatter it in every direction: the shorter the wavelength, the more, as the "
    "inverse fourth power of the wavelength. Blue light is scattered several times "
    "more than red, so the whole sky glows blue, while the sun itself looks a little "
    "yellower than it is. At sunset the light crosses far more air, the blue is "
    "scattered away before it arrives, and the reds and oranges remain. "
)
LONG_PROMPT = 512  # tokens of the prompt timed to its first token
LENGTHS = (32, 128, 512)  # tokens decoded, by default
HEADLINE = 128  # the length the ratios and read rates of the table are given at
AGREEMENT_TOKENS = 32  # greedy tokens compared with the reference's
PROBE_MB = 256  # the probe's array: far beyond the caches
CONTENDERS = {
    "fast": "ours, fast/ (the file's blocks as stored, our kernels)",
    "ours": "ours, step 23 (compiled, KV cache, float32 widened from the file)",
    "step 27": "ours, step 23 with step 27's Q8Linear (Q8_0 blocks widened in the graph)",
    "step 30": "ours, step 23 with step 30's kernel (Q8_0 blocks read as they are)",
    "qmatmul": "MAX's qmatmul (step 23, its projections the file's blocks as stored)",
    "transformers": "transformers (PyTorch, float32 widened from the file)",
    "transformers bf16": "transformers (PyTorch, bfloat16 from the file)",
    "llama.cpp": "llama.cpp (llama-cpp-python, the file's blocks as stored)",
}
REFERENCE = "fast"  # the row the others' speeds are set against

# -- the file and the bytes a token reads ---------------------------------------------


def file_line(gguf) -> str:
    """The file's name, size and the block types of its tensors, from step
    29's GGUFFile (the file as read once for the model)."""
    path = Path(gguf.path)
    kinds = Counter(info.kind for info in gguf.tensors.values())
    counts = ", ".join(f"{count} {kind}" for kind, count in kinds.most_common())
    return f"`{path.name}` ({path.stat().st_size / 1e6:.0f} MB; its tensors: {counts})"


def is_projection(name: str) -> bool:
    """Whether GGUF tensor `name` is one of a layer's seven projections."""
    from devtools.bench.max_qmatmul import PROJECTIONS

    return name.startswith("blk.") and name.split(".")[-2] in PROJECTIONS


# How a contender holds each tensor: its block type, from the tensor's name and
# its block type in the file.
HOLDS: dict[str, Callable[[str, str], str]] = {
    "as stored": lambda name, kind: kind,
    "float32": lambda name, kind: "F32",
    "bfloat16": lambda name, kind: "BF16",
    "Q8_0 projections": lambda name, kind: "Q8_0" if is_projection(name) else "F32",
    "stored projections": lambda name, kind: kind if is_projection(name) else "F32",
}
HOLDS["as fast/ holds them"] = lambda name, kind: "Q8_0" if kind == "Q6_K" else kind
HELD_AS = {
    "fast": "as fast/ holds them",
    "ours": "float32",
    "step 27": "Q8_0 projections",
    "step 30": "Q8_0 projections",
    "qmatmul": "stored projections",
    "transformers": "float32",
    "transformers bf16": "bfloat16",
    "llama.cpp": "as stored",
}


def bytes_per_token(tensors: Mapping, holds: Callable[[str, str], str]) -> int:
    """The bytes of weights a decoded token reads: every tensor of the file
    (step 29's TensorInfos by name) in the block type `holds` gives it, but
    for the token embedding where the head is a tensor of its own (a token
    then reads one row of it; tied, it is the head, read whole)."""
    from common.ggml_blocks import BLOCK_FORMATS, Q6_K

    formats = {**BLOCK_FORMATS, "Q6_K": Q6_K}
    skipped = "token_embd.weight" if "output.weight" in tensors else None
    read = [
        (formats[holds(n, i.kind)], math.prod(i.shape)) for n, i in tensors.items() if n != skipped
    ]
    return sum(numbers // form.count * form.size for form, numbers in read)


# -- the contenders ---------------------------------------------------------------


def stamped(tokens: Iterator[int]) -> list[tuple[int, float]]:
    """Each token with the time (perf_counter) it arrived."""
    return [(token, time.perf_counter()) for token in tokens]


def transformers_tokenizer(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


def transformers_model(path: Path, dtype: str):
    """transformers' model read from the GGUF file, in `dtype` ("float32",
    "bfloat16"); it chooses greedily with no stop token, as the others do."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(machine.usable_cpus())
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=getattr(torch, dtype)
    ).eval()
    model.generation_config.eos_token_id = None
    return model


def chat_prompt(tokenizer) -> list[int]:
    """QUESTION in the file's chat template, ready for the answer."""
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], add_generation_prompt=True, tokenize=True
    )
    ids = ids["input_ids"] if isinstance(ids, Mapping) else ids
    return [int(token) for token in ids]


def long_prompt(tokenizer, length: int = LONG_PROMPT) -> list[int]:
    """PARAGRAPH, tokenized by the file's tokenizer, repeated to `length` tokens."""
    paragraph = [int(token) for token in tokenizer.encode(PARAGRAPH, add_special_tokens=False)]
    return (paragraph * (length // len(paragraph) + 1))[:length]


def llama_cpp(path: Path, context: int):
    """llama.cpp greedy on the file with every usable core (devtools/llama_peer.py);
    None and why, when it cannot run here."""
    from devtools import llama_peer

    reason = llama_peer.missing() or llama_peer.crash_on(path, context)
    if reason:
        return None, reason
    generator = llama_peer.LlamaGenerator(path, context=context)
    return lambda prompt, count: stamped(generator.stream(prompt, count)), None


def fast_contender(path: Path):
    """fast/'s Llama on the file, its blocks as stored; None and why where
    fast/llama.py is not in this tree or cannot load the file."""
    if importlib.util.find_spec("fast.llama") is None:
        return None, "fast/llama.py is not in this tree"
    from fast import llama as fast_llama
    from solutions.solution_29 import GGUFError

    try:
        generator = fast_llama.FastLlamaGenerator(fast_llama.load_gguf(path))
    except GGUFError as refused:
        return None, f"fast/llama.py refuses the file: {refused}"
    return lambda prompt, count: stamped(generator.generate(prompt, count)), None


def file_contenders(path: Path, gguf, wanted: Sequence[str], context: int):
    """The contenders in `wanted` that run on this file (step 29's GGUFFile
    of it): {key: run}, {key: why it is left out}, and what loading ours took."""
    from devtools.bench import llama as bench
    from devtools.bench import max_qmatmul
    from devtools.bench.q8_layers import q8_linear, with_q8_layers
    from solutions.solution_29 import load_gguf_llama

    runs, left_out, costs = {}, {}, {}
    if "fast" in wanted:
        runs["fast"], why = fast_contender(path)
        if why:
            left_out["fast"] = why
    if "ours" in wanted:
        started = time.perf_counter()
        model = load_gguf_llama(gguf)  # the file's weights widened
        costs["load_seconds"] = time.perf_counter() - started
        runs["ours"], costs["compile_seconds"] = bench.ours(model)
    for key in ("step 27", "step 30"):
        if key in wanted:
            runs[key] = bench.ours(with_q8_layers(load_gguf_llama(gguf), q8_linear(key)))[0]
    if "qmatmul" in wanted and max_qmatmul.unsupported(gguf) is None:
        model = max_qmatmul.with_quantized_layers(load_gguf_llama(gguf), gguf)
        runs["qmatmul"] = bench.ours(model)[0]
    if "transformers" in wanted:
        runs["transformers"] = bench.transformers_contender(transformers_model(path, "float32"))
    if "transformers bf16" in wanted and max_qmatmul.projection_kinds(gguf) == {"BF16"}:
        model = transformers_model(path, "bfloat16")
        runs["transformers bf16"] = bench.transformers_contender(model)
    if "llama.cpp" in wanted:
        runs["llama.cpp"], why = llama_cpp(path, context)
        if why:
            left_out["llama.cpp"] = why
    return {key: run for key, run in runs.items() if run is not None}, left_out, costs


# -- the rounds ---------------------------------------------------------------------


def interleaved_runs(
    contenders: dict,
    prompt: list[int],
    long: list[int],
    lengths: Sequence[int],
    rounds: int,
    probe: Callable[[], float],
    settle: Callable[[], None],
    sustained: Callable[[], float | None] | None = None,
) -> dict[str, dict]:
    """Each contender's runs, `rounds` rounds in rotating order after a
    warm-up: in each, the long prompt timed to its first token (prompt_tok_s),
    then each length decoded (runs[n], llama.timed_run's), each right after
    the probe's reading of the memory (probe_gb_s[n]) and, where `sustained`
    gives one, the sustained read that probe took (sustained_gb_s[n];
    ReadProbe.last_sustained). `settle` runs before each timed call: all run
    in this process, and the last one's thread pool has to stop spinning
    first, or the next would share the cores with it."""
    from devtools.bench.llama import timed_run

    for key, run in contenders.items():  # warm-up: the first call of each pays extra
        timed_run(key, run, prompt, 4)
        run(long, 1)
    samples = {
        key: dict(
            prompt_tok_s=[],
            runs={n: [] for n in lengths},
            probe_gb_s={n: [] for n in lengths},
            sustained_gb_s={n: [] for n in lengths},
        )
        for key in contenders
    }
    for order in stats.round_orders(list(contenders), rounds):
        for key in order:
            settle()
            started = time.perf_counter()
            arrived = contenders[key](long, 1)[0][1]
            samples[key]["prompt_tok_s"].append(len(long) / (arrived - started))
        for n in lengths:
            for key in order:
                settle()
                samples[key]["probe_gb_s"][n].append(probe())
                reading = sustained() if sustained is not None else None
                if reading is not None:
                    samples[key]["sustained_gb_s"][n].append(reading)
                settle()
                samples[key]["runs"][n].append(timed_run(key, contenders[key], prompt, n))
    return samples


def read_shares(tok_s: Sequence[float], gb_s: Sequence[float], bytes_read: int) -> list[float]:
    """Each run's bytes read a second (tokens/s times the bytes a token
    reads) over the memory's read rate probed right before it."""
    return [t * bytes_read / (g * 1e9) for t, g in zip(tok_s, gb_s, strict=True)]


def file_results(samples: dict, bytes_read: dict[str, int], reference: str = REFERENCE) -> dict:
    """The summaries of one file's samples (interleaved_runs'): each
    contender's speeds, the reference over each peer round by round, the
    share of the probed read rate (reads) and of the sustained read
    (sustained_reads, where the samples have them), and its greedy tokens
    against the reference's. Lengths become strings: the data is written as JSON."""

    def speeds(key: str, n: int) -> list[float]:
        return [run["decode_tok_s"] for run in samples[key]["runs"][n]]

    def shares(readings: str) -> dict:
        """Each contender's decodes over the `readings` right before them."""
        return {
            key: {
                str(n): stats.summary(
                    read_shares(speeds(key, n), sample[readings][n], bytes_read[key])
                )
                for n in lengths
            }
            for key, sample in samples.items()
        }

    lengths = list(next(iter(samples.values()))["runs"]) if samples else []
    longest = max(lengths, default=0)
    tokens = {key: sample["runs"][longest][0]["tokens"] for key, sample in samples.items()}
    peers = [key for key in samples if key != reference] if reference in samples else []
    window = min(AGREEMENT_TOKENS, longest)
    return dict(
        summaries={
            key: dict(
                decode_tok_s={str(n): stats.summary(speeds(key, n)) for n in lengths},
                first_token_ms=stats.summary(
                    [run["first_token_ms"] for n in lengths for run in sample["runs"][n]]
                ),
                prompt_tok_s=stats.summary(sample["prompt_tok_s"]),
            )
            for key, sample in samples.items()
        },
        ratios={
            peer: {
                str(n): stats.summary(stats.paired_ratios(speeds(reference, n), speeds(peer, n)))
                for n in lengths
            }
            for peer in peers
        },
        bytes_per_token=bytes_read,
        reads=shares("probe_gb_s"),
        **({"sustained_reads": shares("sustained_gb_s")} if sustained_in(samples) else {}),
        agreement={
            peer: dict(agree=leading_agreement(tokens[reference], tokens[peer], window), of=window)
            for peer in peers
        },
        tokens_made=tokens,
    )


def sustained_in(samples: dict) -> bool:
    """Whether every decode in `samples` has its sustained read (a run with
    the sustained reads switched off, or an older one, has none)."""
    return bool(samples) and all(
        "sustained_gb_s" in sample
        and all(len(sample["sustained_gb_s"][n]) == len(runs) for n, runs in sample["runs"].items())
        for sample in samples.values()
    )


def leading_agreement(ours: list[int], theirs: list[int], window: int) -> int:
    """How many of the first `window` tokens are the same before the first
    that differs (after it, each continues its own text)."""
    agree = 0
    for mine, other in zip(ours[:window], theirs[:window], strict=False):
        if mine != other:
            break
        agree += 1
    return agree


# -- the run ------------------------------------------------------------------------


def measure_file(
    name: str, path: Path, lengths: Sequence[int], rounds: int, probe, wanted: Sequence[str]
) -> dict:
    """One file's contenders through interleaved_runs, and their results."""
    from common.cli import progress
    from solutions.solution_29 import read_gguf

    gguf = read_gguf(path)  # step 29's reader, once for every use of the file
    line = file_line(gguf)  # the block types the quantizer really wrote
    print(f"{name}: {line}", file=sys.stderr, flush=True)
    tokenizer = transformers_tokenizer(path)
    prompt, long = chat_prompt(tokenizer), long_prompt(tokenizer)
    context = max(len(prompt) + max(lengths), len(long)) + 16
    with progress(f"loading and compiling the contenders on {path.name}"):
        contenders, left_out, costs = file_contenders(path, gguf, wanted, context)
    with progress(f"measuring on {path.name}, {rounds} round{'s' * (rounds > 1)}"):
        samples = interleaved_runs(
            contenders,
            prompt,
            long,
            lengths,
            rounds,
            probe,
            settle=lambda: machine.wait_until_idle([os.getpid()]),
            sustained=probe.last_sustained,
        )
    bytes_read = {key: bytes_per_token(gguf.tensors, HOLDS[HELD_AS[key]]) for key in contenders}
    results = file_results(samples, bytes_read)
    reference_tokens = results["tokens_made"].get(REFERENCE, [])
    return dict(
        name=name,
        file=line,
        prompt_tokens=len(prompt),
        left_out=left_out,
        answer=tokenizer.decode(reference_tokens[:AGREEMENT_TOKENS]),
        **costs,
        **results,
    )


def measure(
    path: Path,
    lengths: Sequence[int],
    rounds: int,
    names: Sequence[str] | None = None,
    wanted: Sequence[str] = tuple(CONTENDERS),
) -> dict:
    """Every file of `names` (gguf_files': the file as given and llama.cpp's
    variants of it) measured in turn, the contenders `wanted` on each."""
    from common.cli import progress
    from devtools.bench.probe import SUSTAIN_S, ReadProbe

    names = names or [gguf_files.source_name(path)]
    with progress("llama.cpp's quantizer making the files' variants (once)"):
        paths, files_left_out = gguf_files.files(path, names, gguf_files.llama_cpp_quantize())
    if files_left_out:
        print(files_left_out, file=sys.stderr, flush=True)
    with progress("building the memory read probe's sum kernel"):
        probe = ReadProbe((PROBE_MB,), best_of=3, sustain_s=SUSTAIN_S)
    monitor = machine.LoadMonitor()
    measured = []
    for name, file in paths.items():
        measured.append(measure_file(name, file, lengths, rounds, probe, wanted))
        gc.collect()  # this file's models go before the next file's load
    return dict(
        machine=machine.machine_line(),
        load=monitor.finish(),
        source=path.name,
        threads=machine.usable_cpus(),
        lengths=list(lengths),
        headline=headline(lengths),
        long_prompt_tokens=LONG_PROMPT,
        rounds=rounds,
        reference=REFERENCE,
        probe=stats.summary([max(reading.values()) for reading in probe.readings]),
        sustained=stats.summary([max(reading.values()) for reading in probe.sustained]),
        sustain_seconds=SUSTAIN_S,
        files=measured,
        files_left_out=files_left_out,
    )


def headline(lengths: Sequence[int]) -> int:
    """The length the table's ratios and read rates are given at: HEADLINE
    where it was decoded, else the longest."""
    return HEADLINE if HEADLINE in lengths else max(lengths)
