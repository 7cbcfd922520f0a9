"""Measuring: the interleaved rounds (measure), their samples summarized
with paired ratios (results_from), and the whole run: a checkpoint, the
contenders' worker processes, the rounds, the load and the ceiling
(run, measure_all)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Sequence

import numpy as np

from common.cli import UsageError, progress
from devtools.bench.contenders import OURS, Contender, ContenderProcess
from devtools.bench.machine import (
    LoadMonitor,
    ceiling_fractions,
    machine_line,
    paired_fractions,
    seconds_for,
    usable_cpus,
    wait_until_idle,
)
from devtools.bench.probe import READERS, ReadProbe
from devtools.bench.profile import (
    attention_profile,
    decode_graph_ops,
    projection_profile,
    rows_profile,
)
from devtools.bench.stats import paired_ratios, round_orders, summary

LENGTHS = (32, 128, 512)
PROMPT_LENGTH = 16
PREFILL_LENGTH = 512
GPT2_124M = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)


def measure(
    contenders: list[Contender],
    prompt: list[int],
    long_prompt: list[int],
    lengths: Sequence[int],
    repeats: int,
    log: Callable[[str], None] = print,
    settle: Callable[[], None] = lambda: None,
    probe: Callable[[], float] | None = None,
    sustained: Callable[[], float | None] | None = None,
) -> dict:
    """Interleaved rounds: tokens/s per contender and length, first-token
    latency (the short prompt, one token) and prefill throughput (the long
    prompt, one token), each a list of `repeats` samples. `settle` runs
    before each timed call (the workers' spinning threads); `probe`, if
    given, measures the memory bandwidth right before each decode (the
    machine's changes within seconds: one figure taken before the run is no
    ceiling, nor is one taken before the other contenders' decodes), kept
    by contender and length in `probe_before` so that each decode can be
    paired with the reading just before it; `sustained`, if given, returns
    the sustained read the probe's last call took (ReadProbe.last_sustained,
    None without one), kept in `sustained_before` alike."""
    by_key = {c.key: c for c in contenders}
    tokens_per_s = {c.key: {n: [] for n in lengths} for c in contenders}
    first_token = {c.key: [] for c in contenders}
    prefill = {c.key: [] for c in contenders}
    bandwidth: list[float] = []
    probe_before = {c.key: {n: [] for n in lengths} for c in contenders}
    sustained_before = {c.key: {n: [] for n in lengths} for c in contenders}
    for contender in contenders:  # warm-up: not timed
        contender.generate(prompt, 2)
        contender.generate(long_prompt, 1)
    for round_index, order in enumerate(round_orders([c.key for c in contenders], repeats)):
        for key in order:
            contender = by_key[key]
            settle()
            first_token[key].append(seconds_for(contender.generate, prompt, 1))
            settle()
            prefill[key].append(len(long_prompt) / seconds_for(contender.generate, long_prompt, 1))
        for n in lengths:
            for key in order:
                contender = by_key[key]
                if contender.max_length is not None and n > contender.max_length:
                    continue
                if probe is not None:
                    settle()
                    bandwidth.append(probe())
                    probe_before[key][n].append(bandwidth[-1])
                    reading = sustained() if sustained is not None else None
                    if reading is not None:
                        sustained_before[key][n].append(reading)
                settle()
                tokens_per_s[key][n].append(n / seconds_for(contender.generate, prompt, n))
        log(
            f"round {round_index + 1}/{repeats}: "
            + "; ".join(
                f"{key} "
                + " ".join(
                    f"{tokens_per_s[key][n][-1]:.1f}" for n in lengths if tokens_per_s[key][n]
                )
                for key in order
            )
            + " tok/s"
        )
    return dict(
        tokens_per_s=tokens_per_s,
        first_token=first_token,
        prefill=prefill,
        bandwidth=bandwidth,
        probe_before=probe_before,
        sustained_before=sustained_before,
    )


def sustained_results(
    args: argparse.Namespace, per_contender: dict, weight_count: int, raw: dict, sustained: list
) -> dict:
    """The sustained reads (--sustain-seconds): their spread, each decode's
    reading right before it, and each contender's fraction of that reading."""
    if not sustained:
        return {}
    largest = max(args.bandwidth_sizes)
    return dict(
        sustained_gb_s=dict(
            summary(sustained),
            method=f"{largest} MiB read on end for {args.sustain_seconds:g} s by each of "
            + " and ".join(READERS.values())
            + ", the faster, right before each decode and after the last",
        ),
        sustained_before={
            key: {str(n): gb_s for n, gb_s in by_length.items()}
            for key, by_length in raw["sustained_before"].items()
        },
        sustained_fraction=paired_fractions(per_contender, weight_count, raw["sustained_before"]),
    )


def results_from(
    contenders: list[Contender], raw: dict, lengths: Sequence[int], baselines: Sequence[str]
) -> tuple[dict, dict]:
    """Summaries per contender, and paired ratios of each of ours to each baseline."""
    per_contender = {}
    for c in contenders:
        per_contender[c.key] = dict(
            name=c.name,
            compile_s=c.compile_s,
            bytes_per_weight=c.bytes_per_weight,
            tokens_per_s={
                str(n): summary(raw["tokens_per_s"][c.key][n])
                for n in lengths
                if raw["tokens_per_s"][c.key][n]
            },
            first_token_s=summary(raw["first_token"][c.key]),
            prefill_tokens_per_s=summary(raw["prefill"][c.key]),
        )
    ratios = {}
    for c in contenders:
        if c.key in baselines:
            continue
        for base in baselines:
            ratios[f"{c.key}/{base}"] = {
                str(n): summary(
                    paired_ratios(raw["tokens_per_s"][c.key][n], raw["tokens_per_s"][base][n])
                )
                for n in lengths
                if raw["tokens_per_s"][c.key][n]
            }
    return per_contender, ratios


def families(args: argparse.Namespace) -> list[str]:
    """The worker families to start: PyTorch's, ours, and llama.cpp's when it
    is installed (said, with the command that installs it, when it is not)."""
    from devtools import llama_peer

    chosen = ["torch", "max"]
    if args.device == "gpu":
        return chosen
    reason = llama_peer.missing()
    if reason is None:
        chosen.insert(1, "llama")
    else:
        print(f"Without llama.cpp: {reason}", file=sys.stderr, flush=True)
    return chosen


def run(args: argparse.Namespace) -> dict:
    """The whole benchmark: a checkpoint of random weights, the contenders
    built from it in their worker processes, and every figure measured."""
    import torch

    from tests.fixtures import hf_model

    torch.set_num_threads(usable_cpus())
    lengths = tuple(args.lengths)
    config = dict(GPT2_124M, **(args.config or {}))
    rng = np.random.default_rng(0)
    prompt = rng.integers(0, config["vocab_size"], PROMPT_LENGTH).tolist()
    prefill_length = min(args.prefill_length, config["n_positions"] - 1)
    long_prompt = rng.integers(0, config["vocab_size"], prefill_length).tolist()
    if max(lengths) + PROMPT_LENGTH > config["n_positions"]:
        raise UsageError(
            f"--lengths up to {max(lengths)} + a {PROMPT_LENGTH}-token prompt exceed "
            f"the context ({config['n_positions']})."
        )
    hf = hf_model(**config)
    weight_count = sum(
        int(np.prod(p.shape)) for name, p in hf.named_parameters() if name != "lm_head.weight"
    )
    print(f"Load average before: {os.getloadavg()[0]:.2f} on {usable_cpus()} cores", flush=True)
    with progress("building the bandwidth probe's sum kernel"):
        probe = ReadProbe(args.bandwidth_sizes, args.bandwidth_repeats, args.sustain_seconds)
    print(f"Memory read bandwidth now: {probe():.1f} GB/s", flush=True)

    with tempfile.TemporaryDirectory() as directory:
        hf.save_pretrained(directory)
        del hf
        workers, contenders = start_contenders(args, directory)
    try:
        pids = [worker.process.pid for worker in workers]
        return measure_all(
            args, config, contenders, prompt, long_prompt, lengths, probe, weight_count, pids
        )
    finally:
        for worker in workers:
            worker.stop()


def start_contenders(
    args: argparse.Namespace, directory: str
) -> tuple[list[ContenderProcess], list[Contender]]:
    """A worker process per family (they build at the same time), and the
    contenders they built; every worker is stopped again if one fails."""
    workers: list[ContenderProcess] = []
    contenders: list[Contender] = []
    try:
        for family in families(args):
            workers.append(ContenderProcess(family, directory, args))
        for worker in workers:
            with progress(f"building {worker.family}'s contenders", note=worker.note):
                contenders += worker.contenders()
    except BaseException:
        for worker in workers:
            worker.stop()
        raise
    return workers, contenders


def measure_all(args, config, contenders, prompt, long_prompt, lengths, probe, weight_count, pids):
    """The rounds with the load watched and the bandwidth probed, then every
    figure the report and the JSON hold."""
    from fast import devices as fast_devices
    from fast import gpt2 as fast_gpt2

    device = args.device or fast_devices.default_device_name()
    print(f"Machine: {machine_line(device)}; device {device}, dtype {args.dtype}", flush=True)
    baselines = [c.key for c in contenders if not c.key.startswith(OURS)]
    prefill_length = len(long_prompt)
    for c in contenders:
        if c.compile_s is not None:
            print(f"compile {c.key}: {c.compile_s:.1f} s", flush=True)

    monitor = LoadMonitor(pids)
    readings_before, sustained_readings_before = len(probe.readings), len(probe.sustained)
    # The probe's own threads (MAX's, PyTorch's) spin a while after it, too.
    quiet = [*pids, os.getpid()]
    raw = measure(
        contenders,
        prompt,
        long_prompt,
        lengths,
        args.repeats,
        settle=lambda: wait_until_idle(quiet),
        probe=probe,
        sustained=probe.last_sustained,
    )
    wait_until_idle(quiet)
    raw["bandwidth"].append(probe())  # and once more after the last round
    readings = probe.readings[readings_before:]
    sustained = [max(reading.values()) for reading in probe.sustained[sustained_readings_before:]]
    load = monitor.finish()
    per_contender, ratios = results_from(contenders, raw, lengths, baselines)
    bandwidth = summary(raw["bandwidth"])
    ceiling = bandwidth["max"]
    bytes_per_weight = fast_gpt2.DTYPES[args.dtype].size_in_bytes
    return dict(
        machine=machine_line(device),
        device=device,
        dtype=args.dtype,
        config=config,
        batch=1,
        prompt_length=PROMPT_LENGTH,
        prefill_length=prefill_length,
        lengths=list(lengths),
        repeats=args.repeats,
        load=load,
        bandwidth_gb_s=dict(
            bandwidth,
            method=f"fastest of {args.bandwidth_repeats} reads of "
            + " and ".join(f"{size} MiB" for size in args.bandwidth_sizes)
            + " on every core by each of "
            + " and ".join(READERS.values())
            + ", right before each decode and after the last",
        ),
        bandwidth_by_reader={
            reader: summary([reading[reader] for reading in readings]) for reader in READERS
        },
        ceiling_gb_s=ceiling,
        weight_count=weight_count,
        weight_bytes=weight_count * bytes_per_weight,
        roofline_tokens_per_s=ceiling * 1e9 / (weight_count * bytes_per_weight),
        ceiling_fraction=ceiling_fractions(per_contender, weight_count, ceiling),
        probe_before={
            key: {str(n): gb_s for n, gb_s in by_length.items()}
            for key, by_length in raw["probe_before"].items()
        },
        probe_fraction=paired_fractions(per_contender, weight_count, raw["probe_before"]),
        **sustained_results(args, per_contender, weight_count, raw, sustained),
        contenders=per_contender,
        ratios=ratios,
        decode_ops=decode_graph_ops(config, use_kernels=device == "cpu"),
        projection=projection_profile(config, args.dtype) if args.profile else None,
        rows=rows_profile(config, args.dtype) if args.profile else None,
        rows_second=(
            rows_profile(config, args.dtype, second_projection=True) if args.profile else None
        ),
        attention=attention_profile(config, args.dtype)
        if args.profile and device == "cpu"
        else None,
    )
