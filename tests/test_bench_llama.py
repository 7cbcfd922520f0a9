"""devtools/bench/llama.py's --gguf mode (llama_gguf.py, gguf_files.py,
llama_gguf_table.py): its arguments, the file variants' cache (with a fake
quantizer), the bytes a token reads, the rounds with fake contenders, the
tables from fixed numbers, and the book's table drawn from its committed
data (step 29's tests hold the reading of the file). No real model runs
here; the tests that read SmolLM2's file skip, by name, where it is not
installed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from common import smollm2
from common.cli import UsageError
from devtools.bench import llama, llama_gguf
from devtools.bench.stats import summary

BENCH = Path(__file__).resolve().parents[1] / "docs/src/bench"
# The Llama page's tables, one a machine, and step 30's (the one-file bench of its time).
BOOK_TABLES = sorted(BENCH.rglob("llama_gguf*.md"))


# -- arguments --------------------------------------------------------------------


def test_without_gguf_the_random_checkpoint_runs_as_before() -> None:
    args = llama.parse_args([])
    assert (args.gguf, args.tokens, args.layers, args.rounds) == (None, [64], 30, 3)
    assert llama.parse_args(["--tokens", "16"]).tokens == [16]


def test_gguf_takes_a_file_and_decodes_32_128_and_512_tokens(tmp_path: Path) -> None:
    file = tmp_path / "model.gguf"
    file.write_bytes(b"GGUF")
    args = llama.parse_args(["--gguf", str(file), "--rounds", "2"])
    assert (args.gguf, args.tokens, args.rounds) == (file, [32, 128, 512], 2)
    assert (args.files, args.contenders) == (["source"], list(llama_gguf.CONTENDERS))
    assert llama.parse_args(["--gguf", str(file), "--tokens", "16"]).tokens == [16]


def test_gguf_takes_files_lengths_and_contenders_as_lists(tmp_path: Path) -> None:
    file = tmp_path / "SmolLM2.Q4_1.gguf"
    file.write_bytes(b"GGUF")
    args = llama.parse_args(
        ["--gguf", str(file), "--files", "q4_1,q4_0, bf16", "--tokens", "32,128"]
        + ["--contenders", "ours,step 27,llama.cpp"]
    )
    assert (args.files, args.tokens) == (["q4_1", "q4_0", "bf16"], [32, 128])
    assert args.contenders == ["ours", "step 27", "llama.cpp"]


def test_gguf_alone_means_smollm2s_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(smollm2, "gguf_path", lambda: tmp_path / "SmolLM2.gguf")
    assert llama.parse_args(["--gguf"]).gguf == tmp_path / "SmolLM2.gguf"


def test_gguf_alone_without_smollm2s_file_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(smollm2, "gguf_path", lambda: None)
    with pytest.raises(UsageError, match=re.escape(smollm2.INSTALL)):
        llama.parse_args(["--gguf"])


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--gguf", "no/such.gguf"], "not a file"),
        (["--gguf", __file__, "--layers", "2"], "--layers"),
        (["--tokens", "1"], "--tokens"),
        (["--tokens", "32,x"], "'32,x' is not a length"),
        (["--tokens", "32,128"], "one length without --gguf"),
        (["--gguf", __file__, "--tokens", "32,1"], "--tokens must be at least 2"),
        (["--files", "q4_0"], "--files is for --gguf"),
        (["--contenders", "ours"], "--contenders is for --gguf"),
        (["--gguf", __file__, "--files", "q4_0,q5_0"], "not q5_0"),
        (["--gguf", __file__, "--contenders", "ours,vllm"], "not vllm"),
    ],
)
def test_bad_arguments_are_usage_errors(argv: list[str], named: str) -> None:
    with pytest.raises(UsageError, match=re.escape(named)):
        llama.parse_args(argv)


# -- names, rows and the config -----------------------------------------------------


def test_smollm2s_file_is_named_with_its_block_types() -> None:
    path = smollm2.gguf_path()
    if path is None:
        pytest.skip(f"SmolLM2-135M-Instruct's GGUF file is not installed ({smollm2.INSTALL})")
    from solutions.solution_29 import read_gguf

    line = llama_gguf.file_line(read_gguf(path))
    assert line.startswith(f"`{path.name}`") and "Q4_1" in line and "Q8_0" in line


# -- measuring and the table ----------------------------------------------------------


def test_the_token_stream_keeps_each_new_token_with_its_arrival() -> None:
    torch = pytest.importorskip("torch")
    stream = llama.TokenStream()
    stream.put(torch.tensor([[5, 6, 7]]))  # the prompt
    stream.put(torch.tensor([11]))
    stream.put(torch.tensor([12]))
    assert [token for token, _ in stream.arrivals] == [11, 12]
    assert stream.arrivals[0][1] <= stream.arrivals[1][1]


def test_leading_agreement_stops_at_the_first_difference() -> None:
    assert llama_gguf.leading_agreement([1, 2, 3, 4], [1, 2, 3, 4], window=3) == 3
    assert llama_gguf.leading_agreement([1, 2, 3, 4], [1, 9, 3, 4], window=4) == 1
    assert llama_gguf.leading_agreement([7, 2], [1, 2], window=2) == 0


def test_timed_runs_are_interleaved_and_summarized() -> None:
    calls = []

    def contender(key: str):
        def run(prompt: list[int], count: int) -> list[tuple[int, float]]:
            calls.append((key, count))
            return [(token, float(token)) for token in range(count)]

        return run

    contenders = {"ours": contender("ours"), "peer": contender("peer")}
    samples, _ = llama.interleaved(contenders, [1, 2], count=5, rounds=2)
    assert calls == [("ours", 4), ("peer", 4), ("ours", 5), ("peer", 5), ("peer", 5), ("ours", 5)]
    assert samples["ours"][0]["tokens"] == [0, 1, 2, 3, 4]
    assert llama.summaries(samples)["peer"]["decode_tok_s"]["median"] == 1.0  # 4 tokens in 4 s
    assert llama.paired_ratio(samples, "ours", "peer")["median"] == 1.0


def fixed_data(with_llama_cpp: bool = True) -> dict:
    def spread(median: float, low: float, high: float) -> dict:
        return dict(summary([low, median, high]))

    speeds = {"ours": (3.0, 2.5, 3.5), "transformers": (2.0, 1.5, 2.5), "llama.cpp": (30, 25, 35)}
    keys = list(speeds) if with_llama_cpp else ["ours", "transformers"]
    return dict(
        machine="Some CPU, 2 cores",
        load=dict(loadavg_before=[0.5], loadavg_after=[0.6], other_processes_cpu_fraction=0.0),
        file="`SmolLM2.gguf` (98 MB; its tensors: 210 Q4_1, 61 F32, 1 Q8_0)",
        threads=2,
        prompt_tokens=37,
        tokens=128,
        rounds=3,
        load_seconds=4.2,
        compile_seconds=12.6,
        summaries={
            key: {"decode_tok_s": spread(*speeds[key]), "first_token_ms": spread(90, 80, 100)}
            for key in keys
        },
        ratios={
            key: spread(1.5, 1.2, 1.8) if key == "transformers" else spread(0.1, 0.08, 0.12)
            for key in keys[1:]
        },
        agreement={key: dict(agree=32 if key == "transformers" else 9, of=32) for key in keys[1:]},
        answer="The sky looks blue because\nof scattering",
        tokens_made={},
        left_out={} if with_llama_cpp else {"llama.cpp": "llama.cpp is not installed"},
    )


def test_the_earlier_one_file_data_gives_each_contender_its_speeds_ratio_and_agreement() -> None:
    data = fixed_data()
    report = llama.report(data)
    assert report.startswith("Machine: Some CPU, 2 cores. The file: `SmolLM2.gguf` (98 MB;")
    rows = [line for line in report.splitlines() if line.startswith("| ")][1:]
    assert [row.split(" | ")[0] for row in rows] == [
        f"| {label}" for key, label in llama_gguf.CONTENDERS.items() if key in data["summaries"]
    ]
    assert rows[0].endswith("| 3.0 tok/s (2.5-3.5) | 90 ms (80-100) | - | - |")
    assert rows[1].endswith("| 1.50x (1.20-1.80) | the first 32 of 32 |")
    assert rows[2].endswith(
        "| 30.0 tok/s (25.0-35.0) | 90 ms (80-100) | 0.10x (0.08-0.12) | the first 9 of 32 |"
    )
    assert "in 4 s, then compiled in 13 s" in report
    assert 'begins: "The sky looks blue because ..."' in report
    assert "not measured" not in report


def test_a_run_without_llama_cpp_says_why_in_the_table() -> None:
    report = llama.report(fixed_data(with_llama_cpp=False))
    assert "| llama.cpp" not in report
    assert "llama.cpp was not measured: llama.cpp is not installed." in report


@pytest.mark.parametrize("table", BOOK_TABLES, ids=lambda path: str(path.relative_to(BENCH)))
def test_the_books_tables_are_what_the_report_makes_of_their_data(table: Path) -> None:
    data = json.loads(table.with_suffix(".json").read_text())
    assert table.read_text() == llama.report(data)


def test_the_table_names_the_file_it_ran() -> None:
    """A run records its source file's name, and the table's first line names
    it; runs from before (SmolLM2's file, no name recorded) say SmolLM2's."""
    data = json.loads((BENCH / "zen4" / "llama_gguf_decode.json").read_text())
    data.pop("source", None)
    assert "SmolLM2-135M-Instruct's GGUF file and llama.cpp's" in llama.report(data)
    named = llama.report({**data, "source": "qwen.Q4_1.gguf"})
    assert "`qwen.Q4_1.gguf` and llama.cpp's requantizations of it" in named
