"""Step 08: scaled dot-product attention with a causal mask.

Goal: softmax(query @ key^T / sqrt(head_dim) + causal mask) @ value, for
inputs of shape [batch, heads, seq, head_dim].

Run: pixi run s08    (or: python -m tests.check 08)
Stuck? Read docs/src/step_08.md (pixi run book).
"""

import math

from max.experimental import functional as F
from max.experimental.tensor import Tensor

from solutions.solution_02 import causal_mask


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor) -> Tensor:
    """Causal attention over [batch, heads, seq, head_dim] inputs."""
    head_dim = query.shape[-1]
    seq_length = query.shape[-2]

    # TODO: score every query against every key: [.., seq, seq].
    #   Hint: transpose the last two axes of key, then use @.
    scores = None
    # END TODO
    # TODO: divide by sqrt(head_dim) so the softmax does not saturate.
    #   Hint: head_dim is a Dim; int(head_dim) turns it into a number.
    scores = None
    # END TODO

    # TODO: add the causal mask from step 02 (no cached tokens here).
    #   Hint: build it with the scores' dtype and device, so the sum is defined.
    mask = None
    scores = None
    # END TODO

    # TODO: softmax over the keys, then the weighted sum of the values.
    #   Hint: which axis of the scores [.., query, key] holds the keys?
    weights = None
    return None
    # END TODO
