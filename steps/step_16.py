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
    # TODO: describe the input: int64 token ids of shape [batch, seq] on the
    #   model's device. Strings make a dimension symbolic (any size).
    #   Hint: TensorType(dtype, shape, device=model.device)
    input_type = None
    # END TODO
    # TODO: compile the model for that input type and return the callable.
    return None
    # END TODO
