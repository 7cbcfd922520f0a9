"""devtools.bench.q8_kernel, step 30's kernel against step 27's path: its
report (the measuring compiles fifteen graphs, minutes of work: run by hand)."""

from __future__ import annotations


def test_q8_kernel_bench_reports_every_layer_and_contender() -> None:
    """devtools.bench.q8_kernel's table: a row per SmolLM2 layer, a column per
    contender and the kernel's speed-up (the measuring compiles fifteen
    graphs: run by hand, not here)."""
    from devtools.bench import q8_kernel

    summary = {"median": 20.0, "min": 10.0, "max": 30.0}
    speedup = {"median": 2.0, "min": 1.5, "max": 2.5}
    results = {name: {key: summary for key in q8_kernel.CONTENDERS} for name in q8_kernel.LAYERS}
    for result in results.values():
        result["speedup"] = speedup
    report = q8_kernel.format_report(
        dict(
            machine="Some CPU, 2 cores",
            load=dict(loadavg_before=[0.5], loadavg_after=[0.6], other_processes_cpu_fraction=0.0),
            rounds=1,
            repeats=1,
            compile_seconds=1.0,
            results=results,
        )
    )
    assert report.startswith("Machine: Some CPU, 2 cores.")
    for label in q8_kernel.CONTENDERS.values():
        assert f" {label} |" in report
    row = "| lm_head (576 -> 49152) | 20 (10-30) | 20 (10-30) | 20 (10-30) | 2.00x (1.50-2.50) |"
    assert row in report
