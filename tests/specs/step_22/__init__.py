"""Checks for step 22: sliding-window attention and the rolling buffer."""

from tests.checker import Check, Step

from .ring import decodes_like_full_attention, ring_reads_oldest_first, ring_writes_slots
from .window import band_after_cache, band_without_cache, cache_keeps_the_window

STEP = Step(
    number=22,
    required={
        "sliding_window_mask": [],
        "sliding_window_attention": [],
        "ring_write": [],
        "ring_read": [],
        "ring_decode": [],
    },
    checks=[
        Check("each token sees itself and the window - 1 tokens before it", band_without_cache),
        Check("the band moves with the cache", band_after_cache),
        Check("the cache keeps only the last window - 1 tokens", cache_keeps_the_window),
        Check("ring_write stores position p in slot p % window", ring_writes_slots),
        Check(
            "ring_read gives the oldest token first, after the buffer wraps",
            ring_reads_oldest_first,
        ),
        Check(
            "decoding from the buffer equals attention over the window", decodes_like_full_attention
        ),
    ],
)
