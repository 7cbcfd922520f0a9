"""Step 02: the causal mask.

A language model predicts each token from the tokens before it, so position i
may attend to positions 0..i and never to the future. We express that as an
additive mask: 0 where attention is allowed, -inf where it is not. Added to the
attention scores before the softmax, -inf becomes a weight of exactly 0.
"""

from max.driver import Device
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor


def causal_mask(
    sequence_length: int,
    num_tokens: int,
    *,
    dtype: DType,
    device: Device,
) -> Tensor:
    """Return a [sequence_length, num_tokens + sequence_length] additive mask.

    ``num_tokens`` counts tokens already processed (a KV cache): the new token
    at row i sits at absolute position ``num_tokens + i`` and may see every
    column up to and including that one.
    """
    total_length = num_tokens + sequence_length
    # Start from a matrix that forbids everything...
    mask = Tensor.full([sequence_length, total_length], float("-inf"), dtype=dtype, device=device)
    # ...then zero the band a row is allowed to see: every column to its left
    # (num_lower=None) and up to num_tokens columns right of the diagonal.
    # exclude=True zeroes the band and keeps the -inf outside it.
    return F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=True)
