"""Step 12: stacking transformer blocks into GPT2Model.

Goal: GPT2Model embeds tokens and positions, runs n_layer GPT2Blocks in order,
and applies a final LayerNorm ``ln_f``.

Run: pixi run s12    (or: python -m tests.check 12)
Stuck? Read docs/src/step_12.md (pixi run book).
"""

from max.dtype import DType
from max.experimental.nn import Embedding, Module, ModuleList
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from solutions.solution_03 import LayerNorm
from solutions.solution_11 import GPT2Block


class GPT2Model(Module[[Tensor], Tensor]):
    """Token ids [batch, seq] -> final hidden states [batch, seq, n_embd]."""

    def __init__(self, config: GPT2Config) -> None:
        # TODO: wte and wpe as in step 06; h holds config.n_layer blocks, each
        #   a new GPT2Block(config); ln_f is a LayerNorm with the config's eps.
        #   Hint: ModuleList([...]) names its items h.0, h.1, ... like the checkpoint.
        self.wte = None
        self.wpe = None
        self.h = None
        self.ln_f = None
        # END TODO

    def forward(self, input_ids: Tensor) -> Tensor:
        seq_length = input_ids.shape[-1]
        # TODO: embeddings as in step 06 (token + position).
        positions = None
        hidden_states = None
        # END TODO
        # TODO: run every block in order, then the final layer norm.
        for block in self.h:
            hidden_states = None
        return None
        # END TODO
