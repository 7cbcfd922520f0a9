"""Step 22: sliding-window attention.

Goal: each token attends to itself and the window - 1 tokens before it,
nothing older. The causal mask becomes a band; the cache keeps only what the
next token can still see; and for decoding, a rolling buffer of `window`
slots stores the token at position p in slot p % window.

Run: pixi run s22    (or: python -m tests.check 22)
Stuck? Read docs/src/step_22.md (pixi run book).
"""

import math

from max.driver import Device
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor


def sliding_window_mask(
    sequence_length: int, num_tokens: int, window: int, *, dtype: DType, device: Device
) -> Tensor:
    """A [sequence_length, num_tokens + sequence_length] additive mask.

    The columns are num_tokens cached tokens, then the new ones; new token i
    sits at column num_tokens + i and sees that column and the window - 1
    columns before it. The cache holds fewer than `window` tokens.
    """
    if num_tokens >= window:
        raise ValueError(f"a cache of {num_tokens} tokens is longer than window - 1 = {window - 1}")
    total_length = num_tokens + sequence_length
    mask = Tensor.full([sequence_length, total_length], float("-inf"), dtype=dtype, device=device)
    # Zero the band: row i's own column is num_tokens + i, and it reaches back to
    # column num_tokens + i - (window - 1); band_part measures both of its widths
    # from the diagonal, where the row equals the column. It takes no lower width
    # as large as the matrix's rows, and needs none: from the last row, a width of
    # sequence_length - 1 already reaches column 0.
    # TODO: the mask with its band zeroed: how far below the diagonal the band
    #   reaches, and how far above it (the page's "The band").
    below = None
    return None
    # END TODO


def sliding_window_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    past_key: Tensor,
    past_value: Tensor,
    window: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """Causal attention within a window, with a cache of the last window - 1 tokens.

    query, key, value: the new tokens, [batch, heads, seq, head_dim] (keys
    already rotated); past_key, past_value: [batch, heads, past, head_dim],
    past < window. Returns the output and the caches the next call needs.
    """
    seq_length, num_cached = int(query.shape[2]), int(past_key.shape[2])
    key = F.concat([past_key, key], axis=2)
    value = F.concat([past_value, value], axis=2)

    scores = query @ key.transpose(-1, -2) / math.sqrt(int(query.shape[-1]))
    mask = sliding_window_mask(
        seq_length, num_cached, window, dtype=scores.dtype, device=scores.device
    )
    output = F.softmax(scores + mask, axis=-1) @ value

    # The next token sees itself and the window - 1 tokens before it: keep those.
    # TODO: the index along the sequence axis from which the grown caches are
    #   kept, so that they hold at most window - 1 tokens (the page's "What the
    #   cache keeps").
    keep_from = None
    # END TODO
    return output, key[:, :, keep_from:], value[:, :, keep_from:]


def ring_write(buffer: Tensor, new: Tensor, position: int) -> Tensor:
    """Store one token's [batch, heads, 1, head_dim] in its slot of the
    [batch, heads, window, head_dim] rolling buffer: slot position % window."""
    # TODO: the slot this position is stored in (the page's "A rolling buffer").
    slot = None
    # END TODO
    return F.concat([buffer[:, :, :slot], new, buffer[:, :, slot + 1 :]], axis=2)


def ring_read(buffer: Tensor, num_seen: int) -> Tensor:
    """The buffered tokens oldest first: the last min(num_seen, window) of the
    num_seen tokens written so far."""
    window = int(buffer.shape[2])
    if num_seen <= window:  # not wrapped yet: slots 0 .. num_seen - 1 in order
        return buffer[:, :, :num_seen]
    # Wrapped: the oldest token sits in the slot the next one will overwrite.
    # TODO: the slot of the oldest token still buffered, and the buffer read
    #   from there round to the slot before it: [batch, heads, window,
    #   head_dim], oldest first (the page's "Reading it in order").
    oldest = None
    return None
    # END TODO


def ring_decode(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    buffer_key: Tensor,
    buffer_value: Tensor,
    position: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """Attention of one new token at `position` over the rolling buffer.

    query, key, value: [batch, heads, 1, head_dim]; the buffers: [batch, heads,
    window, head_dim]. Returns the output and the buffers with the token stored.
    """
    # TODO: the new key and value stored in their buffers, then both buffers
    #   read oldest first, the new token included (the page's "Decoding from
    #   the buffer").
    buffer_key = None
    buffer_value = None
    # Everything in the buffer is inside the new token's window: no mask.
    keys = None
    values = None
    # END TODO
    scores = query @ keys.transpose(-1, -2) / math.sqrt(int(query.shape[-1]))
    return F.softmax(scores, axis=-1) @ values, buffer_key, buffer_value
