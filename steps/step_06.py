"""Step 06: position embeddings.

Goal: add a learned position vector (table ``wpe``) to each token's embedding,
so the model can tell positions apart.

Run: pixi run s06    (or: python -m tests.check 06)
Stuck? Read docs/src/step_06.md (pixi run book).
"""

from max.dtype import DType
from max.experimental.nn import Embedding, Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config


class GPT2Embeddings(Module[[Tensor], Tensor]):
    """Token embedding plus position embedding, as at the bottom of GPT-2."""

    def __init__(self, config: GPT2Config) -> None:
        # TODO: wte has a row per token, wpe a row per position (n_positions).
        #   Every row is n_embd wide: the tables are [vocab_size, n_embd] and
        #   [n_positions, n_embd], built as in step 05 (the page's "Shapes").
        self.wte = None
        self.wpe = None
        # END TODO

    def forward(self, input_ids: Tensor) -> Tensor:
        seq_length = input_ids.shape[-1]
        # TODO: the positions 0..seq_length-1 as int64, on input_ids' device.
        #   A [seq_length] vector of row numbers for wpe: integers like the token
        #   ids (MAX makes floats unless asked), made where the ids live (the
        #   page's "MAX operations" and "Why it is built this way").
        positions = None
        # END TODO
        # TODO: token embeddings plus position embeddings.
        #   [batch, seq, n_embd] + [seq, n_embd]: the positions broadcast over the
        #   batch (the page's "A worked example").
        return None
        # END TODO
