"""devtools/bench/standing.py and the book's benchmark tables: every table the
book includes is what the reporting code makes of the committed data, and
the table across machines draws each figure from the right run; the page
that shows them stays a reader's page, the tuning log kept beside the bench."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.cli import UsageError
from common.steps import REPO
from devtools.bench import standing
from devtools.bench.__main__ import book
from devtools.bench.contenders import Contender
from devtools.bench.machine import ceiling_fractions, paired_fractions
from devtools.bench.measuring import results_from
from devtools.bench.reporting import format_profile, format_report, output_suffix, publish
from devtools.bench.stats import summary

COMMITTED_RUNS = sorted(standing.BENCH.rglob("results*.json"))


@pytest.mark.parametrize("path", COMMITTED_RUNS, ids=lambda p: str(p.relative_to(standing.BENCH)))
def test_the_books_tables_are_what_the_report_makes_of_their_data(path: Path) -> None:
    data = json.loads(path.read_text())
    suffix = output_suffix(data)
    assert (path.parent / f"results{suffix}.md").read_text() == format_report(data)
    profile = path.parent / f"profile{suffix}.md"
    if profile.exists():  # the book includes the profile of some runs only
        assert profile.read_text() == format_profile(data)


def test_the_standing_table_is_drawn_from_the_committed_runs() -> None:
    assert COMMITTED_RUNS, "docs/src/bench holds no benchmark data"
    committed = standing.OUT.read_text()
    assert committed == standing.format_standing(standing.cpu_runs(standing.BENCH)), (
        "docs/src/bench/standing.md is stale: run `python -m devtools.bench.standing`"
    )


PERFORMANCE_PAGE = standing.BENCH.parent / "performance.md"
PAGE_LINES = 260  # what is measured, where the model stands, and why: no more
TUNING_LOG = REPO / "devtools" / "bench" / "TUNING_LOG.md"


def test_the_performance_page_stays_a_readers_page() -> None:
    """How each change was measured, what was tried and not kept, and earlier
    runs belong in devtools/bench/TUNING_LOG.md, which the page points to."""
    page = PERFORMANCE_PAGE.read_text(encoding="utf-8")
    lines = len(page.splitlines())
    assert lines <= PAGE_LINES, (
        f"docs/src/performance.md has {lines} lines (at most {PAGE_LINES}): "
        "move the tuning history into devtools/bench/TUNING_LOG.md"
    )
    assert TUNING_LOG.is_file() and TUNING_LOG.relative_to(REPO).as_posix() in page


def run_data(machine: str, dtype: str, device: str = "cpu") -> dict:
    """A benchmark run's data with made-up samples, three rounds, the fields
    the table reads: ours at 2x, 1x and 3x llama.cpp's speed round by round
    at 32 tokens, and prefills whose ratio, paired round by round, is 1.5x,
    4x and 0.25x (each sample sorted first, the pairs would give 1x, 1.5x, 1x)."""
    llama = standing.LLAMA_CPP[dtype]
    torch = standing.PYTORCH[dtype]
    raw = dict(
        tokens_per_s={
            "fast": {32: [40.0, 30.0, 90.0], 128: [40.0, 40.0, 40.0]},
            llama: {32: [20.0, 30.0, 30.0], 128: [50.0, 50.0, 50.0]},
            torch: {32: [10.0, 10.0, 10.0], 128: [10.0, 10.0, 10.0]},
        },
        first_token={key: [0.05] * 3 for key in ("fast", llama, torch)},
        prefill={"fast": [300.0, 400.0, 100.0], llama: [100.0] * 3, torch: [200.0, 100.0, 400.0]},
    )
    contenders = [Contender(key, key, None) for key in ("fast", llama, torch)]
    per_contender, ratios = results_from(contenders, raw, (32, 128), [llama, torch])
    before = {key: {32: [100.0] * 3, 128: [100.0] * 3} for key in per_contender}
    sustained = {key: {32: [80.0] * 3, 128: [80.0] * 3} for key in per_contender}
    # 1e8 weights of 4 bytes: 0.4 GB a token, so 40 tok/s read 16 GB/s.
    return dict(
        machine=f"{machine}, Python 3.13.0, max 26.7.0",
        device=device,
        dtype=dtype,
        lengths=[32, 128],
        prefill_length=512,
        bandwidth_gb_s=summary([30.0, 20.0, 40.0]),
        ceiling_fraction=ceiling_fractions(per_contender, 100_000_000, 40.0),
        probe_fraction=paired_fractions(per_contender, 100_000_000, before),
        sustained_fraction=paired_fractions(per_contender, 100_000_000, sustained),
        contenders=per_contender,
        ratios=ratios,
    )


def save(folder: Path, data: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"results{output_suffix(data)}.json").write_text(json.dumps(data))


def rows_of(table: str) -> dict[str, list[str]]:
    """{a row's label: its cells} of a Markdown table."""
    rows = {}
    for line in table.splitlines():
        if line.startswith("| ") and not line.startswith("| |"):
            label, *cells = (cell.strip() for cell in line.strip("|").split("|"))
            rows[label] = cells
    return rows


def test_a_column_per_machine_and_a_row_per_figure_and_dtype(tmp_path: Path) -> None:
    save(tmp_path, run_data("Machine A", "float32"))
    save(tmp_path / "b", run_data("Machine B", "bfloat16"))
    save(tmp_path / "b", run_data("Machine B", "float32", device="gpu"))  # not a CPU run
    table = standing.format_standing(standing.cpu_runs(tmp_path))
    assert "| | Machine A | Machine B |" in table
    rows = rows_of(table)
    # ours / llama.cpp: 32 tokens 2x, 1x, 3x (median 2x), 128 tokens 0.8x each round.
    assert rows["float32 decode: ours / llama.cpp, 32 / 128 tokens"] == [
        "2.00x / 0.80x (0.80-3.00)",
        "-",
    ]
    assert rows["bfloat16 decode: ours / llama.cpp, 32 / 128 tokens"] == [
        "-",
        "2.00x / 0.80x (0.80-3.00)",
    ]
    # Paired in round order: 300/200, 400/100, 100/400.
    assert rows["float32 prefill: ours / PyTorch, 512 tokens"][0] == (
        "300 / 200 tok/s, 1.50x (0.25-4.00)"
    )
    assert rows["float32 run: the memory's read rate, all probes"][0] == "30.0 GB/s (20.0-40.0)"


def test_a_share_of_the_read_rate_is_ours_then_llama_cpps(tmp_path: Path) -> None:
    data = run_data("Machine A", "bfloat16")
    data["ceiling_fraction"] = {"fast": 0.51, "llama.cpp-bf16": 0.48}
    data["probe_fraction"]["fast"] = dict(summary([0.57, 1.19, 0.83]), length=128)
    del data["sustained_fraction"]["llama.cpp-bf16"]  # a run without it
    save(tmp_path, data)
    rows = rows_of(standing.format_standing(standing.cpu_runs(tmp_path)))
    assert rows["bfloat16 decode, of the run's fastest read: ours / llama.cpp"] == ["51% / 48%"]
    probe = rows["bfloat16 decode, of the probe right before it: ours / llama.cpp"][0]
    assert probe.startswith("83% (57-119) / ")
    sustained = rows["bfloat16 decode, of the sustained read right before it: ours / llama.cpp"]
    assert sustained[0].endswith(" / -")


def test_a_run_over_other_lengths_says_its_own(tmp_path: Path) -> None:
    save(tmp_path, run_data("Machine A", "float32"))
    shorter = run_data("Machine B", "float32")
    shorter["lengths"], shorter["prefill_length"] = [32], 256
    save(tmp_path / "b", shorter)
    rows = rows_of(standing.format_standing(standing.cpu_runs(tmp_path)))
    assert rows["float32 decode: ours / llama.cpp, 32 / 128 tokens"] == [
        "2.00x / 0.80x (0.80-3.00)",
        "2.00x (1.00-3.00) at 32 tokens",
    ]
    prefill = rows["float32 prefill: ours / PyTorch, 512 tokens"]
    assert prefill[1].endswith(" at 256 tokens") and not prefill[0].endswith("tokens")


def test_a_file_that_is_not_a_runs_data_is_named(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text('{"machine": "Machine A"}')
    with pytest.raises(UsageError, match=r"results\.json is not a benchmark run's data"):
        standing.cpu_runs(tmp_path)


def test_two_runs_of_one_machine_and_dtype_are_refused(tmp_path: Path) -> None:
    save(tmp_path / "one", run_data("Machine A", "float32"))
    save(tmp_path / "two", run_data("Machine A", "float32"))
    with pytest.raises(UsageError, match="both float32 runs on Machine A"):
        standing.cpu_runs(tmp_path)


def test_the_bench_redraws_the_table_only_when_it_writes_the_books_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = json.loads((standing.BENCH / "results.json").read_text())
    book_folder, elsewhere = tmp_path / "book", tmp_path / "elsewhere"
    monkeypatch.setattr(standing, "BENCH", book_folder)
    monkeypatch.setattr(standing, "OUT", book_folder / "standing.md")
    book(real, elsewhere)
    assert not standing.OUT.exists()
    book(real, book_folder / "xeon")
    assert machine_column(standing.OUT.read_text()) == standing.machine_name(real)


def machine_column(table: str) -> str:
    header = next(line for line in table.splitlines() if line.startswith("| |"))
    return header.strip("|").split("|")[1].strip()


def test_a_table_written_to_a_new_folder_makes_the_folder(tmp_path: Path, capsys) -> None:
    """--out docs/src/bench/NEWMACHINE/x.md after an hour's run: written, not a traceback."""
    out = tmp_path / "new_machine" / "table.md"
    publish("| a | b |\n", {"rounds": 3}, out)
    assert out.read_text() == "| a | b |\n"
    assert json.loads(out.with_suffix(".json").read_text()) == {"rounds": 3}
    assert "| a | b |" in capsys.readouterr().out
