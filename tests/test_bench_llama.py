"""devtools/bench/llama.py's --gguf mode (llama_gguf.py): its arguments, the
GGUF names and rows put back in step 23's, the table from fixed numbers, and
the book's table drawn from its committed data. No real model runs here; the
tests that read SmolLM2's file skip, by name, where it is not installed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from common import smollm2
from common.cli import UsageError
from devtools import llama_peer
from devtools.bench import llama, llama_gguf
from devtools.bench.stats import summary

BOOK_TABLE = Path(__file__).resolve().parents[1] / "docs/src/bench/llama_gguf_decode.md"
TINY = dict(
    vocab_size=64,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
)


def llama_cpp_permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel.permute): each
    head's rows from transformers' two halves to interleaved pairs."""
    rows = weight.shape[0]
    return (
        weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


# -- arguments --------------------------------------------------------------------


def test_without_gguf_the_random_checkpoint_runs_as_before() -> None:
    args = llama.parse_args([])
    assert (args.gguf, args.tokens, args.layers, args.rounds) == (None, 64, 30, 3)


def test_gguf_takes_a_file_and_decodes_128_tokens(tmp_path: Path) -> None:
    file = tmp_path / "model.gguf"
    file.write_bytes(b"GGUF")
    args = llama.parse_args(["--gguf", str(file), "--rounds", "2"])
    assert (args.gguf, args.tokens, args.rounds) == (file, 128, 2)
    assert llama.parse_args(["--gguf", str(file), "--tokens", "16"]).tokens == 16


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
    ],
)
def test_bad_arguments_are_usage_errors(argv: list[str], named: str) -> None:
    with pytest.raises(UsageError, match=re.escape(named)):
        llama.parse_args(argv)


# -- names, rows and the config -----------------------------------------------------


@pytest.mark.parametrize(
    "gguf_name, step23_name",
    [
        ("token_embd.weight", "model.embed_tokens.weight"),
        ("blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"),
        ("blk.12.attn_q.weight", "model.layers.12.self_attn.q_proj.weight"),
        ("blk.3.attn_k.weight", "model.layers.3.self_attn.k_proj.weight"),
        ("blk.3.attn_v.weight", "model.layers.3.self_attn.v_proj.weight"),
        ("blk.3.attn_output.weight", "model.layers.3.self_attn.o_proj.weight"),
        ("blk.29.ffn_norm.weight", "model.layers.29.post_attention_layernorm.weight"),
        ("blk.1.ffn_gate.weight", "model.layers.1.mlp.gate_proj.weight"),
        ("blk.1.ffn_up.weight", "model.layers.1.mlp.up_proj.weight"),
        ("blk.1.ffn_down.weight", "model.layers.1.mlp.down_proj.weight"),
        ("output_norm.weight", "model.norm.weight"),
        ("output.weight", "lm_head.weight"),
    ],
)
def test_gguf_names_become_step_23s(gguf_name: str, step23_name: str) -> None:
    assert llama_gguf.step23_name(gguf_name) == step23_name


@pytest.mark.parametrize("name", ["rope_freqs.weight", "blk.0.attn_qkv.weight"])
def test_a_tensor_step_23_does_not_know_is_named(name: str) -> None:
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        llama_gguf.step23_name(name)


