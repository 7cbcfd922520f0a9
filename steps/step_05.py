"""Step 05: token embeddings.

Goal: look every token id up in a learned table ``wte`` of shape
[vocab_size, n_embd].

Run: pixi run s05    (or: python -m tests.check 05)
Stuck? Read docs/src/step_05.md (pixi run book).
"""

from max.experimental.nn import Embedding, Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config


class GPT2TokenEmbedding(Module[[Tensor], Tensor]):
    """Map token ids [batch, seq] to vectors [batch, seq, n_embd]."""

    def __init__(self, config: GPT2Config) -> None:
        # TODO: the token embedding table, one n_embd-wide row per vocabulary entry.
        #   Its weight is [vocab_size, n_embd], under the checkpoint's name wte (the
        #   page's "MAX operations": the layer that holds such a table, and how it
        #   takes its width).
        self.wte = None
        # END TODO

    def forward(self, input_ids: Tensor) -> Tensor:
        # TODO: look the ids up in the table.
        #   [batch, seq] integer ids in, [batch, seq, n_embd] out: row t of the table
        #   for every id t, unchanged (the page's "A worked example").
        return None
        # END TODO
