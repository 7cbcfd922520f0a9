"""Step 14's checks of sample_next_token: top-k, the softmax of logits / temperature, seeds."""

import numpy as np

from tests import reference_gpt2 as ref
from tests.checker import Context, Fail
from tests.specs.model_parts import small_config

CONFIG = small_config(n_positions=24, n_layer=1)
LOGITS = np.array([2.0, 1.0, 0.5, 3.0, -1.0, 0.0, 2.5, -2.0])
DRAWS = 6000
GPT2_VOCAB = 50257  # top-k on a small vocabulary can pass by luck: np.partition
# of a few dozen entries often comes back sorted, of 50,257 it does not.
OVERFLOWING = 1000.0  # exp(1000) is inf in float64: only a max-shifted softmax copes


def draws(ctx: Context, logits: np.ndarray, n: int = DRAWS, seed: int = 0, **options) -> np.ndarray:
    fn = ctx.get("sample_next_token")
    rng = np.random.default_rng(seed)
    try:
        first = ctx.call("sample_next_token(logits, ...)", fn, logits, rng=rng, **options)
    except Fail as failure:
        raise not_probabilities(failure) from None
    if not isinstance(first, (int, np.integer)):
        raise Fail(
            f"sample_next_token returned {type(first).__name__}, expected an int token id.",
            "rng.choice returns a NumPy integer: make it a Python int before returning it.",
        )
    try:
        rest = ctx.call(
            "sample_next_token(logits, ...)",
            lambda: [fn(logits, rng=rng, **options) for _ in range(n - 1)],
        )
    except Fail as failure:
        raise not_probabilities(failure) from None
    return np.asarray([first, *rest])


def not_probabilities(failure: Fail) -> Fail:
    """rng.choice's complaints about p=, said in terms of the step."""
    said = failure.message
    if "are not non-negative" in said:
        return Fail(
            f"{said}\n   rng.choice was given the logits themselves as p=, not probabilities.",
            "p= must be probabilities: the softmax of the (scaled, masked) logits, every one "
            ">= 0 and summing to 1. Logits are any real numbers, negative and -inf included.",
        )
    if "do not sum to 1" in said:
        return Fail(
            f"{said}\n   the probabilities given to rng.choice do not sum to 1.",
            "The softmax ends with a division by the sum of the exponentials: without it the "
            "numbers are only proportional to probabilities.",
        )
    return failure


def expected_probs(logits: np.ndarray, temperature: float, top_k: int | None) -> np.ndarray:
    scaled = logits / temperature
    if top_k is not None:
        scaled = np.where(scaled < np.sort(scaled)[-top_k], -np.inf, scaled)
    return ref.softmax(scaled)


PLATEAU = 8  # nearly equal top logits, far above a 50,257-token tail
PLATEAU_DRAWS = 80  # each kept plateau token shows up in 80 draws (for k <= 5)


def plateau_logits() -> tuple[np.ndarray, list[int]]:
    """GPT-2-sized logits: PLATEAU tokens near 10, the rest near -40 (never drawn).
    Returns the logits and the plateau's tokens, largest logit first."""
    rng = np.random.default_rng(5)
    logits = rng.standard_normal(GPT2_VOCAB) - 40.0
    top = rng.choice(GPT2_VOCAB, PLATEAU, replace=False)
    logits[top] = 10.0 + 0.01 * np.arange(PLATEAU)  # top[-1] has the largest logit
    return logits, [int(t) for t in top[::-1]]


