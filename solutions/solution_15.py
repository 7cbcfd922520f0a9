"""Step 15: loading pretrained weights.

The published GPT-2 is a Hugging Face checkpoint: config.json with the
hyperparameters and model.safetensors with every tensor by name. Our modules
carry Hugging Face's names, so loading is mostly a renaming exercise, with
three wrinkles: Hugging Face's GPT-2 stores its linear layers as Conv1D with
[in, out] weights (MAX's Linear is [out, in]), some checkpoints carry old mask
buffers that are not parameters, and the tied lm_head is usually not stored at
all. We read the tensors with safetensors into NumPy: no torch needed.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import numpy as np

from solutions.solution_01 import GPT2Config

# Hugging Face's GPT-2 uses Conv1D layers, whose weights are [in, out]; MAX's
# Linear stores [out, in]. These are the layers to transpose.
CONV1D_LAYERS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
# Buffers some checkpoints carry that are not parameters (old causal masks).
NOT_PARAMETERS = (".attn.bias", ".attn.masked_bias")


class CheckpointError(Exception):
    """A checkpoint that cannot be used; the message says which file or tensor."""


def load_config(directory: Path) -> GPT2Config:
    path = Path(directory) / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{path} does not exist: a checkpoint directory needs config.json.")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise CheckpointError(f"{path} is not valid JSON: {error}") from None
    known = {f.name for f in fields(GPT2Config)}
    return GPT2Config(**{k: v for k, v in raw.items() if k in known})


def read_tensors(directory: Path) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = Path(directory) / "model.safetensors"
    if not path.is_file():
        raise CheckpointError(
            f"{path} does not exist: the weights must be in safetensors format "
            "(save_pretrained writes model.safetensors)."
        )
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(f"{path} could not be read: {error}") from None


def to_max_layout(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Hugging Face names and layout -> ours: `transformer.` prefix, Linear
    weights transposed, float32, lm_head tied to wte when it is absent."""
    state = {}
    for name, array in tensors.items():
        if name.endswith(NOT_PARAMETERS):
            continue  # a mask buffer: the model builds its own (step 02)
        if not name.startswith(("transformer.", "lm_head.")):
            name = "transformer." + name  # the hub's gpt2 omits the prefix
        array = np.asarray(array, dtype=np.float32)  # float16 checkpoints exist
        if name.endswith(".weight") and any(f".{layer}." in name for layer in CONV1D_LAYERS):
            array = np.ascontiguousarray(array.T)  # MAX copies contiguous arrays only
        state[name] = array
    if "lm_head.weight" not in state and "transformer.wte.weight" in state:
        state["lm_head.weight"] = state["transformer.wte.weight"]  # tied: stored once
    return state


def check_against(state: dict[str, np.ndarray], expected: dict[str, tuple[int, ...]]) -> None:
    """Raise CheckpointError naming the first tensor that is missing, extra, or
    of the wrong shape."""
    for name, shape in expected.items():
        if name not in state:
            raise CheckpointError(f"the checkpoint has no tensor {name} (shape {list(shape)}).")
        found = tuple(state[name].shape)
        if found != tuple(shape):
            raise CheckpointError(
                f"tensor {name} has shape {list(found)} in the checkpoint, but the "
                f"model (from config.json) expects {list(shape)}."
            )
    extra = sorted(set(state) - set(expected))
    if extra:
        raise CheckpointError(f"the checkpoint has a tensor the model does not: {extra[0]}.")


def parameter_shapes(model) -> dict[str, tuple[int, ...]]:
    return {name: tuple(int(d) for d in t.shape) for name, t in model.parameters}


def load_into(model, directory: Path) -> None:
    """Load a checkpoint directory into a model built from its config."""
    state = to_max_layout(read_tensors(directory))
    check_against(state, parameter_shapes(model))
    model.load_state_dict(state)


def load_pretrained(directory: Path, model_class=None):
    """Build a model (MaxGPT2LMHeadModel unless another class with the same
    parameters is given) from a checkpoint directory's config and load it."""
    from max.experimental import functional as F

    from solutions.solution_13 import MaxGPT2LMHeadModel

    config = load_config(directory)
    # Build lazily: the random initial weights are replaced at once, so there
    # is no point computing them (for 124M that saves ~20 s of eager work).
    with F.lazy():
        model = (model_class or MaxGPT2LMHeadModel)(config)
    load_into(model, directory)
    return model
