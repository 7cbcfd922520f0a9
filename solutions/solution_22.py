"""Step 22: sliding-window attention.

With full causal attention a token reads every token before it, so the KV
cache grows with the text and each new token costs more than the last.
Mistral, Gemma and Qwen's long-context layers limit each token to the last
`window` tokens, itself included: the causal mask becomes a band, and the
cache never needs more than the window. Layers stacked on top of each other
still carry information further back, one window per layer.

The cache for decoding is a rolling buffer: `window` slots, the token at
position p stored in slot p % window, overwriting the token that just left
the window. Its size is fixed, whatever the length of the text.
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
    below = min(window - 1 - num_tokens, sequence_length - 1)
    return F.band_part(mask, num_lower=below, num_upper=num_tokens, exclude=True)


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
    keep_from = max(0, num_cached + seq_length - (window - 1))
    return output, key[:, :, keep_from:], value[:, :, keep_from:]


def ring_write(buffer: Tensor, new: Tensor, position: int) -> Tensor:
    """Store one token's [batch, heads, 1, head_dim] in its slot of the
    [batch, heads, window, head_dim] rolling buffer: slot position % window."""
    slot = position % int(buffer.shape[2])
    return F.concat([buffer[:, :, :slot], new, buffer[:, :, slot + 1 :]], axis=2)


def ring_read(buffer: Tensor, num_seen: int) -> Tensor:
    """The buffered tokens oldest first: the last min(num_seen, window) of the
    num_seen tokens written so far."""
    window = int(buffer.shape[2])
    if num_seen <= window:  # not wrapped yet: slots 0 .. num_seen - 1 in order
        return buffer[:, :, :num_seen]
    # Wrapped: the oldest token sits in the slot the next one will overwrite.
    oldest = num_seen % window
    return F.concat([buffer[:, :, oldest:], buffer[:, :, :oldest]], axis=2)


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
    buffer_key = ring_write(buffer_key, key, position)
    buffer_value = ring_write(buffer_value, value, position)
    # Everything in the buffer is inside the new token's window: no mask.
    keys = ring_read(buffer_key, position + 1)
    values = ring_read(buffer_value, position + 1)
    scores = query @ keys.transpose(-1, -2) / math.sqrt(int(query.shape[-1]))
    return F.softmax(scores, axis=-1) @ values, buffer_key, buffer_value
