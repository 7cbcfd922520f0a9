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
    # TODO: the mask's width, one column per token a row may look at.
    #   Those are the num_tokens cached ones and the sequence_length new ones.
    total_length = None
    # END TODO
    # TODO: start from a matrix where nothing is allowed: every entry -inf.
    #   It is [sequence_length, total_length], in the dtype and on the device the
    #   caller asked for (the page's "MAX operations": a tensor of one value).
    mask = None
    # END TODO
    # TODO: zero the band each row may see; keep -inf outside it.
    #   Row i is the token at absolute position num_tokens + i and sees every
    #   column up to and including that one (the page's "A worked example").
    #   From "Carving a band": how far left of its diagonal may a row look, how
    #   far right, and is the band kept or zeroed?
    return None
    # END TODO
