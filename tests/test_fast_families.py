"""fast/llama.py on the Llama family's other members, against transformers.

test_fast_llama.py checks the fast path against step 23's model, which runs
neither Qwen2's q, k and v biases nor Llama 3's scaled rotary frequencies.
Here each is written as a GGUF file the way llama.cpp's converter writes it
(Qwen2's q and k rows as they are, a Llama's permuted; Llama 3's scaling as a
rope_freqs.weight of factors), and its logits are checked against
transformers' model on the numbers the file's blocks stand for: every
position of a prompt fed a token at a time (a decoded token's layers in one
call of llama_decode.mojo), then the prompt at once (MAX's operations around
our projections). Three of the files have the widths of real models, with
fewer layers: Qwen2.5-0.5B's (896 wide, 14 query heads to 2 key/value heads),
Llama-3.2-1B's (2048 wide, 8192 inner) and SmolLM2-360M's (960 wide, 15
query heads to 5). And `generate --gguf --chat`
answers a Qwen2 file's chat prompt as transformers' model does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from common.checkpoint import read_safetensors
from common.random_checkpoint import write_random_llama
from devtools.random_llama_gguf import llama3_factors
from tests import reference_gguf as writer
from tests import reference_quant as quant

BIAS_SCALE = 0.5  # q, k and v are about 0.16 without them: a path that left them out is far off
# Llama 3's scaling with a short original context, so that it turns most of the
# frequencies within the test's ten positions (at 8192 it would turn none there).
# As devtools/random_llama_gguf.py's Shape holds it: factor, low and high
# frequency factors, original context.
LLAMA3 = (8.0, 1.0, 4.0, 16)
TOKENS = [5, 17, 250, 3, 99, 42, 7, 128, 64, 11]


@dataclass(frozen=True)
class Family:
    architecture: str  # general.architecture: "qwen2" (q, k, v biases) or "llama"
    hidden: int
    inner: int
    heads: int
    kv_heads: int
    layers: int
    theta: float
    tied: bool
    llama3: tuple[float, float, float, int] | None = None  # as LLAMA3, or none

    def config(self) -> dict:
        """The transformers config's fields."""
        return dict(
            vocab_size=300,
            hidden_size=self.hidden,
            intermediate_size=self.inner,
            num_hidden_layers=self.layers,
            num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads,
            rms_norm_eps=1e-6,
            max_position_embeddings=64,
            tie_word_embeddings=self.tied,
        )

    def rope_parameters(self) -> dict:
        if not self.llama3:
            return {"rope_type": "default", "rope_theta": self.theta}
        factor, low, high, original = self.llama3
        return {
            "rope_type": "llama3",
            "rope_theta": self.theta,
            "factor": factor,
            "low_freq_factor": low,
            "high_freq_factor": high,
            "original_max_position_embeddings": original,
        }


FAMILIES = {
    "qwen2": Family("qwen2", 64, 96, 4, 2, layers=3, theta=5000.0, tied=False),
    "Qwen2.5-0.5B's widths": Family("qwen2", 896, 4864, 14, 2, layers=2, theta=1e6, tied=True),
    "Llama-3.2-1B's widths": Family(
        "llama", 2048, 8192, 32, 8, layers=1, theta=10000.0, tied=True, llama3=LLAMA3
    ),
    # Five key/value heads of three queries each: an odd count to share between two cores.
    "SmolLM2-360M's widths": Family("llama", 960, 2560, 15, 5, layers=2, theta=1e5, tied=True),
}


def random_state(family: Family, directory: Path) -> dict[str, np.ndarray]:
    """Random weights by transformers' names; Qwen2's q, k and v with biases."""
    checkpoint = write_random_llama(directory, {**family.config(), "model_type": "llama"})
    state = read_safetensors(checkpoint / "model.safetensors")
    if family.architecture == "qwen2":
        rng = np.random.default_rng(7)
        for name in [
            n for n in state if n.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight"))
        ]:
            bias = rng.standard_normal(state[name].shape[0], dtype=np.float32) * BIAS_SCALE
            state[name.removesuffix("weight") + "bias"] = bias
    return state


