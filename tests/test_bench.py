"""devtools/bench: the statistics and JSON layer (no timing assertions), and a
smoke run of the whole benchmark on a tiny model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from common import max_runtime
from common.steps import REPO
from devtools import llama_peer
from devtools.bench import machine, probe, profile
from devtools.bench.contenders import Contender
from devtools.bench.machine import ceiling_fractions, is_busy, paired_fractions
from devtools.bench.measuring import results_from
from devtools.bench.probe import READERS
from devtools.bench.reporting import (
    format_profile,
    format_report,
    output_suffix,
    over_ceiling,
    render,
)
from devtools.bench.stats import paired_ratios, round_orders, summary

TINY = '{"vocab_size": 300, "n_positions": 64, "n_embd": 64, "n_layer": 2, "n_head": 4}'


def test_summary_gives_median_spread_and_quartiles() -> None:
    stats = summary([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (stats["median"], stats["min"], stats["max"]) == (3.0, 1.0, 5.0)
    assert (stats["q1"], stats["q3"], stats["n"]) == (2.0, 4.0, 5)
    assert stats["samples"] == [5.0, 1.0, 3.0, 2.0, 4.0]  # in measurement order
    assert summary([7.0])["q1"] == summary([7.0])["q3"] == 7.0
    with pytest.raises(ValueError):
        summary([])


def test_rounds_rotate_so_no_contender_always_goes_first() -> None:
    orders = round_orders(["a", "b", "c"], 4)
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert all(sorted(order) == ["a", "b", "c"] for order in orders)


def test_ratios_are_paired_round_by_round() -> None:
    assert paired_ratios([10.0, 30.0], [5.0, 10.0]) == [2.0, 3.0]
    with pytest.raises(ValueError):
        paired_ratios([1.0], [1.0, 2.0])


def test_busy_uses_other_processes_cpu_when_known() -> None:
    assert is_busy(0.0, 0.5, 2) and not is_busy(9.0, 0.05, 2)
    assert is_busy(1.0, None, 2) and not is_busy(0.1, None, 2)


# GB/s the probe read right before each contender's decodes, round by round.
PROBE_BEFORE = {
    "transformers": {32: [25.0, 30.0, 27.5], 128: [30.0, 29.0, 31.0]},
    "fast": {32: [50.0, 30.0, 27.5], 128: [28.0, 29.0, 31.0]},
}

# ... and what a sustained read (--sustain-seconds) read right before them.
SUSTAINED_BEFORE = {
    "transformers": {32: [10.0, 12.0, 11.0], 128: [20.0, 20.0, 20.0]},
    "fast": {32: [25.0, 20.0, 22.0], 128: [20.0, 20.0, 20.0]},
}


def fake_data() -> dict:
    """What run() returns, with made-up samples: the report reads only this."""
    raw = dict(
        tokens_per_s={
            "transformers": {32: [10.0, 12.0, 11.0], 128: [9.0, 9.0, 9.0]},
            "fast": {32: [20.0, 18.0, 22.0], 128: [18.0, 18.0, 18.0]},
        },
        first_token={"transformers": [0.05] * 3, "fast": [0.04] * 3},
        prefill={"transformers": [900.0] * 3, "fast": [1500.0] * 3},
    )
    contenders = [
        Contender("transformers", "transformers (PyTorch, float32)", None),
        Contender("fast", "ours, fast", None, compile_s=3.0),
    ]
    per_contender, ratios = results_from(contenders, raw, (32, 128), ["transformers"])
    return dict(
        machine="test machine",
        device="cpu",
        dtype="float32",
        batch=1,
        prompt_length=16,
        prefill_length=512,
        lengths=[32, 128],
        repeats=3,
        load=dict(
            cores=2,
            loadavg_before=[0.1, 0, 0],
            loadavg_after=[0.2, 0, 0],
            other_processes_cpu_fraction=0.4,
            busy=True,
        ),
        bandwidth_gb_s=dict(summary([30.0, 31.0, 29.0]), method="best of 5"),
        bandwidth_by_reader=dict(
            torch=summary([30.0, 28.0, 29.0]), ours=summary([29.0, 31.0, 27.0])
        ),
        ceiling_gb_s=31.0,
        weight_count=125_000_000,
        weight_bytes=500_000_000,
        roofline_tokens_per_s=62.0,
        ceiling_fraction=ceiling_fractions(per_contender, 125_000_000, 31.0),
        probe_before={
            key: {str(n): gb_s for n, gb_s in by_length.items()}
            for key, by_length in PROBE_BEFORE.items()
        },
        probe_fraction=paired_fractions(per_contender, 125_000_000, PROBE_BEFORE),
        sustained_gb_s=dict(summary([25.0, 20.0, 22.0]), method="read on end"),
        sustained_before={
            key: {str(n): gb_s for n, gb_s in by_length.items()}
            for key, by_length in SUSTAINED_BEFORE.items()
        },
        sustained_fraction=paired_fractions(per_contender, 125_000_000, SUSTAINED_BEFORE),
        config=dict(n_layer=2),
        contenders=per_contender,
        ratios=ratios,
        decode_ops=dict(step17={"matmul": 5, "concat": 4}, fast={"matmul": 5, "mutable.load": 2}),
    )


def test_a_gpu_run_names_the_gpu_before_its_host(monkeypatch) -> None:
    monkeypatch.setattr(machine, "gpu_name", lambda: "Some GPU")
    host = machine.machine_line()
    assert "Some GPU" not in host
    assert machine.machine_line("gpu") == f"Some GPU on {host}"


def test_a_profiled_ways_figure_is_the_median_of_its_burst(monkeypatch) -> None:
    """One call of each first (MAX's logger, set aside); each round: a pause,
    the warm-up calls untimed, then the median of a burst, so one slow call
    (another library's threads still spinning) is not the round's figure."""
    calls = {"a": 0, "b": 0}
    timed = iter([9.0] + [0.001] * (profile.BURST - 1) + [0.002] * profile.BURST)

    def call(key: str):
        return lambda: calls.__setitem__(key, calls[key] + 1)

    monkeypatch.setattr(profile.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(profile, "seconds_for", lambda fn: (fn(), next(timed))[1])
    result = profile.interleaved_milliseconds({"a": call("a"), "b": call("b")}, repeats=1)
    assert calls == {
        "a": 1 + profile.WARM_CALLS + profile.BURST,
        "b": 1 + profile.WARM_CALLS + profile.BURST,
    }
    assert sorted(stats["median"] for stats in result.values()) == [1.0, 2.0]


def test_a_cpu_mask_gives_the_contenders_its_cores_and_the_report_says_so(monkeypatch) -> None:
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert machine.usable_cpus() == 2
    assert "2 of 16 cores (a CPU mask)" in machine.machine_line()
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: set(range(16)))
    assert ", 16 cores," in machine.machine_line()


def test_results_hold_paired_ratio_summaries() -> None:
    data = fake_data()
    ratio = data["ratios"]["fast/transformers"]["32"]
    assert ratio["samples"] == [2.0, 1.5, 2.0]
    assert (ratio["median"], ratio["min"], ratio["max"]) == (2.0, 1.5, 2.0)
    assert "transformers/transformers" not in data["ratios"]
    assert json.loads(json.dumps(data)) == data  # everything is JSON


def test_report_and_plot_come_from_the_data(tmp_path: Path) -> None:
    data = fake_data()
    report = render(data, tmp_path)
    assert "2.00x (1.50-2.00)" in report  # median ratio (min-max) at 32 tokens
    assert "busy machine" in report and "40%" in report
    assert "20.0 tok/s (18.0-22.0)" in report
    assert (tmp_path / "tokens_per_second.png").stat().st_size > 0
    assert json.loads((tmp_path / "results.json").read_text()) == data
    assert (tmp_path / "results.md").read_text() == report
    profile = (tmp_path / "profile.md").read_text()
    assert "| concat | 4 | 0 |" in profile and "| **total** | **9** | **7** |" in profile
    assert "| operation | step 17 | fast (our kernels) |" in profile


def test_the_profile_shows_both_mlp_projections_by_rows_when_timed() -> None:
    def by_rows(shape: list[int], kernel_ms: float) -> dict:
        ways = dict(max_matmul=4.0, torch_linear=2.0, our_kernel=kernel_ms)
        milliseconds = {"512": {key: summary([ms]) for key, ms in ways.items()}}
        return dict(shape=shape, dtype="bfloat16", milliseconds=milliseconds)

    data = dict(fake_data(), rows=by_rows([3072, 768], 1.0))
    assert "One projection (768 x 3072" not in format_profile(data)  # a run before it
    data["rows_second"] = by_rows([768, 3072], 2.5)
    profile_md = format_profile(data)
    assert "One projection (3072 x 768, bfloat16 weights)" in profile_md
    assert (
        "| 512 | 4.00 (4.00-4.00) | 2.00 (2.00-2.00) | 1.00 (1.00-1.00) | 4.00x | 2.00x |"
        in profile_md
    )
    assert "One projection (768 x 3072, bfloat16 weights)" in profile_md
    assert (
        "| 512 | 4.00 (4.00-4.00) | 2.00 (2.00-2.00) | 2.50 (2.50-2.50) | 1.60x | 0.80x |"
        in profile_md
    )


def test_the_profile_shows_a_prompts_attention_by_length_when_timed() -> None:
    ways = dict(max_ops=6.0, torch_sdpa=4.5, our_kernel=3.0)
    milliseconds = {"512": {key: summary([ms]) for key, ms in ways.items()}}
    attention = dict(heads=12, head_dim=64, dtype="bfloat16", milliseconds=milliseconds)
    assert "causal self-attention" not in format_profile(fake_data())  # a run before it
    profile_md = format_profile(dict(fake_data(), attention=attention))
    assert "causal self-attention alone (12 heads of 64)" in profile_md
    assert "`scaled_dot_product_attention` in bfloat16" in profile_md
    assert (
        "| prompt tokens | MAX's operations | PyTorch | our kernel "
        "| our kernel's speed-up over MAX's operations | our kernel's speed-up over PyTorch |"
        in profile_md
    )
    assert "| 512 | 6.00 (6.00-6.00) | 4.50 (4.50-4.50) | 3.00 (3.00-3.00) | 2.00x | 1.50x |" in (
        profile_md
    )
    # With bfloat16 weights the float32 kernel is timed beside the bfloat16 model's.
    for ways in milliseconds.values():
        ways["our_kernel_float32"] = summary([7.5])
    profile_md = format_profile(dict(fake_data(), attention=attention))
    assert (
        "| our kernel | our kernel, float32 | our kernel's speed-up over MAX's operations "
        "| our kernel's speed-up over PyTorch | our kernel's speed-up over our kernel, float32 |"
        in profile_md
    )
    assert "| 3.00 (3.00-3.00) | 7.50 (7.50-7.50) | 2.00x | 1.50x | 2.50x |" in profile_md


def test_each_contender_gets_its_fraction_of_the_ceiling() -> None:
    data = fake_data()
    # fast: 20 tok/s (its best median) x 125 M weights x 4 bytes = 10 GB/s of 31 GB/s
    assert data["ceiling_fraction"]["fast"] == pytest.approx(10 / 31)
    report = format_report(data)
    # ... of the fastest read right before each decode, and of the sustained read:
    # 10, 9 and 11 GB/s against 25, 20 and 22.
    assert "| ours, fast | 500 MB | 20.0 tok/s | 32% | 30% (20-40) | 45% (40-50) |" in report
    assert "(read on end; 22.0 GB/s (20.0-25.0) over the run)" in report
    assert not over_ceiling(data)
    # A run without sustained reads (--sustain-seconds 0, or older data) has no such column.
    for key in ("sustained_gb_s", "sustained_before", "sustained_fraction"):
        del data[key]
    report = format_report(data)
    assert "| ours, fast | 500 MB | 20.0 tok/s | 32% | 30% (20-40) |\n" in report
    assert "sustained" not in report
    # Each reader of the probe, so that a run shows which one set the ceiling.
    assert f"{READERS['torch']}, 29.0 GB/s (28.0-30.0)" in report
    assert f"{READERS['ours']}, 29.0 GB/s (27.0-31.0)" in report


def test_a_decode_is_paired_with_the_probe_of_its_own_round() -> None:
    """The fraction of the probe before it: each round's tokens/s at the best
    length (32 here) over what the probe read right before that decode, so
    that a round where the memory read slower does not count against the
    contender, nor a reading taken before another contender's decode."""
    data = fake_data()
    fast = data["probe_fraction"]["fast"]
    # 20, 18 and 22 tok/s x 500 MB = 10, 9 and 11 GB/s, against 50, 30, 27.5.
    assert fast["length"] == 32 and fast["samples"] == pytest.approx([0.2, 0.3, 0.4])
    transformers = data["probe_fraction"]["transformers"]
    # 5, 6 and 5.5 GB/s against 25, 30, 27.5: its own readings, not fast's.
    assert transformers["samples"] == pytest.approx([0.2, 0.2, 0.2])
    one_round = {key: {32: [25.0], 128: [30.0]} for key in PROBE_BEFORE}
    with pytest.raises(ValueError):  # a round without its reading
        paired_fractions(data["contenders"], 125_000_000, one_round)


@pytest.mark.parametrize("streams", [1, 3, 8])
@pytest.mark.parametrize("length", [5, 100_003])
def test_the_probes_sum_kernel_reads_every_value_once(streams: int, length: int) -> None:
    """Our sum kernel, in equal parts of whole vectors on every core and the
    rest at the end, adds every value once: small whole numbers, whose float32
    sums are exact, against numpy's (5 values: all of them the rest)."""
    import numpy as np
    from max.driver import Buffer

    max_runtime.prepare()
    values = (np.arange(length) % 5).astype(np.float32)
    (total,) = probe.sum_graph(streams).execute(Buffer.from_numpy(values))
    assert total.to_numpy()[0] == values.sum(dtype=np.float64)


def test_no_fraction_over_the_ceiling_is_printed() -> None:
    data = fake_data()
    data["ceiling_fraction"] = ceiling_fractions(data["contenders"], 125_000_000, 8.0)
    assert over_ceiling(data) == ["fast"]
    report = format_report(data)
    assert "No fractions of the ceiling are given" in report and "125%" in report
    # The round-by-round fractions stand: each is paired with its own reading.
    assert "| ours, fast | 500 MB | 20.0 tok/s | - | 30% (20-40) |" in report


def test_a_gpu_run_gives_no_fraction_of_the_hosts_ceiling(tmp_path: Path) -> None:
    data = dict(fake_data(), device="gpu")
    data["ceiling_fraction"] = ceiling_fractions(data["contenders"], 125_000_000, 8.0)
    report = format_report(data)
    assert "not the GPU" in report and "of the ceiling |" not in report
    assert not over_ceiling(data)  # the host's probe says nothing of the GPU: no warning
    render(data, tmp_path)  # the plot without the host's ceiling
    assert (tmp_path / "results_gpu_float32.md").read_text() == report
    assert (tmp_path / "tokens_per_second_gpu_float32.png").stat().st_size > 0
    # On a GPU the fast model's graph is MAX's operations, not our CPU kernels.
    profile = (tmp_path / "profile_gpu_float32.md").read_text()
    assert "| fast (MAX's operations) |" in profile


def test_each_device_and_dtype_has_files_of_its_own(tmp_path: Path) -> None:
    render(dict(fake_data(), dtype="bfloat16"), tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "profile_bfloat16.md",
        "results_bfloat16.json",
        "results_bfloat16.md",
        "tokens_per_second_bfloat16.png",
    ]
    assert output_suffix(dict(device="gpu", dtype="float32")) == "_gpu_float32"


def test_smoke_run_on_a_tiny_model(tmp_path: Path) -> None:
    """The whole benchmark, every contender, two short rounds: it runs and its
    JSON has every figure (the values are not asserted: they are timings)."""
    out = tmp_path / "out.json"
    result = subprocess.run(
        [sys.executable, "-m", "devtools.bench", "--config", TINY, "--lengths", "2", "4",
         "--repeats", "2", "--prefill-length", "32", "--no-cache-max", "2",
         "--bandwidth-repeats", "1", "--bandwidth-sizes", "16", "--sustain-seconds", "0.05",
         "--device", "cpu",
         "--out", str(tmp_path / "book"), "--json", str(out)],
        cwd=REPO, env=max_runtime.child_env(), capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(out.read_text())
    peers = {"llama.cpp-f32"} if llama_peer.missing() is None else set()
    assert set(data["contenders"]) == {"transformers", "fast", "step17", "step16"} | peers
    assert set(data["ratios"]["fast/transformers"]) == {"2", "4"}
    assert set(data["ratios"]["step16/transformers"]) == {"2"}  # capped by --no-cache-max
    for contender in data["contenders"].values():
        assert contender["first_token_s"]["n"] == 2
        assert contender["prefill_tokens_per_s"]["n"] == 2
    # The probe's readers, each right before each decode (a contender, a
    # length and a round each; step16 stops at 2) and after the last; the
    # ceiling is the fastest read of any.
    decodes = {key: {"2": 2, "4": 2} for key in data["contenders"]}
    decodes["step16"] = {"2": 2, "4": 0}
    readings = {
        key: {n: len(gb_s) for n, gb_s in by_length.items()}
        for key, by_length in data["probe_before"].items()
    }
    assert readings == decodes
    sustained = {
        key: {n: len(gb_s) for n, gb_s in by_length.items()}
        for key, by_length in data["sustained_before"].items()
    }
    assert sustained == decodes
    by_reader = data["bandwidth_by_reader"]
    probes = sum(sum(by_length.values()) for by_length in decodes.values()) + 1
    assert set(by_reader) == set(READERS) and all(r["n"] == probes for r in by_reader.values())
    assert data["sustained_gb_s"]["n"] == probes
    assert data["ceiling_gb_s"] == max(reader["max"] for reader in by_reader.values())
    assert set(data["probe_fraction"]) == set(data["contenders"])
    assert set(data["sustained_fraction"]) == set(data["contenders"])
    assert data["device"] == "cpu" and data["dtype"] == "float32"
    # Step 17 decodes with 6 matmuls per layer and the head; the fast model
    # with our kernels instead: one call for all the blocks (gpt2_decode_blocks),
    # and one for the head.
    n_layer = data["config"]["n_layer"]
    assert data["decode_ops"]["step17"]["matmul"] == 6 * n_layer + 1
    assert data["decode_ops"]["fast"]["custom"] == 2
    assert "matmul" not in data["decode_ops"]["fast"]
    assert (tmp_path / "book" / "results.md").read_text() in result.stdout


def test_mla_bench_reports_every_contender_and_length() -> None:
    """devtools.bench.mla's table: a row per attention with its cache bytes, a
    column per context length (the measuring itself compiles four graphs at
    DeepSeek-V2-Lite's sizes, minutes of work: run by hand, not here)."""
    from devtools.bench import mla

    bytes_per_token = mla.cache_bytes_per_token()
    # MLA caches the latent and the rotary key; MHA every head's key and value.
    assert bytes_per_token["absorbed"] == (512 + 64) * 4
    assert bytes_per_token["mha"] == 2 * 16 * 128 * 4
    summary = {"median": 2.0, "min": 1.0, "max": 3.0}
    report = mla.format_report(
        dict(
            machine="Some CPU, 2 cores",
            load=dict(loadavg_before=[0.5], loadavg_after=[0.6], other_processes_cpu_fraction=0.0),
            rounds=1,
            repeats=1,
            lengths=[16, 64],
            compile_seconds=1.0,
            cache_bytes=bytes_per_token,
            results={str(length): {key: summary for key in mla.CONTENDERS} for length in (16, 64)},
        )
    )
    assert report.startswith("Machine: Some CPU, 2 cores.")
    assert "| 16 cached: ms per token | 64 cached: ms per token |" in report
    for label in mla.CONTENDERS.values():
        assert f"| {label} |" in report
    assert "| 2,304 B | 2.0 (1.0-3.0) | 2.0 (1.0-3.0) |" in report


def test_the_op_count_leaves_out_what_does_no_work() -> None:
    """The fast model's decode graph on the CPU, one layer and three: the
    same operations (the blocks are one call whatever their number), though
    every block's vectors are reshaped for the call: a reshape of a weight
    is a view, no work once compiled, and not counted."""
    from devtools.bench.measuring import GPT2_124M

    one, three = (profile.decode_graph_ops({**GPT2_124M, "n_layer": n})["fast"] for n in (1, 3))
    assert one == three
    assert one["custom"] == 2


def test_a_sustained_read_reads_at_least_once_for_its_seconds() -> None:
    calls = []
    passes, seconds = probe.reads_for(lambda: calls.append(1), 0.0)
    assert passes == len(calls) == 1 and seconds >= 0
    passes, seconds = probe.reads_for(lambda: calls.append(1), 0.02)
    assert passes == len(calls) - 1 >= 1 and seconds >= 0.02


def test_the_probe_keeps_each_readers_sustained_read_when_asked() -> None:
    max_runtime.prepare()
    # The largest size given twice is still read on end once.
    sustaining = probe.ReadProbe((16, 8, 16), best_of=1, sustain_s=0.02)
    assert sustaining.last_sustained() is None  # nothing read yet
    sustaining()
    assert len(sustaining.readings) == len(sustaining.sustained) == 1  # the largest size only
    assert set(sustaining.sustained[0]) == set(READERS)
    assert all(gb_s > 0 for gb_s in sustaining.sustained[0].values())
    assert sustaining.last_sustained() == max(sustaining.sustained[0].values())
    short = probe.ReadProbe((8,), best_of=1)
    short()
    assert len(short.readings) == 1 and short.sustained == []
    assert short.last_sustained() is None
