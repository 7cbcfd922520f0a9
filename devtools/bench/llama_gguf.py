"""The Llama bench on a real GGUF file (`python -m devtools.bench.llama --gguf`):
SmolLM2-135M-Instruct's own file, decoded by step 23's model, by transformers
and by llama.cpp.

The file keeps its matrices in ggml's Q4_1 blocks and its token embedding in
Q8_0. Step 23's model and transformers widen them to float32 when they load
and compute in float32; llama.cpp computes from the blocks as stored, reading
under a fifth of the bytes a token. All three get the same token ids (the
file's chat template around one question) and choose each next token
greedily, with no stop token, so every run makes the same number of tokens.
Same rounds, medians and paired ratios as the random-weight mode (llama.py);
besides, how many leading greedy tokens of each peer are ours.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from devtools.bench import machine, stats

QUESTION = "Explain why the sky is blue."
AGREEMENT_TOKENS = 32  # greedy tokens compared with ours
CONTENDERS = {
    "ours": "ours, step 23 (compiled, KV cache, float32 widened from the file)",
    "transformers": "transformers (PyTorch, float32 widened from the file)",
    "llama.cpp": "llama.cpp (llama-cpp-python, the file's blocks as stored)",
}

# -- GGUF names and rows to step 23's --------------------------------------------

# llama.cpp's module names -> transformers' (step 23's), inside a layer and outside.
LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def step23_name(gguf_name: str) -> str:
    """Step 23's name of a GGUF tensor: "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"."""
    module, _, kind = gguf_name.rpartition(".")
    if module.startswith("blk."):
        _, layer, part = module.split(".", 2)
        if part in LAYER_NAMES:
            return f"model.layers.{layer}.{LAYER_NAMES[part]}.{kind}"
    elif module in TOP_NAMES:
        return f"{TOP_NAMES[module]}.{kind}"
    raise ValueError(f"the GGUF file has a tensor step 23's model does not know: {gguf_name}")


def unpermute(weight: np.ndarray, heads: int) -> np.ndarray:
    """q's or k's rows back in transformers' order. llama.cpp's converter
    interleaves each head's two halves (rows i and i + head_dim/2 side by side)
    for its own rotary pairs; step 19's rotation pairs the halves."""
    rows, columns = weight.shape
    halves = weight.reshape(heads, rows // heads // 2, 2, columns).swapaxes(1, 2)
    return halves.reshape(rows, columns)


def step23_tensor(gguf_name: str, array: np.ndarray, config: Mapping) -> tuple[str, np.ndarray]:
    """A GGUF tensor, widened, under step 23's name, q's and k's rows unpermuted."""
    name = step23_name(gguf_name)
    heads = {
        "self_attn.q_proj.weight": config["num_attention_heads"],
        "self_attn.k_proj.weight": config["num_key_value_heads"],
    }
    for suffix, count in heads.items():
        if name.endswith(suffix):
            return name, unpermute(array, count)
    return name, array


def llama_config_values(metadata: Mapping, tensor_names: list[str]) -> dict:
    """LlamaConfig's fields from a GGUF file's metadata ("llama.block_count", ...)."""
    architecture = metadata.get("general.architecture")
    if architecture != "llama":
        raise ValueError(f"the GGUF file holds a {architecture!r} model; this bench runs llama")

    def value(key: str):
        return metadata[f"llama.{key}"]

    return dict(
        vocab_size=int(metadata.get("llama.vocab_size") or len(metadata["tokenizer.ggml.tokens"])),
        hidden_size=int(value("embedding_length")),
        intermediate_size=int(value("feed_forward_length")),
        num_hidden_layers=int(value("block_count")),
        num_attention_heads=int(value("attention.head_count")),
        num_key_value_heads=int(value("attention.head_count_kv")),
        rope_theta=float(value("rope.freq_base")),
        rms_norm_eps=float(value("attention.layer_norm_rms_epsilon")),
        max_position_embeddings=int(value("context_length")),
        tie_word_embeddings="output.weight" not in tensor_names,
    )


def load_step23(path: Path):
    """Step 23's model with the GGUF file's weights widened to float32.

    Read with the `gguf` package, the maintainers' tool. Step 29's
    `load_gguf_llama` (solutions/solution_29.py) reads the same file by hand
    and does all of this: once it lands, it replaces this function whole."""
    import gguf
    from max.experimental import functional as F

    from solutions.solution_15 import check_against, parameter_shapes
    from solutions.solution_21 import LlamaConfig
    from solutions.solution_23 import LlamaForCausalLM, to_llama_state

    reader = gguf.GGUFReader(path)
    metadata = {
        name: field.contents()
        for name, field in reader.fields.items()
        if not name.startswith("tokenizer.ggml.")  # the vocabulary: large, and not needed
    }
    values = llama_config_values(metadata, [tensor.name for tensor in reader.tensors])
    tensors = dict(
        step23_tensor(
            tensor.name,
            gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32),
            values,
        )
        for tensor in reader.tensors
    )
    config = LlamaConfig(**values)
    state = to_llama_state(tensors, config)
    with F.lazy():  # the random initial weights are replaced at once
        model = LlamaForCausalLM(config)
    check_against(state, parameter_shapes(model))
    model.load_state_dict(state)
    return model