def write_file(
    family: Family, kind: str, path: Path, head: str | None = None, **metadata
) -> dict[str, np.ndarray]:
    """The family's model as a GGUF file, its matrices in `kind` (its token
    embedding, the tied head, in `head` if given) and `metadata` besides the
    model's; what each tensor stands for, by transformers' names (the blocks
    widened; a Q6_K head as the Q8_0 blocks the fast path makes of it, which
    test_fast_llama.py checks against the Q6_K numbers)."""
    state = random_state(family, path.parent / f"{path.stem}_checkpoint")
    if family.architecture == "llama":  # q's and k's rows permuted, as the converter does
        stored = writer.llama_tensors(state, heads=family.heads, kv_heads=family.kv_heads)
        arrays = {name: array for name, _, array in stored}
    else:
        arrays = {writer.gguf_name(name): array for name, array in state.items()}
    kinds = {name: kind if a.ndim == 2 else "F32" for name, a in arrays.items()}
    if head:
        kinds["token_embd.weight"] = head
    tensors = [(name, kinds[name], a) for name, a in arrays.items()]
    if family.llama3:  # the rotary factors as llama.cpp's converter writes them
        factors = llama3_factors(family.hidden // family.heads, family.theta, *family.llama3)
        tensors.append(("rope_freqs.weight", "F32", factors))
    arch = family.architecture
    metadata |= writer.llama_metadata(
        layers=family.layers, hidden=family.hidden, intermediate=family.inner,
        heads=family.heads, kv_heads=family.kv_heads, theta=family.theta, eps=1e-6,
        context=64, architecture=arch,
    )  # fmt: skip
    metadata[f"{arch}.vocab_size"] = (writer.U32, family.config()["vocab_size"])
    layout = writer.gguf_bytes(metadata, tensors)
    path.write_bytes(layout.data)
    widened = {name: layout.arrays[writer.gguf_name(name)] for name in state}
    if family.architecture == "llama":  # q's and k's rows back in transformers' order
        for part, heads in (("q_proj", family.heads), ("k_proj", family.kv_heads)):
            for name in [n for n in widened if f".{part}." in n]:
                widened[name] = writer.converter_unpermute(widened[name], heads)
    if head == "Q6_K":  # the fast path holds its numbers rounded again, to Q8_0
        embedding = "model.embed_tokens.weight"
        widened[embedding] = quant.dequantize_q8_0(*quant.quantize_q8_0(widened[embedding]))
    return widened


def transformers_model(family: Family, state: dict[str, np.ndarray]):
    """transformers' model of the family, holding `state`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    config, model = (
        (Qwen2Config, Qwen2ForCausalLM)
        if family.architecture == "qwen2"
        else (LlamaConfig, LlamaForCausalLM)
    )
    hf = model(config(**family.config(), rope_parameters=family.rope_parameters())).eval()
    weights = {name: torch.from_numpy(array) for name, array in state.items()}
    if family.tied:
        weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
    hf.load_state_dict(weights)
    return hf


def transformers_logits(family: Family, state: dict[str, np.ndarray], tokens: list[int]):
    """transformers' model of the family on `state`: the logits [len(tokens), vocab]."""
    import torch

    with torch.no_grad():
        return transformers_model(family, state)(torch.tensor([tokens])).logits[0].numpy()


CASES = [
    ("qwen2", "F32", 1e-4),
    ("qwen2", "Q4_1", 4e-3),
    ("Qwen2.5-0.5B's widths", "Q4_1", 4e-3),
    ("Llama-3.2-1B's widths", "Q8_0", 4e-3),
    ("SmolLM2-360M's widths", "Q4_0", 4e-3),
    # As llama.cpp's quantizer writes a Q4 model 2048 wide: its tied head in
    # Q6_K, which the fast path reads as Q8_0 blocks made from its numbers.
    ("Llama-3.2-1B's widths", "Q4_0 with a Q6_K head", 4e-3),
]


@pytest.mark.parametrize(("family", "kind", "tolerance"), CASES)
def test_the_fast_model_computes_transformers_logits(tmp_path, family, kind, tolerance):
    from fast import llama

    kind, _, head = kind.partition(" with a ")
    path = tmp_path / f"{kind}.gguf"
    widened = write_file(FAMILIES[family], kind, path, head=head.removesuffix(" head") or None)
    model = llama.load_gguf(path)
    assert model.config.attention_bias == (FAMILIES[family].architecture == "qwen2")
    assert model.one_block_kind() == kind, "a decoded token's layers are not one call"
    generator = llama.FastLlamaGenerator(model, context=64)
    expected = transformers_logits(FAMILIES[family], widened, TOKENS)
    # Tolerances as in test_fast_llama: a block's product rounds x to 16-bit
    # levels, and a block file's keys and values are kept in float16.
    decoded = [generator.decoded_logits(token, position) for position, token in enumerate(TOKENS)]
    prompt = generator.prompt_logits(TOKENS, prompt_graph=True)
    checks = [(f"position {p}", ours, expected[p]) for p, ours in enumerate(decoded)]
    checks.append(("the prompt at once", prompt, expected[-1]))
    for label, ours, theirs in checks:
        scale = np.abs(theirs).max()
        np.testing.assert_allclose(ours, theirs, atol=tolerance * scale, err_msg=label)


def test_generate_answers_a_qwen2_chat_as_transformers_does(tmp_path, capfd):
    """`generate --gguf --chat` on a Qwen2 file (its tokenizer Qwen2's kind,
    its merges none: test_gguf_tokenizer.py checks the split itself): the
    answer printed is transformers' greedy answer to the same chat prompt,
    up to the file's end token."""
    import torch

    from common.gguf_tokenizer import GGUFTokenizer
    from solutions.solution_29 import read_gguf
    from tools import generate as tool

    question, end_id = "What is 12 + 34?", 257
    family, path = FAMILIES["qwen2"], tmp_path / "chat.gguf"
    split = {"tokenizer.ggml.pre": (writer.STRING, "qwen2")}
    widened = write_file(family, "Q8_0", path, **writer.tokenizer_metadata(300, **split))
    code = tool.main(
        ["--gguf", str(path), "--chat", "--greedy", "--max-new-tokens", "6", "--prompt", question]
    )
    out, err = capfd.readouterr()
    assert code == 0, err
    tokenizer = GGUFTokenizer(read_gguf(path).metadata, str(path))
    ids = tokenizer.encode(tokenizer.chat_prompt(question), add_bos=False)
    hf, answer = transformers_model(family, widened), []
    with torch.no_grad():
        while len(answer) < 6 and end_id not in answer:
            logits = hf(torch.tensor([ids + answer])).logits[0, -1]
            answer.append(int(logits.argmax()))
    assert out == tokenizer.decode([token for token in answer if token != end_id])
