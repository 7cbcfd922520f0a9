"""devtools/serve_bench: the statistics, the padding, the report and the
command line (the full run starts a server: `python -m devtools.serve_bench`)."""

from __future__ import annotations

import json

import pytest

from devtools.serve_bench import report
from devtools.serve_bench.__main__ import main
from devtools.serve_bench.executions import split_execution_time
from devtools.serve_bench.load import is_token_event, percentile, summarize
from devtools.serve_bench.peers import TokenClock, left_padded


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([0.0, 10.0], 99) == pytest.approx(9.9)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_every_token_event_counts_even_without_text() -> None:
    """Two requests of three tokens: TTFT from the first event, ITL from the
    gaps between events, throughput over the level's wall time."""
    stats = summarize([[0.1, 0.2, 0.3], [0.2, 0.4, 0.6]], seconds=1.0, concurrency=2)
    assert stats["tokens"] == 6 and stats["tokens_per_second"] == 6.0
    assert stats["ttft_ms"]["p50"] == pytest.approx(150.0)
    assert stats["itl_ms"]["p50"] == pytest.approx(150.0)  # gaps 0.1, 0.1, 0.2, 0.2
    assert stats["itl_ms"]["p99"] == pytest.approx(200.0)


def test_a_token_event_is_a_chunk_with_a_token_not_the_closing_one() -> None:
    assert is_token_event({"choices": [{"text": "", "finish_reason": None}]})  # no text yet
    assert is_token_event({"choices": [{"text": " end", "finish_reason": "length"}]})
    assert not is_token_event({"choices": [{"text": "", "finish_reason": "length"}]})
    assert not is_token_event({"choices": []})


def test_left_padding_right_aligns_every_prompt() -> None:
    ids, mask = left_padded([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_the_token_clock_skips_the_prompt() -> None:
    clock = TokenClock()
    for value in ("prompt", "token 1", "token 2"):
        clock.put(value)
    assert len(clock.arrivals) == 2


def test_executions_split_into_model_and_pipeline_time_inside_the_window() -> None:
    """Executions of 20 ms with 5 ms gaps (nanoseconds); the one that ends
    after the window, and the one before it, are not counted."""
    ms = 1_000_000
    executions = [(start * ms, (start + 20) * ms) for start in (0, 100, 125, 150, 500)]
    split = split_execution_time(executions, window=(50 * ms, 200 * ms))
    assert split == {"executions": 3, "model_ms": 20.0, "between_ms": 5.0}
    assert split_execution_time(executions[:1], window=(0, 50 * ms)) is None
    line = report.execution_time(split)[0]
    assert "20.0 ms in our model's compiled graph and 5.0 ms in MAX's pipeline" in line
    assert "(20% of 25.0 ms)" in line


def level(concurrency: int, tokens_per_second: float) -> dict:
    latency = {"p50": 10.0, "p99": 20.0}
    return dict(
        concurrency=concurrency,
        tokens_per_second=tokens_per_second,
        ttft_ms=latency,
        itl_ms=latency,
    )


def test_the_report_names_the_machine_and_gives_the_ratios() -> None:
    data = {
        "machine": "a test machine",
        "max_tokens": 32,
        "server": [level(1, 30.0), level(16, 330.0)],
        "cross_check": {"skipped": "max benchmark needs the extra"},
        "transformers": [level(1, 40.0), level(16, 100.0)],
        "llama_server": {"levels": [level(1, 60.0), level(16, 60.0)]},
        "fast": level(1, 40.0),
    }
    text = report.table(data)
    assert "against llama.cpp's server: 330.0 vs 60.0 tokens/s (5.50x)." in text
    assert "Measured on a test machine" in text
    assert "against our fast path: 30.0 vs 40.0 tokens/s (0.75x)." in text
    assert "against transformers batched: 330.0 vs 100.0 tokens/s (3.30x)." in text
    assert "max benchmark needs the extra" in text


@pytest.mark.parametrize(
    "argv",
    [
        ["--concurrency", "0"],
        ["--max-tokens", "1"],
        ["--bogus"],
        ["--weights", "/nonexistent"],
        ["--gguf", "smollm2", "--weights", "/nonexistent"],
        ["--gguf", "smollm2", "--device", "gpu"],
    ],
)
def test_bad_input_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err


def test_llama_server_answers_every_level_on_the_tiny_fixture(tmp_path) -> None:
    """The llama.cpp server contender end to end, when the peers extra is
    installed: every level measured, every request given all its tokens."""
    from devtools import llama_peer
    from devtools.serve_bench import llama_server
    from tests.fixtures import hf_model, write_checkpoint

    why = llama_peer.missing()
    if why:
        pytest.skip(why)
    directory = write_checkpoint(tmp_path / "checkpoint", hf_model(n_positions=128))
    measured = llama_server.measure(directory, tmp_path, [1, 2], requests=3, max_tokens=4)
    assert [level["concurrency"] for level in measured["levels"]] == [1, 2]
    for level in measured["levels"]:
        assert level["tokens"] == level["requests"] * 4, level


def test_the_gguf_report_gives_each_levels_ratio_to_llama_cpp() -> None:
    from devtools.serve_bench.gguf import report_table

    data = {
        "machine": "a test machine",
        "file": "model.Q4_1.gguf",
        "file_mb": 98,
        "max_tokens": 32,
        "server": [level(1, 150.0), level(4, 240.0)],
        "llama_server": {"levels": [level(1, 100.0), level(4, 120.0)]},
        "fast": level(1, 200.0),
    }
    text = report_table(data)
    assert "`model.Q4_1.gguf` (98 MB)" in text and "Measured on a test machine" in text
    assert (
        "1 at once, max serve against llama.cpp's server: 150.0 vs 100.0 tokens/s (1.50x)." in text
    )
    assert (
        "4 at once, max serve against llama.cpp's server: 240.0 vs 120.0 tokens/s (2.00x)." in text
    )
    assert "without a server: 150.0 vs 200.0 tokens/s (0.75x)." in text


def test_the_gguf_mode_measures_every_contender_on_smollm2(tmp_path) -> None:
    """`--gguf smollm2` end to end, when llama.cpp and SmolLM2's file are
    installed: max serve and llama.cpp's server at every level, every request
    given all its tokens, and the table written where --out says."""
    from common import smollm2
    from devtools import llama_peer

    why = llama_peer.missing() or (None if smollm2.gguf_path() else smollm2.INSTALL)
    if why:
        pytest.skip(why)
    argv = ["--gguf", "smollm2", "--concurrency", "1", "2", "--requests", "2", "--max-tokens", "4"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "serve_gguf.json").read_text())
    for contender in (data["server"], data["llama_server"]["levels"]):
        assert [row["concurrency"] for row in contender] == [1, 2]
        assert all(row["tokens"] == row["requests"] * 4 for row in contender), contender
    assert data["fast"]["tokens"] == 2 * 4
    assert "max serve against llama.cpp's server" in (tmp_path / "serve_gguf.md").read_text()
