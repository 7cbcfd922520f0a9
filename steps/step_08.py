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
    #   Entry (i, j) is query i's dot product with key j: a matrix product of
    #   [.., seq, head_dim] with the keys laid out as [.., head_dim, seq] (the
    #   page's "Shapes" and "MAX operations").
    scores = None
    # END TODO
    # TODO: divide by sqrt(head_dim) so the softmax does not saturate.
    #   head_dim is read from a shape, so it is a MAX Dim, not a number: the
    #   page's "MAX operations" says how to get one for the square root.
    scores = None
    # END TODO

    # TODO: add the causal mask from step 02 (no cached tokens here).
    #   It is [seq, seq] and broadcasts over batch and heads. Make it in the
    #   scores' dtype and on their device: the sum must stay in the scores'
    #   dtype (bfloat16 or float16 in a deployed model).
    mask = None
    scores = None
    # END TODO

    # TODO: softmax over the keys, then the weighted sum of the values.
    #   The scores are [.., query, key]: each query's row of weights sums to 1.
    #   Weights [.., seq, seq] times values [.., seq, head_dim] give the output,
    #   [.., seq, head_dim] (the page's "A worked example", last two rows).
    weights = None
    return None
    # END TODO