def top_k_keeps_k(ctx: Context) -> None:
    """With top_k=k exactly the k largest logits are drawn: not k-1, not k+1.

    The plateau's logits differ by 0.01, so every kept token is drawn about
    as often as the others, and the tail (50 below) never is: the set of
    tokens drawn is the set that top-k kept."""
    draws(ctx, LOGITS, 50)  # without top-k first: p= must be probabilities
    logits, order = plateau_logits()
    kept = {}
    for k in (1, 2, 3, 5):
        try:
            kept[k] = set(draws(ctx, logits, PLATEAU_DRAWS, seed=k, top_k=k).tolist())
        except Fail as failure:
            if "nan" not in failure.message.lower():
                raise
            kept[k] = set()  # every logit masked: the probabilities are 0 / 0
    if all(kept[k] == set(order[:k]) for k in kept):
        return
    tail = sorted(set().union(*kept.values()) - set(order))
    if tail:
        raise Fail(
            f"it drew token(s) {tail[:5]}, whose logits are 50 below the largest: their "
            "probability is about e^-50, they should never be drawn.",
            "Draw with the probabilities (rng.choice's p=), not uniformly among all ids.",
        )
    for extra, name in ((-1, "k-1"), (1, "k+1")):
        if all(kept[k] == set(order[: k + extra]) for k in kept):
            smallest = "masks the k-th largest logit too" if extra < 0 else "keeps one more"
            raise Fail(
                f"top-k keeps {name} tokens, not k: with top_k=1 it drew "
                f"{sorted(kept[1]) or 'nothing (every logit was masked, probabilities NaN)'}, "
                f"with top_k=3 it drew {len(kept[3])} different tokens. It {smallest}.",
                "Only the logits strictly below the k-th largest are masked: the k-th largest "
                "itself stays (a `<` comparison, not `<=`)."
                if extra < 0
                else "The threshold is the k-th largest logit, not the (k+1)-th: the k tokens "
                "at or above it stay.",
            )
    if all(len(kept[k]) == 1 for k in kept):
        raise Fail(
            f"it drew only token {order[0]}, the most likely, whatever top_k: with top_k=3 "
            f"the other two of the 3 largest logits were never drawn in {PLATEAU_DRAWS} draws.",
            "Sampling draws at random with the probabilities, rng.choice(n, p=...): taking "
            "the most likely token is greedy decoding, the other branch of generate_tokens.",
        )
    k = next(k for k in kept if kept[k] != set(order[:k]))
    raise Fail(
        f"with top_k={k} it drew tokens {sorted(kept[k])}; the {k} largest logits are "
        f"{sorted(order[:k])}: the threshold is not the k-th largest logit.",
        "np.partition(logits, -top_k) puts the k-th largest at index -top_k and leaves the "
        "rest unsorted: read it from that same end (is an index taken from the wrong end?).",
    )


def top_k_one_is_greedy(ctx: Context) -> None:
    rng = np.random.default_rng(1)
    for _ in range(20):
        logits = rng.standard_normal(50) * 3
        token = ctx.call(
            "sample_next_token",
            ctx.get("sample_next_token"),
            logits,
            temperature=1.0,
            top_k=1,
            rng=rng,
        )
        if token != int(np.argmax(logits)):
            raise Fail(
                f"with top_k=1 it drew token {token}, but the most likely is {int(np.argmax(logits))}.",
                "Keep the k largest logits and mask the rest with -inf: np.partition(a, -k) "
                "puts the k-th largest at index -k (an index from the wrong end of the "
                "partition is not the k-th largest).",
            )


def never_outside_top_k(ctx: Context) -> None:
    for k in (2, 3, 5):
        drawn = set(draws(ctx, LOGITS, 1000, top_k=k, temperature=1.5).tolist())
        allowed = set(np.argsort(LOGITS)[-k:].tolist())
        if not drawn <= allowed:
            raise Fail(
                f"with top_k={k} it drew token(s) {sorted(drawn - allowed)}, outside the top {k} "
                f"{sorted(allowed)}.",
                "Mask every logit below the k-th largest with -inf.",
            )


def top_k_on_gpt2_vocabulary(ctx: Context) -> None:
    """Exactly the k largest of 50,257 logits can be drawn, each of them is.

    The k largest logits sit close together above a normal-looking tail, so
    each is drawn often, and a threshold read from the wrong end of
    np.partition (or from an unsorted position) shows as tokens outside the
    top k or top-k tokens never drawn.
    """
    rng = np.random.default_rng(3)
    logits = rng.standard_normal(GPT2_VOCAB) * 2
    for k in (10, 25):
        order = np.argsort(logits)
        logits[order[-2 * k :]] = logits.max() + 2 + np.linspace(0.0, 0.2, 2 * k)
        top = set(np.argsort(logits)[-k:].tolist())
        drawn = set(draws(ctx, logits, 20 * k, seed=k, top_k=k).tolist())
        outside, never = drawn - top, top - drawn
        if outside or never:
            what = (
                f"drew {len(outside)} token(s) outside the {k} largest logits"
                if outside
                else f"never drew {len(never)} of the {k} largest logits in {20 * k} draws"
            )
            raise Fail(
                f"with top_k={k} on a {GPT2_VOCAB:,}-token vocabulary it {what}: the threshold "
                "is not the k-th largest logit.",
                "np.partition(logits, -top_k) puts the k-th largest at index -top_k and leaves "
                "the rest unsorted: read it from that same end, [-top_k] (is an index taken "
                "from the wrong end?).",
            )


