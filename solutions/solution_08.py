"""Step 08: scaled dot-product attention with a causal mask.

Every position scores every position it may see (query . key), turns the
scores into weights with a softmax, and returns the weighted sum of values.
"""

import math

from max.experimental import functional as F
from max.experimental.tensor import Tensor

from solutions.solution_02 import causal_mask


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor) -> Tensor:
    """Causal attention over [batch, heads, seq, head_dim] inputs."""
    head_dim = query.shape[-1]
    seq_length = query.shape[-2]

    # [.., seq, head_dim] @ [.., head_dim, seq] -> [.., seq, seq]: entry (i, j)
    # is how well position i's query matches position j's key.
    scores = query @ key.transpose(-1, -2)
    # Dot products of head_dim-wide vectors grow like sqrt(head_dim); dividing
    # keeps the softmax from saturating into a one-hot.
    scores = scores / math.sqrt(int(head_dim))

    # -inf above the diagonal: position i cannot look at positions after i.
    mask = causal_mask(seq_length, 0, dtype=scores.dtype, device=scores.device)
    scores = scores + mask

    # Normalize over the keys (last axis): each row of weights sums to 1.
    weights = F.softmax(scores, axis=-1)
    return weights @ value
