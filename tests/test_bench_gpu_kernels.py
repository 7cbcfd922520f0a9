"""devtools/bench/gpu_kernels.py: the summary of a GPU decode's kernels
from Nsight Compute's trace (the trace itself needs a GPU and ncu; these
read made-up traces and the book's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.cli import UsageError
from common.steps import REPO
from devtools.bench import gpu_kernels
from tests.fixtures import run_tool
from tests.test_bench import TINY


def _ncu_csv(path: Path, names: list[str], microseconds: list[float], unit: str = "us") -> Path:
    """A file shaped like `ncu --csv --page raw`: header, units, a row per kernel."""
    header = ["ID", "Process ID", "Kernel Name", "gpu__time_duration.sum"]
    rows = [header, ["", "", "", unit]]
    rows += [
        [str(i), "1", n, f"{t:,.3f}"]
        for i, (n, t) in enumerate(zip(names, microseconds, strict=True))
    ]
    path.write_text("".join(",".join(f'"{cell}"' for cell in row) + "\n" for row in rows))
    return path


def test_the_gpu_trace_summary_finds_a_tokens_kernels(tmp_path: Path) -> None:
    prefill = ["range_1", "gather_2", "matmul_big", "norm_aaaaaaaa"]
    token = ["gather_2", "norm_0123abcd", "gemv_11112222", "add", "norm_89abcdef", "gemv_33334444"]
    times = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    names = prefill + token * 4
    csv = _ncu_csv(tmp_path / "k.csv", names, [9.0] * 4 + times * 3 + [t * 2 for t in times])
    kernels = gpu_kernels.read_kernels(csv)
    assert kernels[4] == ("gather_2", 1.0)
    assert gpu_kernels.token_period([n for n, _ in kernels]) == len(token)
    report = gpu_kernels.summarize(csv)
    # The last three tokens, one of them at twice the time: medians of the plain ones.
    assert "launches 6 kernels; they run for 21 us" in report
    assert "42, 21, 21 us" in report
    # Each specialization's hash is dropped: the two norms are one family.
    assert "| `norm` | 2 | 7.0 | 33% |" in report
    assert "| `gemv` | 2 | 9.0 | 43% |" in report
    assert report.index("`gemv`") < report.index("`norm`") < report.index("`add`")
    # nanoseconds are read as such
    ns = _ncu_csv(tmp_path / "ns.csv", names, [1000.0] * len(names), unit="nsecond")
    assert gpu_kernels.read_kernels(ns)[0] == ("range_1", 1.0)


def test_the_gpu_trace_summary_says_what_it_cannot_read(tmp_path: Path) -> None:
    not_ncu = tmp_path / "other.csv"
    not_ncu.write_text('"a","b"\n"1","2"\n')
    with pytest.raises(UsageError, match="no 'Kernel Name' column"):
        gpu_kernels.read_kernels(not_ncu)
    cycles = _ncu_csv(tmp_path / "cycles.csv", ["a"], [1.0], unit="cycle")
    with pytest.raises(UsageError, match="'cycle', not ns, us or ms"):
        gpu_kernels.read_kernels(cycles)
    with pytest.raises(UsageError, match="no sequence of kernels repeats"):
        gpu_kernels.token_period(["a", "b", "c", "d", "e", "f", "g"])
    result = run_tool(
        "devtools.bench.gpu_kernels", "summarize", str(tmp_path / "none.csv"), timeout=120
    )
    assert result.returncode == 2
    assert "none.csv is not a file" in result.stderr and "Traceback" not in result.stderr


def test_the_books_gpu_kernel_table_is_the_summary_of_its_trace() -> None:
    bench = REPO / "docs" / "src" / "bench"
    table = (bench / "gpu_kernels_bfloat16.md").read_text()
    assert table == gpu_kernels.summarize(bench / "gpu_kernels_bfloat16.csv") + "\n"


def test_the_traced_program_decodes_and_times_each_token() -> None:
    """`run` on the CPU with tiny shapes (on a GPU it is the same code):
    a prompt, then each token timed."""
    result = run_tool(
        "devtools.bench.gpu_kernels", "run", "--device", "cpu", "--tokens", "3",
        "--config", TINY, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    line = result.stdout.strip().splitlines()[-1]
    assert line.startswith("wall clock per token (ms): ")
    times = [float(ms) for ms in line.split(": ")[1].split()]
    assert len(times) == 3 and all(ms > 0 for ms in times)


@pytest.mark.parametrize("tokens", ["0", "49"])
def test_the_traced_program_refuses_tokens_past_the_context(tokens: str) -> None:
    result = run_tool(
        "devtools.bench.gpu_kernels", "run", "--device", "cpu", "--tokens", tokens,
        "--config", TINY, timeout=300,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--tokens must be 1 to 48" in result.stderr and "Traceback" not in result.stderr


def test_the_traced_program_says_when_there_is_no_gpu() -> None:
    from max.driver import accelerator_count

    if accelerator_count() > 0:
        pytest.skip("this machine has a GPU")
    result = run_tool(
        "devtools.bench.gpu_kernels", "run", "--tokens", "3", "--config", TINY, timeout=300
    )
    assert result.returncode == 2
    assert "MAX sees no accelerator" in result.stderr and "Traceback" not in result.stderr
