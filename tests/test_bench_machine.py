"""devtools/bench/machine.py's name for the CPU under a benchmark: two 2-core
machines whose /proc/cpuinfo both say "AMD EPYC" differ several-fold in
speed, so a bare AMD model name carries its core, read from the cpu family
and model."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.bench import machine

CPUINFO = """processor\t: 0
vendor_id\t: {vendor}
cpu family\t: {family}
model\t\t: {model}
model name\t: {name}
flags\t\t: fpu avx2
"""


@pytest.mark.parametrize(
    ("vendor", "family", "model", "name", "said"),
    [
        ("AuthenticAMD", 25, 1, "AMD EPYC", "AMD EPYC (Zen 3)"),
        ("AuthenticAMD", 26, 2, "AMD EPYC", "AMD EPYC (Zen 5)"),
        ("AuthenticAMD", 25, 17, "AMD EPYC 9B14", "AMD EPYC 9B14 (Zen 4)"),
        ("AuthenticAMD", 99, 1, "AMD EPYC", "AMD EPYC"),  # a family not known yet
        ("AuthenticAMD", 26, 2, "AMD Ryzen (Zen 5)", "AMD Ryzen (Zen 5)"),
        ("GenuineIntel", 6, 143, "Intel Xeon Processor", "Intel Xeon Processor"),
    ],
)
def test_a_bare_amd_model_name_is_told_apart_by_its_core(
    monkeypatch, tmp_path: Path, vendor, family, model, name, said
) -> None:
    """Two 2-core "AMD EPYC" machines here differ several-fold in speed: the
    name the tables carry says which core (cpu family and model) ran them."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(CPUINFO.format(vendor=vendor, family=family, model=model, name=name))
    real_path = machine.Path
    monkeypatch.setattr(
        machine, "Path", lambda p: cpuinfo if p == "/proc/cpuinfo" else real_path(p)
    )
    assert machine.cpu_name() == said
    assert machine.cpu_flags() == {"fpu", "avx2"}