def file_line(path: Path) -> str:
    """The file's name, size and the block types of its tensors."""
    import gguf

    kinds = Counter(tensor.tensor_type.name for tensor in gguf.GGUFReader(path).tensors)
    counts = ", ".join(f"{count} {kind}" for kind, count in kinds.most_common())
    return f"`{path.name}` ({path.stat().st_size / 1e6:.0f} MB; its tensors: {counts})"


# -- the contenders ---------------------------------------------------------------


def stamped(tokens: Iterator[int]) -> list[tuple[int, float]]:
    """Each token with the time (perf_counter) it arrived."""
    return [(token, time.perf_counter()) for token in tokens]


def tokenizer_and_transformers(path: Path):
    """transformers' tokenizer and float32 model, both read from the GGUF file;
    the model chooses greedily with no stop token, as ours and llama.cpp do."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(machine.usable_cpus())
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    model.generation_config.eos_token_id = None
    return tokenizer, model


def chat_prompt(tokenizer) -> list[int]:
    """QUESTION in the file's chat template, ready for the answer."""
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTION}], add_generation_prompt=True, tokenize=True
    )
    ids = ids["input_ids"] if isinstance(ids, Mapping) else ids
    return [int(token) for token in ids]


def llama_cpp(path: Path, context: int):
    """llama.cpp greedy on the file with every usable core (devtools/llama_peer.py);
    None and why, when it cannot run here."""
    from devtools import llama_peer

    reason = llama_peer.missing() or llama_peer.crash_on(path, context)
    if reason:
        return None, reason
    generator = llama_peer.LlamaGenerator(path, context=context)
    return lambda prompt, count: stamped(generator.stream(prompt, count)), None


# -- the run and its table --------------------------------------------------------


def leading_agreement(ours: list[int], theirs: list[int], window: int) -> int:
    """How many of the first `window` tokens are the same before the first
    that differs (after it, each continues its own text)."""
    agree = 0
    for mine, other in zip(ours[:window], theirs[:window], strict=False):
        if mine != other:
            break
        agree += 1
    return agree


def measure(path: Path, count: int, rounds: int) -> dict:
    from devtools.bench import llama as bench

    started = time.perf_counter()
    model = load_step23(path)
    load_seconds = time.perf_counter() - started
    contenders = {}
    contenders["ours"], compile_seconds = bench.ours(model)
    tokenizer, hf_model = tokenizer_and_transformers(path)
    contenders["transformers"] = bench.transformers_contender(hf_model)
    prompt = chat_prompt(tokenizer)
    peer, left_out = llama_cpp(path, context=len(prompt) + count + 16)
    if peer is not None:
        contenders["llama.cpp"] = peer
    samples, load = bench.interleaved(contenders, prompt, count, rounds)
    tokens = {key: runs[0]["tokens"] for key, runs in samples.items()}
    window = min(AGREEMENT_TOKENS, count)
    peers = [key for key in contenders if key != "ours"]
    return dict(
        machine=machine.machine_line(),
        load=load,
        file=file_line(path),
        threads=machine.usable_cpus(),
        prompt_tokens=len(prompt),
        tokens=count,
        rounds=rounds,
        load_seconds=load_seconds,
        compile_seconds=compile_seconds,
        summaries=bench.summaries(samples),
        ratios={peer: bench.paired_ratio(samples, "ours", peer) for peer in peers},
        agreement={
            peer: dict(agree=leading_agreement(tokens["ours"], tokens[peer], window), of=window)
            for peer in peers
        },
        answer=tokenizer.decode(tokens["ours"][:AGREEMENT_TOKENS]),
        tokens_made=tokens,
        left_out={"llama.cpp": left_out} if left_out else {},
    )


def format_report(data: dict) -> str:
    from devtools.bench.llama import table_head

    lines = table_head(
        data,
        f"The file: {data['file']}, batch 1, "
        f"a {data['prompt_tokens']}-token chat prompt, {data['tokens']} tokens greedy, "
        f"{data['threads']} threads for llama.cpp and PyTorch; "
        f"{data['rounds']} interleaved rounds after a warm-up.",
        ["contender", "decode", "first token", "ours / it, paired", "greedy tokens as ours"],
    )
    for key, label in CONTENDERS.items():
        if key in data["summaries"]:
            lines.append(row(label, data, key))
    lines += [
        "",
        f"Ours read and widened the file's weights in {data['load_seconds']:.0f} s, then "
        f"compiled in {data['compile_seconds']:.0f} s (the weights are constants of its graph, so "
        "MAX's cache serves this very checkpoint only). Its answer begins: "
        f'"{data["answer"].strip().splitlines()[0]} ..."',
    ]
    lines += [
        f"{key} was not measured: {why.rstrip('.')}." for key, why in data["left_out"].items()
    ]
    return "\n".join(lines) + "\n"


def row(label: str, data: dict, key: str) -> str:
    """A contender's row: its speeds, ours over it, and its tokens against ours."""
    summary = data["summaries"][key]
    ratio, agreement = data["ratios"].get(key), data["agreement"].get(key)
    ratio_cell = stats.format_spread(ratio, "x") if ratio else "-"
    agreement_cell = f"the first {agreement['agree']} of {agreement['of']}" if agreement else "-"
    return (
        f"| {label} | {stats.format_spread(summary['decode_tok_s'], ' tok/s', 1)} "
        f"| {stats.format_spread(summary['first_token_ms'], ' ms', 0)} "
        f"| {ratio_cell} | {agreement_cell} |"
    )
