"""Small GPT-2 checkpoints made locally, for tests that must not download: with
torch and transformers (hf_model, write_checkpoint), or with NumPy and
safetensors only (random_gpt2_weights, hugging_face_layout,
write_safetensors_checkpoint), as the step 15 checks and experiments need."""

from __future__ import annotations

from pathlib import Path

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A language model predicts the next token from the tokens before it.",
    "Attention lets every position look at the positions before it.",
    "MAX compiles the model into a graph and runs it fast.",
] * 20


def write_tokenizer(directory: Path, vocab_size: int = 300) -> None:
    """A byte-level BPE tokenizer (GPT-2's kind) trained on a few sentences."""
    from tokenizers.implementations import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(
        SENTENCES, vocab_size=vocab_size, min_frequency=1, show_progress=False
    )
    tokenizer.save(str(Path(directory) / "tokenizer.json"))


def hf_model(seed: int = 0, initializer_range: float = 0.02, **config):
    """A randomly initialized Hugging Face GPT2LMHeadModel (torch), eval mode."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    sizes = dict(vocab_size=300, n_positions=64, n_embd=64, n_layer=2, n_head=4)
    torch.manual_seed(seed)
    hf_config = GPT2Config(
        **{**sizes, **config},
        initializer_range=initializer_range,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    return GPT2LMHeadModel(hf_config).eval()


def write_checkpoint(directory: Path, model=None, **config) -> Path:
    """save_pretrained a model (by default a small random one) and a tokenizer."""
    directory = Path(directory)
    model = hf_model(**config) if model is None else model
    model.save_pretrained(directory)
    write_tokenizer(directory, vocab_size=min(300, model.config.vocab_size))
    return directory


# -- without torch: checkpoints written with NumPy and safetensors only --------

# Hugging Face's GPT-2 stores these layers as Conv1D, weights [in, out].
CONV1D_LAYERS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")


def is_conv1d_weight(name: str) -> bool:
    return name.endswith(".weight") and any(f".{layer}." in name for layer in CONV1D_LAYERS)


def random_gpt2_weights(config, seed: int = 0, *, tied: bool = True) -> dict:
    """GPT-2-like random weights in the model's layout (MAX's Linear: [out, in]),
    named like MaxGPT2LMHeadModel's parameters: N(0, 0.02), layer-norm scales
    near 1. lm_head.weight is wte's table when `tied`, else a matrix of its own."""
    import numpy as np

    from tests.specs.common import lm_shapes

    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in lm_shapes(config).items():
        std, mean = (0.1, 1.0) if len(shape) == 1 and name.endswith(".weight") else (0.02, 0.0)
        weights[name] = (mean + std * rng.standard_normal(shape)).astype(np.float32)
    if tied:
        weights["lm_head.weight"] = weights["transformer.wte.weight"]
    return weights


def hugging_face_layout(
    weights: dict, *, prefix: bool, head: bool, buffers: bool, dtype=None
) -> dict:
    """Model-layout weights as a Hugging Face GPT-2 checkpoint holds them:
    Conv1D weights transposed to [in, out]; without the `transformer.` prefix
    unless `prefix` (the hub's gpt2 has none); lm_head.weight only if `head`;
    the old causal-mask buffers h.N.attn.bias and h.N.attn.masked_bias if
    `buffers`; every tensor as `dtype` (float32 by default)."""
    import numpy as np

    dtype = np.float32 if dtype is None else dtype
    tensors = {}
    for name, array in weights.items():
        if name == "lm_head.weight" and not head:
            continue
        if is_conv1d_weight(name):
            array = array.T
        if not prefix:
            name = name.removeprefix("transformer.")
        tensors[name] = np.ascontiguousarray(array, dtype=dtype)
    if buffers:
        size = int(weights["transformer.wpe.weight"].shape[0])
        start = "transformer." if prefix else ""
        for i in range(sum(n.endswith(".ln_1.weight") for n in weights)):
            mask = np.tril(np.ones((size, size), dtype=np.float32))[None, None]
            tensors[f"{start}h.{i}.attn.bias"] = mask
            tensors[f"{start}h.{i}.attn.masked_bias"] = np.asarray(-1e4, dtype=np.float32)
    return tensors


def write_safetensors_checkpoint(directory: Path, config, tensors: dict) -> Path:
    """A checkpoint directory without torch: config.json with Hugging Face's
    field names for `config` (a GPT2Config of step 01), and `tensors` as
    model.safetensors."""
    import json

    from safetensors.numpy import save_file

    directory = Path(directory)
    fields = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "activation_function": "gelu_new",
        "vocab_size": config.vocab_size,
        "n_positions": config.n_positions,
        "n_ctx": config.n_positions,
        "n_embd": config.n_embd,
        "n_layer": config.n_layer,
        "n_head": config.n_head,
        "n_inner": None,
        "layer_norm_epsilon": config.layer_norm_epsilon,
        "initializer_range": 0.02,
    }
    (directory / "config.json").write_text(json.dumps(fields, indent=2))
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    return directory


def run_tool(module: str, *args: str, timeout: float, **env: str):
    """`python -m module args` from the repository, as a learner runs it:
    MAX-safe environment (with `env` added), output captured as text."""
    import subprocess
    import sys

    from common import max_runtime

    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=Path(__file__).resolve().parents[1],
        env=max_runtime.child_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
