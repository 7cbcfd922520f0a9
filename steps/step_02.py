"""Step 02: the causal mask.

Goal: build the additive mask that stops a position from attending to the
future: 0 where attention is allowed, -inf where it is not.

Run: pixi run s02    (or: python -m tests.check 02)
Stuck? Read docs/src/step_02.md (pixi run book).
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
    # TODO: the mask's width is the cached tokens plus the new ones.
    total_length = None
    # END TODO
    # TODO: a [sequence_length, total_length] tensor filled with float("-inf").
    #   Hint: Tensor.full(shape, value, dtype=dtype, device=device)
    mask = None
    # END TODO
    # TODO: zero the band each row may see; keep -inf outside it.
    #   Hint: F.band_part(x, num_lower, num_upper, exclude) carves a band around
    #   the diagonal (the page says which entries are in it, and what exclude
    #   does). How far left of its diagonal may a row look? How far right, when
    #   num_tokens tokens are already cached?
    return None
    # END TODO
