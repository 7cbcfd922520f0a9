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

from devtools.bench import machine, stats

QUESTION = "Explain why the sky is blue."
AGREEMENT_TOKENS = 32  # greedy tokens compared with ours
CONTENDERS = {
    "ours": "ours, step 23 (compiled, KV cache, float32 widened from the file)",
    "step 27": "ours, step 23 with step 27's Q8Linear (Q8_0 blocks widened in the graph)",
    "step 30": "ours, step 23 with step 30's kernel (Q8_0 blocks read as they are)",
    "transformers": "transformers (PyTorch, float32 widened from the file)",
    "llama.cpp": "llama.cpp (llama-cpp-python, the file's blocks as stored)",
}

# -- the file ---------------------------------------------------------------------


def file_line(gguf) -> str:
    """The file's name, size and the block types of its tensors, from step
    29's GGUFFile (the file as read once for the model)."""
    path = Path(gguf.path)
    kinds = Counter(info.kind for info in gguf.tensors.values())
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


def with_q8_layers(model, linear_class):
    """`model` (step 23's) with each layer's seven projections kept as Q8_0
    blocks, step 27's quantizer run on the widened weights, and multiplied by
    `linear_class`: step 27's Q8Linear or step 30's kernel. The tied head
    stays float32: it is the embedding table, which a token reads one row of."""
    from solutions.solution_27 import quantize_q8_0

    for layer in model.model.layers:
        for parent, names in (
            (layer.self_attn, ("q_proj", "k_proj", "v_proj", "o_proj")),
            (layer.mlp, ("gate_proj", "up_proj", "down_proj")),
        ):
            for name in names:
                weight = getattr(parent, name).weight.to_numpy()
                scales, values = quantize_q8_0(weight)
                blocks = linear_class(weight.shape[1], weight.shape[0])
                blocks.load_state_dict({"scales": scales, "values": values})
                setattr(parent, name, blocks)
    return model


def q8_contenders(gguf) -> dict:
    """Step 23's model from the file read already (step 29's GGUFFile) twice
    more, its projections in Q8_0: through step 27's dequantize-then-matmul,
    and through step 30's kernel."""
    from common import q8_kernel
    from common.steps import step
    from devtools.bench import llama as bench
    from solutions.solution_27 import Q8Linear
    from solutions.solution_29 import load_gguf_llama

    kernel = q8_kernel.kernel_linear(q8_kernel.library(step(30).solution), Q8Linear)
    return {
        key: bench.ours(with_q8_layers(load_gguf_llama(gguf), linear))[0]
        for key, linear in (("step 27", Q8Linear), ("step 30", kernel))
    }


def measure(path: Path, count: int, rounds: int) -> dict:
    from devtools.bench import llama as bench
    from solutions.solution_29 import load_gguf_llama, read_gguf

    started = time.perf_counter()
    gguf = read_gguf(path)  # step 29's reader, once for every use of the file
    model = load_gguf_llama(gguf)  # the file's weights widened
    load_seconds = time.perf_counter() - started
    contenders = {}
    contenders["ours"], compile_seconds = bench.ours(model)
    contenders |= q8_contenders(gguf)
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
        file=file_line(gguf),
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
        f"compiled in {data['compile_seconds']:.0f} s (the graph refers to the weights by name, so "
        "MAX's cache serves every checkpoint of these shapes). Its answer begins: "
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
