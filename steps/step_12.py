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
        # TODO: wte and wpe, the token and position tables of step 06; h, the
        #   config's n_layer blocks of step 11, each with weights of its own, in
        #   a container that names them h.0, h.1, ... like the checkpoint (the
        #   page's "MAX operations"); ln_f, a layer norm with the config's epsilon.
        self.wte = None
        self.wpe = None
        self.h = None
        self.ln_f = None
        # END TODO

    def forward(self, input_ids: Tensor) -> Tensor:
        seq_length = input_ids.shape[-1]
        # TODO: as in step 06: the positions 0 .. seq_length - 1 (int64, on the
        #   ids' device), and each token's wte row plus its position's wpe row,
        #   [batch, seq, n_embd].
        positions = None
        hidden_states = None
        # END TODO
        # TODO: each block reads what the one before returned (the first reads
        #   the embeddings); ln_f normalizes the last one's output, once.
        for block in self.h:
            hidden_states = None
        return None
        # END TODO
