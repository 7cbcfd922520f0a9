"""Step 22's checks of the band mask and of the cache trimmed to the window."""

import numpy as np

from tests import reference_llama as ref
from tests.checker import Context, Fail, expect_close, expect_shape, tensor, to_numpy
from tests.checker.compare import close

WINDOW = 3
BATCH, HEADS, HEAD_DIM = 2, 2, 4


def band(seq: int, num_tokens: int, lower: int | None, upper: int | None) -> np.ndarray:
    """step 02's band_part on a [seq, num_tokens + seq] matrix of -inf: 0 where
    row - column <= lower and column - row <= upper (None: no limit)."""
    rows = np.arange(seq)[:, None]
    cols = np.arange(num_tokens + seq)[None, :]
    inside = np.ones((seq, num_tokens + seq), dtype=bool)
    if lower is not None:
        inside &= rows - cols <= lower
    if upper is not None:
        inside &= cols - rows <= upper
    return np.where(inside, 0.0, -np.inf)


def window_mask(seq: int, num_tokens: int, window: int) -> np.ndarray:
    """New token i (column num_tokens + i) sees that column and the window - 1 before it."""
    return band(seq, num_tokens, window - 1 - num_tokens, num_tokens)


def wrong_masks(seq: int, n: int) -> dict[str, np.ndarray]:
    return {
        f"The window is one too wide: each token sees itself and window - 1 = {WINDOW - 1} "
        f"tokens before it, {WINDOW} in all, not {WINDOW + 1}.": window_mask(seq, n, WINDOW + 1),
        f"The window is one too narrow: each token sees itself and window - 1 = {WINDOW - 1} "
        f"tokens before it, {WINDOW} in all, not {WINDOW - 1}.": window_mask(seq, n, WINDOW - 1),
        "There is no window: this is step 02's causal mask. Limit how far below the "
        "diagonal the band reaches.": band(seq, n, None, n),
        "The band is on the wrong side of the diagonal: a token sees the tokens after it. "
        "The band reaches below the diagonal (the past), and above it only as far as the "
        "cache shifts the diagonal.": band(seq, n, n, WINDOW - 1 - n),
        "The band ignores the cache: the cached columns shift the diagonal right by "
        "num_tokens, so the band reaches num_tokens further above it and num_tokens less "
        "far below.": band(seq, n, WINDOW - 1, n),
        "The band ignores the cache above the diagonal: the new tokens sit num_tokens "
        "columns right of it and must see themselves.": band(seq, n, WINDOW - 1 - n, 0),
    }


def expect_mask(ctx: Context, seq: int, n: int) -> None:
    from max.driver import CPU
    from max.dtype import DType

    try:
        got = ctx.call(
            "sliding_window_mask",
            ctx.get("sliding_window_mask"),
            seq,
            n,
            WINDOW,
            dtype=DType.float32,
            device=CPU(),
        )
    except Fail as failure:
        if "out of bounds" not in failure.message:
            raise
        raise Fail(
            failure.message,
            f"band_part refuses a band reaching further than the matrix: with {seq} new "
            f"token(s) no row is more than {seq - 1} below the diagonal. Cap num_lower at "
            "sequence_length - 1 (which already reaches column 0).",
        ) from failure
    what = f"sliding_window_mask({seq}, {n}, window={WINDOW})"
    expect_shape(
        got, (seq, n + seq), what, "One row per new token, one column per cached or new token."
    )
    expect_close(got, window_mask(seq, n, WINDOW), what, wrong_masks(seq, n), model="Mistral")


def band_without_cache(ctx: Context) -> None:
    expect_mask(ctx, 7, 0)
    expect_mask(ctx, 2, 0)  # fewer tokens than the window


def band_after_cache(ctx: Context) -> None:
    expect_mask(ctx, 4, 2)
    expect_mask(ctx, 1, WINDOW - 1)


def qkv(ctx: Context, seq: int):
    return [ctx.normal(BATCH, HEADS, seq, HEAD_DIM) for _ in range(3)]


def cache_keeps_the_window(ctx: Context) -> None:
    # A prompt longer than the window, then one token, then a few; and a wider
    # window that the first chunk does not fill.
    for window, chunks in ((WINDOW, (5, 1, 3)), (5, (3, 4, 2))):
        attend_in_chunks(ctx, window, chunks)


def attend_in_chunks(ctx: Context, window: int, chunks: tuple[int, ...]) -> None:
    """sliding_window_attention over chunks of new tokens, each call given the
    cache the last returned: outputs and caches against the reference."""
    attend = ctx.get("sliding_window_attention")
    q, k, v = qkv(ctx, sum(chunks))
    want = ref.attention(q, k, v, 0, window=window)
    past_k = past_v = np.zeros((BATCH, HEADS, 0, HEAD_DIM), np.float32)
    done = 0
    for seq in chunks:
        new = [t[:, :, done : done + seq] for t in (q, k, v)]
        result = ctx.run_lazily(
            "sliding_window_attention",
            attend,
            *(tensor(t) for t in new),
            tensor(past_k),
            tensor(past_v),
            window,
        )
        if not isinstance(result, tuple) or len(result) != 3:
            raise Fail(
                f"sliding_window_attention returned {type(result).__name__}, expected "
                "(output, key, value).",
            )
        out, got_k, got_v = result
        seen = done + seq
        what = f"the output for tokens {done}..{seen - 1} (window {window})"
        if not close(to_numpy(out, what), want[:, :, done:seen]):
            expect_mask_of_the_call(ctx, seq, past_k.shape[2], window, what)
        expect_close(out, want[:, :, done:seen], what, model="Mistral")
        kept = min(seen, window - 1)
        for name, got, full in (("key", got_k, k), ("value", got_v, v)):
            array = to_numpy(got, f"the {name} cache")
            if array.shape[2] != kept:
                raise Fail(
                    f"After {seen} tokens the {name} cache holds {array.shape[2]} of them; the "
                    f"next token sees itself and window - 1 = {window - 1} before it, so keep "
                    f"the last {kept}.",
                    "Keep the grown cache from index (tokens so far) - (window - 1), or from 0 "
                    "while there are fewer: a negative start counts from the end.",
                )
            expect_close(
                array,
                full[:, :, seen - kept : seen],
                f"the {name} cache after {seen} tokens (window {window})",
                {
                    f"The {name} cache keeps the oldest tokens; the next token needs the "
                    "newest: keep the end of the grown cache.": full[:, :, :kept]
                },
                model="Mistral",
            )
        past_k, past_v = to_numpy(got_k, "the key cache"), to_numpy(got_v, "the value cache")
        done = seen


def expect_mask_of_the_call(ctx: Context, seq: int, cached: int, window: int, what: str) -> None:
    """A wrong output: is it the learner's mask for this call's sizes?"""
    from max.driver import CPU
    from max.dtype import DType

    args = (seq, cached, window)
    mask = ctx.call(
        "sliding_window_mask",
        ctx.get("sliding_window_mask"),
        *args,
        dtype=DType.float32,
        device=CPU(),
    )
    if not close(to_numpy(mask, "sliding_window_mask"), window_mask(*args)):
        raise Fail(
            f"{what} is wrong because sliding_window_mask({seq}, {cached}, window={window}), "
            "the mask of this call, is not the band.",
            f"The band checks use window {WINDOW}; print your mask for these sizes: row i "
            f"sees column {cached} + i and the window - 1 = {window - 1} columns before it.",
        )
