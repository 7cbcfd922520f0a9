"""The GGUF bench's file variants (llama.cpp's quantizer, made once), the
bytes a token reads, and MAX's qmatmul contender: the parts of
`devtools.bench.llama --gguf` tests/test_bench_llama.py leaves out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from common.cli import Failure
from devtools.bench import gguf_files, llama, llama_gguf
from devtools.bench.stats import summary

TINY = dict(
    vocab_size=64,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
)


# -- the file's variants ---------------------------------------------------------


def fake_quantize(made: list):
    """A quantizer that writes a GGUF-looking file naming what it was made
    from, and records each call."""

    def quantize(source: Path, out: Path, file_type: str) -> None:
        made.append((source.name, file_type))
        out.write_bytes(b"GGUF" + f" {file_type} of {source.name}".encode())

    return quantize


def test_the_source_is_named_by_its_block_type() -> None:
    assert gguf_files.source_name(Path("SmolLM2-135M-Instruct.Q4_1.gguf")) == "q4_1"
    assert gguf_files.source_name(Path("model.gguf")) == "source"
    assert gguf_files.known_names(Path("m.Q8_0.gguf")) == ["q8_0", "f32", "q4_0", "bf16"]


def test_variants_come_from_the_float32_file_made_once(tmp_path: Path) -> None:
    source = tmp_path / "m.Q4_1.gguf"
    source.write_bytes(b"GGUF source")
    made: list = []
    paths, why = gguf_files.files(
        source, ["q4_1", "q4_0", "bf16"], fake_quantize(made), tmp_path / "kept"
    )
    assert why is None and paths["q4_1"] == source
    assert made == [
        ("m.Q4_1.gguf", "LLAMA_FTYPE_ALL_F32"),
        ("f32.gguf", "LLAMA_FTYPE_MOSTLY_Q4_0"),
        ("f32.gguf", "LLAMA_FTYPE_MOSTLY_BF16"),
    ]
    assert paths["q4_0"].read_bytes() == b"GGUF LLAMA_FTYPE_MOSTLY_Q4_0 of f32.gguf"
    again: list = []
    assert gguf_files.files(source, ["q4_0", "bf16"], fake_quantize(again), tmp_path / "kept")[
        0
    ] == {"q4_0": paths["q4_0"], "bf16": paths["bf16"]}
    assert again == []  # kept from the first run


def test_a_changed_source_or_a_partial_file_is_made_again(tmp_path: Path) -> None:
    source = tmp_path / "m.Q4_1.gguf"
    source.write_bytes(b"GGUF source")
    made: list = []
    first = gguf_files.variant(source, "f32", fake_quantize(made), tmp_path)
    first.write_bytes(b"")  # cut short: not a whole GGUF file
    assert gguf_files.variant(source, "f32", fake_quantize(made), tmp_path) == first
    assert len(made) == 2 and first.read_bytes().startswith(b"GGUF")
    source.write_bytes(b"GGUF another source")
    assert gguf_files.variant(source, "f32", fake_quantize(made), tmp_path) != first
    assert len(made) == 3


def test_a_quantizer_that_writes_no_gguf_file_is_a_failure(tmp_path: Path) -> None:
    source = tmp_path / "m.Q4_1.gguf"
    source.write_bytes(b"GGUF source")

    def broken(source: Path, out: Path, file_type: str) -> None:
        out.write_bytes(b"oops")

    with pytest.raises(Failure, match="no GGUF file"):
        gguf_files.variant(source, "f32", broken, tmp_path / "kept")
    assert list((tmp_path / "kept").rglob("*.gguf*")) == []


def test_without_llama_cpp_the_file_alone_is_measured(tmp_path: Path) -> None:
    source = tmp_path / "m.Q4_1.gguf"
    source.write_bytes(b"GGUF source")
    paths, why = gguf_files.files(source, ["q4_1", "q8_0"], None, tmp_path)
    assert paths == {"q4_1": source}
    assert "llama.cpp is not installed" in why and "\n" not in why
    assert gguf_files.files(source, ["q4_1"], None, tmp_path) == ({"q4_1": source}, None)


# -- the bytes a token reads, the rounds and the results of a file ------------------


def infos(kinds: dict[str, tuple[tuple[int, ...], str]]) -> dict:
    from solutions.solution_29 import TensorInfo

    return {name: TensorInfo(name, shape, kind, 0) for name, (shape, kind) in kinds.items()}


def test_bytes_per_token_counts_each_tensor_as_the_contender_holds_it() -> None:
    tensors = infos(
        {
            "token_embd.weight": ((100, 64), "Q8_0"),  # tied: it is the head, read whole
            "blk.0.attn_q.weight": ((64, 64), "Q4_0"),
            "blk.0.attn_norm.weight": ((64,), "F32"),
        }
    )
    holds = llama_gguf.HOLDS
    stored = 100 * 2 * 34 + 64 * 2 * 18 + 64 * 4
    assert llama_gguf.bytes_per_token(tensors, holds["as stored"]) == stored
    assert llama_gguf.bytes_per_token(tensors, holds["float32"]) == (6400 + 4096 + 64) * 4
    assert llama_gguf.bytes_per_token(tensors, holds["Q8_0 projections"]) == (
        6400 * 4 + 64 * 2 * 34 + 64 * 4
    )
    untied = tensors | infos({"output.weight": ((100, 64), "Q8_0")})
    # untied, a token reads one row of the embedding: the head counts, the table not
    assert llama_gguf.bytes_per_token(untied, holds["as stored"]) == stored


def test_every_contender_says_how_it_holds_the_weights() -> None:
    assert set(llama_gguf.HELD_AS) == set(llama_gguf.CONTENDERS)
    assert set(llama_gguf.HELD_AS.values()) <= set(llama_gguf.HOLDS)
    assert llama_gguf.REFERENCE in llama_gguf.CONTENDERS


def test_the_long_prompt_repeats_the_paragraph_to_its_length() -> None:
    class Tokenizer:
        def encode(self, text: str, add_special_tokens: bool) -> list[int]:
            assert text == llama_gguf.PARAGRAPH and not add_special_tokens
            return [7, 8, 9]

    assert llama_gguf.long_prompt(Tokenizer(), 8) == [7, 8, 9, 7, 8, 9, 7, 8]


def test_without_fast_llama_the_fast_contender_says_why(monkeypatch, tmp_path: Path) -> None:
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    run, why = llama_gguf.fast_contender(tmp_path / "m.gguf")
    assert run is None and why == "fast/llama.py is not in this tree"


def fake_contender(key: str, calls: list, speed: float):
    """A contender whose n tokens arrive 1/speed s apart, from t = 0."""

    def run(prompt: list[int], count: int) -> list[tuple[int, float]]:
        calls.append((key, len(prompt), count))
        return [(token, token / speed) for token in range(count)]

    return run


def test_each_decode_follows_a_probe_and_each_round_times_the_long_prompt() -> None:
    calls: list = []
    contenders = {
        "ours": fake_contender("ours", calls, 1.0),
        "peer": fake_contender("peer", calls, 2.0),
    }
    readings = iter(range(1, 100))

    def probe() -> float:
        calls.append(("probe",))
        return float(next(readings))

    samples = llama_gguf.interleaved_runs(
        contenders, [1, 2], [5] * 6, [3, 5], 2, probe, settle=lambda: None
    )
    warm_up = [("ours", 2, 4), ("ours", 6, 1), ("peer", 2, 4), ("peer", 6, 1)]
    first_round = [("ours", 6, 1), ("peer", 6, 1)]
    first_round += [("probe",), ("ours", 2, 3), ("probe",), ("peer", 2, 3)]
    first_round += [("probe",), ("ours", 2, 5), ("probe",), ("peer", 2, 5)]
    assert calls[:14] == warm_up + first_round
    assert calls[14:16] == [("peer", 6, 1), ("ours", 6, 1)]  # the second round turns
    assert samples["ours"]["probe_gb_s"] == {3: [1.0, 6.0], 5: [3.0, 8.0]}
    assert samples["peer"]["runs"][5][0]["decode_tok_s"] == 2.0  # 4 tokens in 2 s
    assert samples["ours"]["runs"][3][1]["tokens"] == [0, 1, 2]
    assert samples["ours"]["sustained_gb_s"] == {3: [], 5: []}  # none asked for


def test_each_probe_s_sustained_read_is_kept_with_its_decode() -> None:
    calls: list = []
    contenders = {"ours": fake_contender("ours", calls, 1.0)}
    readings, sustained = iter(range(1, 100)), iter(range(101, 200))

    def probe() -> float:
        calls.append(("probe",))
        return float(next(readings))

    samples = llama_gguf.interleaved_runs(
        contenders, [1, 2], [5] * 6, [3, 5], 2, probe, lambda: None, lambda: next(sustained)
    )
    assert samples["ours"]["probe_gb_s"] == {3: [1.0, 3.0], 5: [2.0, 4.0]}
    assert samples["ours"]["sustained_gb_s"] == {3: [101, 103], 5: [102, 104]}


def run_sample(tok_s: float, tokens: list[int]) -> dict:
    return dict(decode_tok_s=tok_s, first_token_ms=50.0, tokens=tokens)


def test_file_results_pair_the_reference_with_each_peer_round_by_round() -> None:
    samples = {
        "ours": dict(
            prompt_tok_s=[400.0, 500.0],
            runs={32: [run_sample(10.0, [1, 2, 3]), run_sample(12.0, [1, 2, 3])]},
            probe_gb_s={32: [10.0, 20.0]},
        ),
        "peer": dict(
            prompt_tok_s=[900.0, 1000.0],
            runs={32: [run_sample(40.0, [1, 2, 9]), run_sample(30.0, [1, 2, 9])]},
            probe_gb_s={32: [8.0, 5.0]},
        ),
    }
    results = llama_gguf.file_results(samples, {"ours": 10**9, "peer": 10**8}, reference="ours")
    assert results["ratios"]["peer"]["32"]["samples"] == [0.25, 0.4]
    assert "ours" not in results["ratios"]
    assert results["reads"]["ours"]["32"]["samples"] == [1.0, 0.6]  # 10 GB/s of 10, 12 of 20
    assert results["reads"]["peer"]["32"]["samples"] == [0.5, 0.6]  # 4 GB/s of 8, 3 of 5
    assert "sustained_reads" not in results  # the samples have no sustained reads
    for key, gb_s in (("ours", [20.0, 8.0]), ("peer", [4.0, 6.0])):
        samples[key]["sustained_gb_s"] = {32: gb_s}
    results = llama_gguf.file_results(samples, {"ours": 10**9, "peer": 10**8}, reference="ours")
    assert results["sustained_reads"]["ours"]["32"]["samples"] == [0.5, 1.5]  # 10 of 20, 12 of 8
    assert results["sustained_reads"]["peer"]["32"]["samples"] == [1.0, 0.5]  # 4 of 4, 3 of 6
    samples["peer"]["sustained_gb_s"] = {32: [4.0]}  # a decode without its sustained read
    assert "sustained_reads" not in llama_gguf.file_results(samples, {"ours": 1, "peer": 1})
    assert results["summaries"]["peer"]["prompt_tok_s"]["median"] == 950.0
    assert results["agreement"] == {"peer": dict(agree=2, of=32)}
    as_peer = llama_gguf.file_results(samples, {"ours": 1, "peer": 1}, reference="peer")
    assert as_peer["ratios"]["ours"]["32"]["samples"] == [4.0, 2.5]
    without = llama_gguf.file_results(samples, {"ours": 1, "peer": 1}, reference="fast")
    assert without["ratios"] == {} and without["agreement"] == {}


def test_qmatmul_takes_files_whose_projections_it_multiplies() -> None:
    from devtools.bench import max_qmatmul

    class File:
        def __init__(self, kind: str) -> None:
            self.tensors = infos(
                {
                    "token_embd.weight": ((100, 64), "Q8_0"),
                    "blk.0.attn_q.weight": ((64, 64), kind),
                    "blk.0.ffn_down.weight": ((64, 64), kind),
                }
            )

    assert max_qmatmul.unsupported(File("Q4_0")) is None
    assert max_qmatmul.unsupported(File("Q4_1")) == (
        "its projections are Q4_1; qmatmul takes Q4_0, Q4_K, Q6_K"
    )


# -- the table of several files -------------------------------------------------------


def spread(median: float, low: float, high: float) -> dict:
    return dict(summary([low, median, high]))


def file_data(name: str, keys: list[str]) -> dict:
    speeds = {"ours": (3.0, 2.5, 3.5), "qmatmul": (6.0, 5.0, 7.0), "llama.cpp": (30, 25, 35)}
    return dict(
        name=name,
        file=f"`m.{name}.gguf` (98 MB; its tensors: 210 {name.upper()}, 61 F32, 1 Q8_0)",
        prompt_tokens=37,
        load_seconds=2.2,
        compile_seconds=8.4,
        left_out={"fast": "fast/llama.py is not in this tree"},
        answer="The sky looks blue because\nof scattering",
        summaries={
            key: dict(
                decode_tok_s={"32": spread(*speeds[key]), "128": spread(*speeds[key])},
                first_token_ms=spread(90, 80, 100),
                prompt_tok_s=spread(400, 300, 500),
            )
            for key in keys
        },
        ratios={key: {"128": spread(0.1, 0.08, 0.12)} for key in keys if key != "ours"},
        bytes_per_token={key: 98_000_000 if key == "llama.cpp" else 540_000_000 for key in keys},
        reads={key: {"128": spread(0.5, 0.4, 0.6)} for key in keys},
        agreement={key: dict(agree=9, of=32) for key in keys if key != "ours"},
        tokens_made={},
    )


def several_files_data() -> dict:
    return dict(
        machine="Some CPU, 2 cores",
        load=dict(loadavg_before=[0.5], loadavg_after=[0.6], other_processes_cpu_fraction=0.0),
        threads=2,
        lengths=[32, 128],
        headline=128,
        long_prompt_tokens=512,
        rounds=3,
        reference="ours",
        probe=spread(20.0, 18.0, 22.0),
        files=[
            file_data("q4_1", ["ours", "llama.cpp"]),
            file_data("q4_0", ["ours", "qmatmul", "llama.cpp"]),
        ],
        files_left_out=None,
    )


def test_the_table_of_several_files_gives_a_table_a_file() -> None:
    report = llama.report(several_files_data())
    assert report.startswith("Machine: Some CPU, 2 cores. SmolLM2-135M-Instruct's GGUF file")
    assert "then 32 and 128 tokens greedy; a 512-token prompt" in report
    assert "probed right before each decode: 20.0 GB/s (18.0-22.0)." in report
    tables = report.split("**")[1::2]
    assert tables == ["q4_1", "q4_0"]
    header = next(line for line in report.splitlines() if line.startswith("| contender"))
    assert header == (
        "| contender | MB a token reads | decode, 32 tokens | decode, 128 tokens | first token "
        "| prompt, tokens/s | ours / it, 128 tokens | of the read rate | greedy tokens as ours |"
    )
    rows = [line for line in report.splitlines() if line.startswith("| ")]
    labels = [line.split(" | ")[0].removeprefix("| ") for line in rows if "contender" not in line]
    assert labels == [llama_gguf.CONTENDERS[k] for k in ("ours", "llama.cpp")] + [
        llama_gguf.CONTENDERS[k] for k in ("ours", "qmatmul", "llama.cpp")
    ]
    assert rows[1] == (
        f"| {llama_gguf.CONTENDERS['ours']} | 540 | 3.0 tok/s (2.5-3.5) | 3.0 tok/s (2.5-3.5) "
        "| 90 ms (80-100) | 400 (300-500) | - | 50% (40-60) | - |"
    )
    assert rows[2].endswith(
        "| 98 | 30.0 tok/s (25.0-35.0) | 30.0 tok/s (25.0-35.0) | 90 ms (80-100) "
        "| 400 (300-500) | 0.10x (0.08-0.12) | 50% (40-60) | the first 9 of 32 |"
    )
    assert report.count("fast was not measured: fast/llama.py is not in this tree.") == 2
    assert "in 2 s, then compiled in 8 s." in report
    assert 'The answer of ours, step 23 begins: "The sky looks blue because ..."' in report


def test_sustained_reads_get_a_sentence_and_a_column() -> None:
    data = several_files_data()
    data |= dict(sustained=spread(15.0, 12.0, 16.0), sustain_seconds=0.5)
    for file in data["files"]:
        file["sustained_reads"] = {key: {"128": spread(0.8, 0.7, 0.9)} for key in file["reads"]}
    report = llama.report(data)
    assert "on end for 0.5 s" in report
    assert "that sustained read: 15.0 GB/s (12.0-16.0)." in report
    header = next(line for line in report.splitlines() if line.startswith("| contender"))
    assert "| of the read rate | of the sustained read | greedy tokens as ours |" in header
    rows = [line for line in report.splitlines() if line.startswith("| ")]
    assert rows[2].endswith("| 50% (40-60) | 80% (70-90) | the first 9 of 32 |")
    assert "sustained" not in llama.report(several_files_data())  # older data: no column


def test_files_left_out_are_said_once_above_the_tables() -> None:
    data = several_files_data()
    data["files_left_out"] = "llama.cpp is not installed, so ...; measured the file alone (q4_1)"
    report = llama.report(data)
    assert "\nllama.cpp is not installed, so ...; measured the file alone (q4_1).\n" in report


# -- on a tiny Llama file: llama.cpp's quantizer, and qmatmul's blocks ------------------


def tiny_llama_gguf(path: Path, kind: str) -> Path:
    """A one-layer Llama GGUF of random weights (tests/reference_gguf.py), its
    matrices in `kind`, written as llama.cpp's converter would."""
    from tests import reference_gguf as ref

    hidden, inner, kv_rows = TINY["hidden_size"], TINY["intermediate_size"], 32
    shapes = {"model.embed_tokens.weight": (TINY["vocab_size"], hidden)}
    shapes["model.norm.weight"] = (hidden,)
    layer = {
        "self_attn.q_proj": (hidden, hidden),
        "self_attn.k_proj": (kv_rows, hidden),
        "self_attn.v_proj": (kv_rows, hidden),
        "self_attn.o_proj": (hidden, hidden),
        "mlp.gate_proj": (inner, hidden),
        "mlp.up_proj": (inner, hidden),
        "mlp.down_proj": (hidden, inner),
        "input_layernorm": (hidden,),
        "post_attention_layernorm": (hidden,),
    }
    shapes |= {f"model.layers.0.{name}.weight": shape for name, shape in layer.items()}
    rng = np.random.default_rng(0)
    state = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    heads, kv_heads = TINY["num_attention_heads"], TINY["num_key_value_heads"]
    metadata = ref.llama_metadata(
        layers=1, hidden=hidden, intermediate=inner, heads=heads, kv_heads=kv_heads,
        theta=1e4, eps=1e-5, context=64,
    )  # fmt: skip
    path.write_bytes(ref.gguf_bytes(metadata, ref.llama_tensors(state, heads, kv_heads, kind)).data)
    return path