def test_unpermute_puts_a_heads_halves_back() -> None:
    # One head of 4 rows: llama.cpp stores the rotary pairs (0, 2) and (1, 3)
    # side by side; step 19 wants the first half, then the second.
    stored = np.array([[0.0], [2.0], [1.0], [3.0]])
    assert llama_gguf.unpermute(stored, heads=1)[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("heads", [1, 2, 3])
def test_unpermute_undoes_llama_cpps_converter(heads: int) -> None:
    weight = np.arange(heads * 8 * 5, dtype=np.float32).reshape(heads * 8, 5)
    permuted = llama_cpp_permute(weight, heads)
    assert not np.array_equal(permuted, weight)
    assert np.array_equal(llama_gguf.unpermute(permuted, heads), weight)


def test_q_rows_unpermute_by_query_heads_and_k_rows_by_key_value_heads() -> None:
    config = dict(num_attention_heads=4, num_key_value_heads=2)
    q, k = (np.arange(n * 3, dtype=np.float32).reshape(n, 3) for n in (16, 8))
    name, got = llama_gguf.step23_tensor("blk.0.attn_q.weight", llama_cpp_permute(q, 4), config)
    assert name.endswith("q_proj.weight") and np.array_equal(got, q)
    _, got = llama_gguf.step23_tensor("blk.0.attn_k.weight", llama_cpp_permute(k, 2), config)
    assert np.array_equal(got, k)
    _, got = llama_gguf.step23_tensor("blk.0.attn_v.weight", k, config)
    assert got is k  # v's rows are as the converter found them


def metadata(**overrides) -> dict:
    values = {
        "general.architecture": "llama",
        "llama.vocab_size": 64,
        "llama.embedding_length": 64,
        "llama.feed_forward_length": 96,
        "llama.block_count": 1,
        "llama.attention.head_count": 4,
        "llama.attention.head_count_kv": 2,
        "llama.rope.freq_base": 100000.0,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
        "llama.context_length": 256,
    }
    return {**values, **overrides}


def test_the_config_comes_from_the_metadata() -> None:
    values = llama_gguf.llama_config_values(metadata(), ["token_embd.weight"])
    assert values == dict(
        TINY,
        rope_theta=100000.0,
        rms_norm_eps=1e-5,
        max_position_embeddings=256,
        tie_word_embeddings=True,
    )
    untied = llama_gguf.llama_config_values(metadata(), ["token_embd.weight", "output.weight"])
    assert untied["tie_word_embeddings"] is False
    no_vocab_size = metadata(**{"llama.vocab_size": None, "tokenizer.ggml.tokens": ["a"] * 7})
    assert llama_gguf.llama_config_values(no_vocab_size, [])["vocab_size"] == 7


def test_another_architecture_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'qwen2'"):
        llama_gguf.llama_config_values(metadata(**{"general.architecture": "qwen2"}), [])


def write_tiny_gguf(path: Path, hf_weights: dict[str, np.ndarray]) -> Path:
    """A one-layer llama GGUF as llama.cpp's converter writes one: q and k
    permuted, the matrices in Q8_0, the norms in float32."""
    gguf = pytest.importorskip("gguf", reason="the gguf package: pip install gguf")
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_vocab_size(TINY["vocab_size"])
    writer.add_context_length(256)
    writer.add_embedding_length(TINY["hidden_size"])
    writer.add_feed_forward_length(TINY["intermediate_size"])
    writer.add_block_count(1)
    writer.add_head_count(TINY["num_attention_heads"])
    writer.add_head_count_kv(TINY["num_key_value_heads"])
    writer.add_rope_freq_base(100000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    heads = {"attn_q": TINY["num_attention_heads"], "attn_k": TINY["num_key_value_heads"]}
    as_converted = [
        (name, llama_cpp_permute(weight, heads[name.split(".")[-2]]))
        if name.split(".")[-2] in heads
        else (name, weight)
        for name, weight in hf_weights.items()
    ]
    llama_peer.write_tensors(writer, as_converted, gguf.GGMLQuantizationType.Q8_0)
    return path


def test_load_step23_reads_a_converted_file_back_into_step_23s_names(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf", reason="the gguf package: pip install gguf")
    rng = np.random.default_rng(0)
    hidden, inner, vocab = TINY["hidden_size"], TINY["intermediate_size"], TINY["vocab_size"]
    shapes = {
        "token_embd.weight": (vocab, hidden),
        "blk.0.attn_norm.weight": (hidden,),
        "blk.0.attn_q.weight": (hidden, hidden),
        "blk.0.attn_k.weight": (32, hidden),
        "blk.0.attn_v.weight": (32, hidden),
        "blk.0.attn_output.weight": (hidden, hidden),
        "blk.0.ffn_norm.weight": (hidden,),
        "blk.0.ffn_gate.weight": (inner, hidden),
        "blk.0.ffn_up.weight": (inner, hidden),
        "blk.0.ffn_down.weight": (hidden, inner),
        "output_norm.weight": (hidden,),
    }
    weights = {name: rng.normal(size=shape).astype(np.float32) for name, shape in shapes.items()}
    model = llama_gguf.load_step23(write_tiny_gguf(tmp_path / "tiny.gguf", weights))
    assert model.config.num_key_value_heads == 2 and model.config.tie_word_embeddings
    loaded = {name: np.asarray(tensor.to_numpy()) for name, tensor in model.parameters}
    q8_0 = gguf.GGMLQuantizationType.Q8_0
    for name, weight in weights.items():
        want = weight
        if weight.ndim == 2:  # what Q8_0 keeps of it
            want = gguf.quants.dequantize(gguf.quants.quantize(weight, q8_0), q8_0)
        assert np.array_equal(loaded[llama_gguf.step23_name(name)], want), name
    assert np.array_equal(loaded["lm_head.weight"], loaded["model.embed_tokens.weight"])


def test_smollm2s_file_is_named_with_its_block_types() -> None:
    path = smollm2.gguf_path()
    if path is None:
        pytest.skip(f"SmolLM2-135M-Instruct's GGUF file is not installed ({smollm2.INSTALL})")
    pytest.importorskip("gguf", reason="the gguf package: pip install gguf")
    line = llama_gguf.file_line(path)
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


def test_the_table_gives_each_contender_its_speeds_ratio_and_agreement() -> None:
    report = llama.report(fixed_data())
    assert report.startswith("Machine: Some CPU, 2 cores. The file: `SmolLM2.gguf` (98 MB;")
    rows = [line for line in report.splitlines() if line.startswith("| ")][1:]
    assert [row.split(" | ")[0] for row in rows] == [
        f"| {label}" for label in llama_gguf.CONTENDERS.values()
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


def test_the_books_table_is_what_the_report_makes_of_its_data() -> None:
    data = json.loads(BOOK_TABLE.with_suffix(".json").read_text())
    assert BOOK_TABLE.read_text() == llama.report(data)
