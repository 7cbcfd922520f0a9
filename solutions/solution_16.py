"""Step 16: compiling the model.

In eager mode every operation runs the moment Python reaches it: flexible, but
each of GPT-2's ~400 operations per forward pass pays Python and dispatch
overhead, and nothing can be fused. `Module.compile` traces `forward` once
into a MAX graph, optimizes it (fusing operations, planning memory), and
returns a callable that runs the whole graph in one go.

A graph is compiled for input *types*. Naming a dimension with a string
("seq") instead of a number makes it symbolic: one compiled graph then serves
every sequence length, and generating token after token never recompiles.
"""

from max.dtype import DType
from max.graph import TensorType

from solutions.solution_13 import MaxGPT2LMHeadModel


def compile_model(model: MaxGPT2LMHeadModel):
    """Compile `model` for int64 token ids of any batch size and length."""
    input_type = TensorType(DType.int64, ["batch", "seq"], device=model.device)
    return model.compile(input_type)