def test_llama_cpps_quantizer_makes_each_variant(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    from solutions.solution_29 import read_gguf

    source = tiny_llama_gguf(tmp_path / "tiny.Q4_1.gguf", "Q4_1")
    names = gguf_files.known_names(source)
    paths, why = gguf_files.files(source, names, gguf_files.llama_cpp_quantize(), tmp_path)
    assert why is None and list(paths) == ["q4_1", "f32", "q8_0", "q4_0", "bf16"]
    for name, path in paths.items():
        projections = {
            info.kind
            for key, info in read_gguf(path).tensors.items()
            if llama_gguf.is_projection(key)
        }
        assert projections == {name.upper()}, name
    assert {info.kind for info in read_gguf(paths["f32"]).tensors.values()} == {"F32"}


def test_qmatmuls_layers_hold_the_files_blocks_in_step_19s_row_order(tmp_path: Path) -> None:
    from common.ggml_blocks import BLOCK_FORMATS
    from devtools.bench import max_qmatmul
    from solutions.solution_29 import load_gguf_llama, read_gguf

    gguf = read_gguf(tiny_llama_gguf(tmp_path / "tiny.Q4_0.gguf", "Q4_0"))
    widened = load_gguf_llama(gguf).model.layers[0]
    blocks = max_qmatmul.with_quantized_layers(load_gguf_llama(gguf), gguf).model.layers[0]
    form = BLOCK_FORMATS["Q4_0"]
    for module, attribute in max_qmatmul.PROJECTIONS.values():
        weight = getattr(getattr(widened, module), attribute).weight.to_numpy()
        linear = getattr(getattr(blocks, module), attribute)
        assert linear.encoding is max_qmatmul.ENCODINGS["Q4_0"]
        stored = linear.blocks.to_numpy()
        assert np.array_equal(
            form.widen(stored.reshape(-1, form.size)).reshape(weight.shape), weight
        )
