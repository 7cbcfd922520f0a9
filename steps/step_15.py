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
        # TODO: leave out the buffers that are not parameters: the names that
        #   end in one of NOT_PARAMETERS, dot included (c_attn.bias is a
        #   parameter). Give every other name that starts with neither
        #   "transformer." nor "lm_head." the "transformer." prefix (the hub's
        #   gpt2 stores "wte.weight"; the model's is "transformer.wte.weight").
        is_buffer = None
        if is_buffer:
            continue
        lacks_prefix = None
        if lacks_prefix:
            name = None
        # END TODO
        # TODO: every array as float32 (checkpoints come in float16 too). The
        #   weights (not the biases) of the CONV1D_LAYERS are [in, out]: make
        #   them [out, in], as a C-contiguous copy (MAX copies only contiguous
        #   arrays, and a transpose is a view). Everything else keeps its layout.
        array = None
        is_conv1d_weight = None
        if is_conv1d_weight:
            array = None
        # END TODO
        state[name] = array
    # TODO: tie the head. GPT-2 stores the tied matrix once, as wte.weight. A
    #   head the checkpoint stores is its own, and without the table there is
    #   nothing to tie (check_against then names it missing): tie only when
    #   the state lacks lm_head.weight and has transformer.wte.weight.
    ties = None
    if ties:
        state["lm_head.weight"] = None
    # END TODO
    return state


def check_against(state: dict[str, np.ndarray], expected: dict[str, tuple[int, ...]]) -> None:
    """Raise CheckpointError naming the first tensor that is missing, extra, or
    of the wrong shape."""
    for name, shape in expected.items():
        # TODO: refuse a state without a tensor `name` (test that before reading
        #   state[name]: a KeyError says nothing about the checkpoint), and a
        #   tensor whose shape is not `shape` (compare both as tuples). Each
        #   message names the tensor; for a wrong shape it gives both shapes,
        #   the checkpoint's and the model's: whoever reads it must know what to fix.
        missing = None
        if missing:
            message = None
            raise CheckpointError(message)
        wrong_shape = None
        if wrong_shape:
            message = None
            raise CheckpointError(message)
        # END TODO
    # TODO: a tensor the model does not have is a mistake too: refuse it with a
    #   message naming it (the first in sorted order if there are several).
    extra = None
    if extra:
        message = None
        raise CheckpointError(message)
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
