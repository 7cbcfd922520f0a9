"""Step 16: compiling the model.

Goal: compile_model(model) traces the model once into a MAX graph for int64
token ids of any batch size and any length, and returns the compiled callable.

Run: pixi run s16    (or: python -m tests.check 16)
Stuck? Read docs/src/step_16.md (pixi run book).
"""

from max.dtype import DType
from max.graph import TensorType

from solutions.solution_13 import MaxGPT2LMHeadModel


def compile_model(model: MaxGPT2LMHeadModel):
    """Compile `model` for int64 token ids of any batch size and length."""
    # TODO: the type of forward's one argument: int64 token ids of shape
    #   [batch, seq], any batch size and any length, on the model's device
    #   (the page's "Symbolic dimensions", and "MAX operations" for the type).
    input_type = None
    # END TODO
    # TODO: the model compiled for that input type: return the callable the
    #   compile gives back (calling it runs the whole graph at once).
    return None
    # END TODO
