"""Step 13: the language-model head.

Goal: MaxGPT2LMHeadModel wraps GPT2Model as ``transformer`` and adds
``lm_head``, a Linear without bias whose weight is the token embedding table.

Run: pixi run s13    (or: python -m tests.check 13)
Stuck? Read docs/src/step_13.md (pixi run book).
"""

from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from solutions.solution_12 import GPT2Model


class MaxGPT2LMHeadModel(Module[[Tensor], Tensor]):
    """Token ids [batch, seq] -> next-token logits [batch, seq, vocab_size]."""

    def __init__(self, config: GPT2Config) -> None:
        self.config = config
        # TODO: the transformer body (step 12's model) and a head from n_embd to
        #   vocab_size, no bias (Linear adds one unless told not to).
        self.transformer = None
        self.lm_head = None
        # END TODO
        # TODO: tie the head to the embedding table: make lm_head's weight the
        #   very same tensor as transformer.wte's weight (one object under two
        #   names; a computed copy with equal numbers is not a tie).
        self.lm_head.weight = None
        # END TODO

    def forward(self, input_ids: Tensor) -> Tensor:
        # TODO: hidden states from the transformer (it already ends with ln_f),
        #   then logits from the head: every position, no softmax.
        return None
        # END TODO
