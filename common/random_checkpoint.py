"""Small random GPT-2 checkpoints written with NumPy and safetensors only (no
torch), in the layouts real checkpoints use: for step 15's checks
(tests/specs/step_15/layout.py), its experiment
(steps/try_it/step_15_checkpoint_layout.py) and tests/test_checkpoint.py.

- `random_gpt2_weights(config)`: random weights in the model's own layout.
- `hugging_face_layout(weights, ...)`: the same tensors as a Hugging Face
  checkpoint stores them.
- `write_safetensors_checkpoint(directory, config, tensors)`: config.json and
  model.safetensors, as common.checkpoint reads them.
- `write_random_llama(directory, config)`: a Llama-style checkpoint (Part II,
  step 23), for its experiment and devtools/bench/llama.py; `SMOLLM2_135M` is
  the config of the model people run it with.

`config` is a GPT2Config of step 01 (any object with its fields will do).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from common.checkpoint import CONFIG, GPT2, WEIGHTS
from common.gpt2_shapes import lm_shapes

# Hugging Face's GPT-2 stores these layers as Conv1D, weights [in, out].
CONV1D_LAYERS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")


def is_conv1d_weight(name: str) -> bool:
    return name.endswith(".weight") and any(f".{layer}." in name for layer in CONV1D_LAYERS)


def random_gpt2_weights(config: Any, seed: int = 0, *, tied: bool = True) -> dict[str, np.ndarray]:
    """GPT-2-like random weights in the model's layout (MAX's Linear: [out, in]),
    named like MaxGPT2LMHeadModel's parameters: N(0, 0.02), layer-norm scales
    near 1. lm_head.weight is wte's table when `tied`, else a matrix of its own."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in lm_shapes(config).items():
        std, mean = (0.1, 1.0) if len(shape) == 1 and name.endswith(".weight") else (0.02, 0.0)
        weights[name] = (mean + std * rng.standard_normal(shape)).astype(np.float32)
    if tied:
        weights["lm_head.weight"] = weights["transformer.wte.weight"]
    return weights


def hugging_face_layout(
    weights: dict[str, np.ndarray], *, prefix: bool, head: bool, buffers: bool, dtype=None
) -> dict[str, np.ndarray]:
    """Model-layout weights as a Hugging Face GPT-2 checkpoint holds them:
    Conv1D weights transposed to [in, out]; without the `transformer.` prefix
    unless `prefix` (the hub's gpt2 has none); lm_head.weight only if `head`;
    the old causal-mask buffers h.N.attn.bias and h.N.attn.masked_bias if
    `buffers`; every tensor as `dtype` (float32 by default)."""
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


def write_safetensors_checkpoint(
    directory: Path, config: Any, tensors: dict[str, np.ndarray]
) -> Path:
    """A checkpoint directory without torch: config.json with Hugging Face's
    field names for `config`, and `tensors` as model.safetensors (no tokenizer)."""
    fields = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": GPT2,
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
    return write_files(directory, fields, tensors)


def write_files(directory: Path, fields: dict, tensors: dict[str, np.ndarray]) -> Path:
    """`fields` as config.json and `tensors` as model.safetensors in `directory`."""
    from safetensors.numpy import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / CONFIG).write_text(json.dumps(fields, indent=2))
    save_file(tensors, str(directory / WEIGHTS), metadata={"format": "pt"})
    return directory


# SmolLM2-135M's config.json (the hub's HuggingFaceTB/SmolLM2-135M), sizes only.
SMOLLM2_135M = dict(
    model_type="llama",
    architectures=["LlamaForCausalLM"],
    vocab_size=49152,
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    max_position_embeddings=8192,
    rope_theta=100000.0,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
    hidden_act="silu",
    bos_token_id=0,
    eos_token_id=0,
)


def write_random_llama(directory: Path, config: dict, seed: int = 0) -> Path:
    """A Llama checkpoint of random weights, as transformers names them: config.json
    (`config`, the dict a config.json holds) and model.safetensors, N(0, 0.02), norms
    1, the head tied (no lm_head.weight) unless the config unties it."""
    rng = np.random.default_rng(seed)
    hidden, inter = config["hidden_size"], config["intermediate_size"]
    head_dim = hidden // config["num_attention_heads"]
    kv = config["num_key_value_heads"] * head_dim

    def matrix(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float32)

    tensors = {"model.embed_tokens.weight": matrix(config["vocab_size"], hidden)}
    for i in range(config["num_hidden_layers"]):
        prefix = f"model.layers.{i}."
        tensors |= {
            prefix + "input_layernorm.weight": np.ones(hidden, np.float32),
            prefix + "self_attn.q_proj.weight": matrix(hidden, hidden),
            prefix + "self_attn.k_proj.weight": matrix(kv, hidden),
            prefix + "self_attn.v_proj.weight": matrix(kv, hidden),
            prefix + "self_attn.o_proj.weight": matrix(hidden, hidden),
            prefix + "post_attention_layernorm.weight": np.ones(hidden, np.float32),
            prefix + "mlp.gate_proj.weight": matrix(inter, hidden),
            prefix + "mlp.up_proj.weight": matrix(inter, hidden),
            prefix + "mlp.down_proj.weight": matrix(hidden, inter),
        }
    tensors["model.norm.weight"] = np.ones(hidden, np.float32)
    if not config.get("tie_word_embeddings", True):
        tensors["lm_head.weight"] = matrix(config["vocab_size"], hidden)
    return write_files(directory, config, tensors)