def frequencies(
    ctx: Context, logits: np.ndarray, temperature: float, top_k: int | None, size: int
) -> np.ndarray:
    """How often each of the first `size` tokens came up in DRAWS draws."""
    counts = np.bincount(draws(ctx, logits, temperature=temperature, top_k=top_k), minlength=size)
    return counts[:size] / DRAWS


def follows(frequency: np.ndarray, probs: np.ndarray) -> bool:
    return bool(np.max(np.abs(frequency - probs)) <= 0.03)  # ~5 sigma for 6,000 draws


def frequencies_differ(
    ctx: Context, logits: np.ndarray, temperature: float, top_k: int | None, want: np.ndarray
) -> str | None:
    """None when DRAWS draws follow `want`, else what went wrong."""
    frequency = frequencies(ctx, logits, temperature, top_k, want.size)
    return None if follows(frequency, want) else differ(frequency, want)


def differ(frequency: np.ndarray, want: np.ndarray) -> str:
    worst = int(np.argmax(np.abs(frequency - want)))
    return (
        f"token {worst} was drawn {frequency[worst]:.3f} of the time; "
        f"softmax(logits / T) gives {want[worst]:.3f}."
    )


def distribution(ctx: Context) -> None:
    for temperature, top_k in ((1.0, None), (0.5, None), (2.0, None), (1.0, 3)):
        want = expected_probs(LOGITS, temperature, top_k)
        frequency = frequencies(ctx, LOGITS, temperature, top_k, want.size)
        if follows(frequency, want):
            continue
        what = f"with temperature={temperature}, top_k={top_k}, {differ(frequency, want)}"
        if temperature != 1.0 and follows(frequency, expected_probs(LOGITS, 1.0, top_k)):
            raise Fail(
                f"{what} The draws follow softmax(logits), as at temperature 1: the "
                "temperature changes nothing.",
                "The temperature divides the logits before the softmax. Applied after the "
                "softmax (dividing the probabilities by T) it cancels out when they are "
                "normalized; forgotten, it does nothing either.",
            )
        if temperature != 1.0 and follows(
            frequency, expected_probs(LOGITS, 1 / temperature, top_k)
        ):
            raise Fail(
                f"{what} The draws follow softmax(logits * T): the logits are multiplied by "
                "the temperature.",
                "Divide the logits by the temperature: T < 1 must sharpen the distribution, "
                "T > 1 flatten it.",
            )
        hint = "Divide the logits by the temperature before the softmax."
        if temperature == 1.0 and top_k is None:
            hint = "Draw with the softmax probabilities of the logits (rng.choice's p=)."
        raise Fail(what, hint)


def large_logits_do_not_overflow(ctx: Context) -> None:
    """Logits near 1000 draw as their shifted copy does: softmax ignores a shift."""
    hint = (
        "exp(1000) overflows to inf, and inf / inf is NaN: subtract the max logit before "
        "exp (softmax(x - max(x)) equals softmax(x), and every exp is then at most 1)."
    )
    what = f"with logits near {OVERFLOWING:.0f} (LOGITS + {OVERFLOWING:.0f})"
    for temperature in (1.0, 0.5):
        try:
            wrong = frequencies_differ(
                ctx,
                LOGITS + OVERFLOWING,
                temperature,
                None,
                expected_probs(LOGITS, temperature, None),
            )
        except Fail as failure:
            raise Fail(f"{what}: {failure.message}", hint) from failure
        if wrong:
            raise Fail(f"{what} and temperature={temperature}, {wrong}", hint)


def reproducible(ctx: Context) -> None:
    first = draws(ctx, LOGITS, 200, seed=7, temperature=1.0)
    again = draws(ctx, LOGITS, 200, seed=7, temperature=1.0)
    if not np.array_equal(first, again):
        raise Fail("the same seed gave different draws.", "Draw only from the rng you are given.")
