"""Step 15: loading pretrained weights.

Goal: load a Hugging Face GPT-2 checkpoint (config.json and model.safetensors)
into the model of step 13. to_max_layout renames and reshapes the tensors to
the model's parameters; check_against refuses a checkpoint that does not fit,
naming the tensor.

Run: pixi run s15    (or: python -m tests.check 15)
Stuck? Read docs/src/step_15.md (pixi run book).
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
        # TODO: skip (`continue`) the buffers that are not parameters: names
        #   ending in one of NOT_PARAMETERS. Give every other name that starts
        #   with neither "transformer." nor "lm_head." the "transformer." prefix
        #   (the hub's gpt2 stores "wte.weight"; the model's is "transformer.wte.weight").
        #   Hint: str.endswith and str.startswith accept a tuple of strings.
        name = None
        # END TODO
        # TODO: make the array float32, and transpose the weights of the Conv1D
        #   layers ([in, out] -> [out, in]); everything else keeps its layout.
        #   Hint: a Conv1D weight's name ends in ".weight" and contains
        #   f".{layer}." for a layer of CONV1D_LAYERS. A transpose (.T) is a view
        #   in another order, and MAX copies only contiguous arrays:
        #   np.ascontiguousarray makes the copy.
        array = None
        # END TODO
        state[name] = array
    # TODO: tie the head. GPT-2 stores the tied matrix once, as wte.weight:
    #   when the checkpoint has no lm_head.weight (and has the table), use
    #   transformer.wte.weight for it. A head the checkpoint stores is its own:
    #   keep it.
    state["lm_head.weight"] = None
    # END TODO
    return state


def check_against(state: dict[str, np.ndarray], expected: dict[str, tuple[int, ...]]) -> None:
    """Raise CheckpointError naming the first tensor that is missing, extra, or
    of the wrong shape."""
    for name, shape in expected.items():
        # TODO: raise CheckpointError when the state has no tensor `name`, and
        #   when the shape it has there is not `shape`. Name the tensor in the
        #   message (and give both shapes): whoever reads it must know what to fix.
        #   Hint: test `name not in state` before reading state[name]; compare
        #   the shapes as tuples.
        found = None
        # END TODO
    # TODO: a tensor the model does not have is a mistake too: raise
    #   CheckpointError naming it (the first in sorted order if there are several).
    #   Hint: set(state) - set(expected) are the extra names.
    extra = None
    # END TODO


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
