"""The mistakes step 22's checks must name: plausible learner edits of
solutions/solution_22.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

BELOW = "below = min(window - 1 - num_tokens, sequence_length - 1)"
BAND = "return F.band_part(mask, num_lower=below, num_upper=num_tokens, exclude=True)"
KEEP = "keep_from = max(0, num_cached + seq_length - (window - 1))"
SLOT = "slot = position % int(buffer.shape[2])"
READ_WRAPPED = "return F.concat([buffer[:, :, oldest:], buffer[:, :, :oldest]], axis=2)"

MISTAKES = [
    m(
        "window one too wide",
        BELOW,
        "below = min(window - num_tokens, sequence_length - 1)",
        "one too wide",
    ),
    m(
        "window one too narrow",
        BELOW,
        "below = min(window - 2 - num_tokens, sequence_length - 1)",
        "one too narrow",
    ),
    m(
        "no window",
        BAND,
        "return F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=True)",
        "no window",
    ),
    m(
        "band on the wrong side",
        BAND,
        "return F.band_part(mask, num_lower=num_tokens, num_upper=below, exclude=True)",
        "wrong side",
    ),
    m(
        "band ignores the cache offset",
        BELOW,
        "below = min(window - 1, sequence_length - 1)",
        "ignores the cache",
    ),
    m(
        "nothing above the diagonal",
        BAND,
        "return F.band_part(mask, num_lower=below, num_upper=0, exclude=True)",
        "ignores the cache above",
    ),
    m(
        "cache keeps a whole window",
        KEEP,
        "keep_from = max(0, num_cached + seq_length - window)",
        "keep the last",
    ),
    m("cache keeps everything", KEEP, "keep_from = 0", "keep the last"),
    Mutant(
        "cache keeps the oldest tokens",
        (
            (KEEP, "keep_until = min(num_cached + seq_length, window - 1)"),
            (
                "return output, key[:, :, keep_from:], value[:, :, keep_from:]",
                "return output, key[:, :, :keep_until], value[:, :, :keep_until]",
            ),
        ),
        "keeps the oldest",
    ),
    m(
        "slot one late",
        SLOT,
        "slot = (position + 1) % int(buffer.shape[2])",
        "wrote position 0 at slot 1; a window of 3 keeps it at slot 0 % 3 = 0",
    ),
    m("slot one early", SLOT, "slot = (position - 1) % int(buffer.shape[2])", "slot is one early"),
    m(
        "slots filled from the last one down",
        SLOT,
        "slot = (int(buffer.shape[2]) - 1 - position) % int(buffer.shape[2])",
        "filled from the last one down",
    ),
    m(
        "slot stops at the last one",
        SLOT,
        "slot = min(position, int(buffer.shape[2]) - 1)",
        "wrote position 3 at slot 2; a window of 3 keeps it at slot 3 % 3 = 0",
    ),
    m(
        "slot divided, not the remainder",
        SLOT,
        "slot = position // int(buffer.shape[2])",
        "the remainder of that division",
    ),
    m(
        "slot modulo window - 1",
        SLOT,
        "slot = position % (int(buffer.shape[2]) - 1)",
        "modulo window - 1",
    ),
    m("slot without the modulo", SLOT, "slot = position", "wraps round"),
    m(
        "slot modulo the head_dim axis",
        SLOT,
        "slot = position % int(buffer.shape[-1])",
        "asked for a slot past the buffer's 3 slots",
    ),
    m("read in slot order after the wrap", READ_WRAPPED, "return buffer", "slot order"),
    m(
        "oldest slot off by one",
        "oldest = num_seen % window",
        "oldest = (num_seen - 1) % window",
        "returned positions [4, 2, 3]; the window holds [2, 3, 4]",
    ),
    m(
        "decoded token stored one slot late",
        "buffer_key = ring_write(buffer_key, key, position)",
        "buffer_key = ring_write(buffer_key, key, position + 1)",
        "key buffer after position 0 holds positions [?, 0, ?]",
    ),
    Mutant(
        "the new token is not read",
        (
            (
                "keys = ring_read(buffer_key, position + 1)",
                "keys = ring_read(buffer_key, position)",
            ),
            (
                "values = ring_read(buffer_value, position + 1)",
                "values = ring_read(buffer_value, position)",
            ),
        ),
        "only one to attend to",
    ),
    m(
        "window written as 3",
        BELOW,
        "below = min(2 - num_tokens, sequence_length - 1)",
        "sliding_window_mask(4, 3, window=5)",
    ),
    m("band not capped at the rows", BELOW, "below = window - 1 - num_tokens", "cap num_lower"),
    m(
        "keep_from negative while the window is not full",
        KEEP,
        "keep_from = num_cached + seq_length - (window - 1)",
        "a negative start counts from the end",
    ),
]
