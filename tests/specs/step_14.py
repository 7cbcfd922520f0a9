"""Checks for step 14: sampling and text generation."""

import numpy as np

from solutions.solution_13 import MaxGPT2LMHeadModel
from tests import reference as ref
from tests.checker import Check, Context, Fail, Step
from tests.mistakes import Mutant, m
from tests.specs.common import small_config, tied_lm_weights

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


def tiny_model(ctx: Context):
    """One small GPT-2 (the solution's) per check run, built on first use."""
    return ctx.once("tiny model", lambda: build_tiny_model(ctx))


def build_tiny_model(ctx: Context):
    model = MaxGPT2LMHeadModel(CONFIG)
    # Token and position both steer the prediction, so the greedy continuation
    # changes with the context: a loop that forgets to append the chosen token
    # repeats one token where GPT-2 moves on.
    weights = tied_lm_weights(ctx, CONFIG, wte_scale=3, wpe_scale=12)
    model.load_state_dict(weights)
    return model, weights


class VocabularyGuard:
    """The model, refusing a token id outside its vocabulary: an id made by an
    argmax over the wrong axis fails here, by name, instead of in MAX's gather."""

    def __init__(self, model, vocab_size: int) -> None:
        self.model, self.vocab_size = model, vocab_size
        self.config = getattr(model, "config", None)

    def __call__(self, input_ids):
        ids = np.asarray(input_ids.to_numpy()) if hasattr(input_ids, "to_numpy") else input_ids
        ids = np.asarray(ids)
        bad = ids[(ids < 0) | (ids >= self.vocab_size)]
        if bad.size:
            token = int(bad.flat[0])
            position, row = divmod(token, self.vocab_size)
            raise Fail(
                f"generate_tokens gave the model token id {token}, outside the vocabulary "
                f"(ids 0 to {self.vocab_size - 1}). {token} = {position} x {self.vocab_size} + "
                f"{row}: an argmax over the flattened [seq, vocab_size] logits (or over the "
                "wrong axis) gives such ids.",
                "Take the last position's row first, a [vocab_size] vector, then the argmax "
                "over the vocabulary: next_token_logits returns that row.",
            )
        return self.model(input_ids)


def generate(ctx: Context, model, prompt, n, **options) -> list[int]:
    fn = ctx.get("generate_tokens")
    guarded = VocabularyGuard(model, CONFIG.vocab_size)
    out = ctx.call(
        "generate_tokens(...)",
        lambda: list(fn(guarded, prompt, n, context_length=CONFIG.n_positions, **options)),
    )
    if len(out) != n or not all(isinstance(t, (int, np.integer)) for t in out):
        raise Fail(
            f"generate_tokens(..., max_new_tokens={n}) yielded {out!r}, expected {n} token ids."
        )
    return [int(t) for t in out]


def greedy_matches_reference(ctx: Context) -> None:
    model, w = tiny_model(ctx)
    prompt, new = [3, 14, 15, 92, 65], 7
    want = ref.greedy_generate(
        w, prompt, new, CONFIG.n_layer, CONFIG.n_head, CONFIG.layer_norm_epsilon
    )
    got = generate(ctx, model, prompt, new)
    if got == want:
        return
    if got == [want[0]] * new:
        raise Fail(
            f"greedy decoding gave {got}, GPT-2 gives {want}: the same token every time, as if "
            "the model saw the prompt alone at each step.",
            "Append each chosen token to token_ids, so the next step runs the model on the "
            "longer sequence.",
        )
    first = next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
    raise Fail(
        f"greedy decoding gave {got}, GPT-2 gives {want} (first difference at new token {first}).",
        "Greedy: append argmax of the last position's logits, then run the model on the longer sequence.",
    )


def sampling_is_seeded(ctx: Context) -> None:
    model, _ = tiny_model(ctx)
    prompt = [1, 2, 3]
    runs = [
        generate(ctx, model, prompt, 3, do_sample=True, temperature=20.0, top_k=40, seed=s)
        for s in (0, 0, 1)
    ]
    if runs[0] != runs[1]:
        raise Fail(
            f"two runs with seed=0 gave {runs[0]} and {runs[1]}.",
            "Make one rng from the seed (np.random.default_rng(seed)) and pass it to every draw.",
        )
    if runs[0] == runs[2]:
        raise Fail("seeds 0 and 1 gave the same tokens: is the seed used?")


def sampling_follows_sample_next_token(ctx: Context) -> None:
    """Sampled generation = sample_next_token (already checked) drawn on GPT-2's
    logits of the growing sequence, with the temperature, top_k and one rng
    made from the seed."""
    model, w = tiny_model(ctx)
    prompt, new, options = [1, 2, 3], 5, dict(temperature=2.0, top_k=5)
    sample = ctx.get("sample_next_token")
    rng, ids, want = np.random.default_rng(11), list(prompt), []
    for _ in range(new):
        logits = ref.lm_logits(
            w, np.asarray([ids]), CONFIG.n_layer, CONFIG.n_head, CONFIG.layer_norm_epsilon
        )[0, -1]
        token = int(ctx.call("sample_next_token(...)", sample, logits, rng=rng, **options))
        ids.append(token)
        want.append(token)
    got = generate(ctx, model, prompt, new, do_sample=True, seed=11, **options)
    if got != want:
        raise Fail(
            f"generate_tokens(..., do_sample=True, temperature=2.0, top_k=5, seed=11) gave "
            f"{got}; sample_next_token on GPT-2's logits with that seed gives {want}.",
            "Pass temperature=, top_k= and the one rng (made once from the seed) on to "
            "sample_next_token for every token.",
        )


WINDOW = 6  # the context length given to generate_tokens with the WindowModel


class WindowModel:
    """A stand-in for GPT-2 whose next token is the first token it is shown.

    Greedy decoding with it is a record of the windows it was given: with
    context_length=6 the next token is token_ids[-6], and a crop one token
    short or long picks token_ids[-5] or token_ids[-7]."""

    vocab_size = 40

    def __init__(self) -> None:
        self.seen: list[list[int]] = []

    def __call__(self, input_ids):
        from max.experimental.tensor import Tensor

        ids = np.asarray(input_ids.to_numpy() if hasattr(input_ids, "to_numpy") else input_ids)
        if ids.ndim != 2 or ids.shape[0] != 1:
            raise Fail(
                f"the model was given ids of shape {list(ids.shape)}, expected [1, seq].",
                "next_token_logits wraps the ids in a batch of one: a [1, seq] int64 Tensor.",
            )
        self.seen.append([int(i) for i in ids[0]])
        seq = ids.shape[1]
        logits = np.zeros((1, seq, self.vocab_size), dtype=np.float32)
        logits[0, np.arange(seq), (ids[0] + 1) % self.vocab_size] = 1.0  # earlier rows
        logits[0, -1] = 0.0
        logits[0, -1, ids[0, 0]] = 1.0  # the last row: the window's first token
        return Tensor(logits)


def crop_is_exact(ctx: Context) -> None:
    """The model sees exactly the last context_length ids, every step."""
    model = WindowModel()
    prompt, new = list(range(11, 21)), 4
    fn = ctx.get("generate_tokens")
    got = ctx.call(
        f"generate_tokens(model, prompt, {new}, context_length={WINDOW})",
        lambda: [int(t) for t in fn(model, prompt, new, context_length=WINDOW)],
    )
    for step, seen in enumerate(model.seen[:new]):
        ids = prompt + got[:step]
        want = ids[-WINDOW:]
        if seen == want:
            continue
        said = (
            f"with context_length={WINDOW} and {len(ids)} tokens so far, the model was given "
            f"{seen}; the last {WINDOW} are {want}."
        )
        if seen == ids[-(WINDOW - 1) :]:
            raise Fail(
                f"{said} The crop is one token short: {WINDOW - 1} tokens, not {WINDOW}.",
                "A slice that starts context_length from the end keeps exactly context_length "
                "items; starting one later keeps one fewer.",
            )
        if seen == ids[-(WINDOW + 1) :]:
            raise Fail(
                f"{said} The crop is one token long: {WINDOW + 1} tokens, one more than the "
                "context window (GPT-2 has no position embedding for it).",
                "A slice that starts context_length from the end keeps exactly context_length "
                "items; starting one earlier keeps one too many.",
            )
        if seen == ids[:WINDOW]:
            raise Fail(
                f"{said} These are the first {WINDOW} tokens: the crop keeps the oldest "
                "tokens, so the newest, the ones the next token follows, are cut off.",
                "Keep the end of the sequence: a slice counted from the end (a negative start).",
            )
        if seen == ids:
            raise Fail(
                f"{said} The sequence is not cropped: {len(ids)} tokens do not fit the "
                f"context window of {WINDOW}.",
                "Feed the model only the last context_length ids.",
            )
        raise Fail(said, "Feed the model the last context_length ids of the sequence so far.")
    ids = list(prompt)
    for _ in range(new):
        ids.append(ids[-WINDOW:][0])
    if got != ids[len(prompt) :]:
        raise Fail(
            f"greedy decoding gave {got}; this model's most likely next token is the first of "
            f"the window it is shown, which gives {ids[len(prompt) :]}.",
            "Greedy: the argmax of the last position's logits.",
        )


class ContextGuard:
    """The model, refusing more tokens than its position table has rows: an
    uncropped sequence fails at once, by name, instead of in MAX's gather."""

    def __init__(self, model) -> None:
        self.model = model

    def __call__(self, input_ids):
        length = int(input_ids.shape[-1])
        if length > CONFIG.n_positions:
            raise Fail(
                f"the model was given {length} tokens, more than its context window "
                f"(n_positions={CONFIG.n_positions}).",
                "Feed the model only the last context_length ids (a slice counted from the end).",
            )
        return self.model(input_ids)


def long_prompt_is_cropped(ctx: Context) -> None:
    model, _ = tiny_model(ctx)
    prompt = list(range(CONFIG.n_positions))  # fills the context window
    generate(ctx, ContextGuard(model), prompt, 2)


class CharTokenizer:
    """Token id = character code - 32, enough to test streaming."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) - 32 for c in text]

    def decode(self, ids) -> str:
        return "".join(chr(i + 32) for i in ids)


def streams_text(ctx: Context) -> None:
    model, w = tiny_model(ctx)
    tokenizer = CharTokenizer()
    prompt = "Hi!"
    fn = ctx.get("generate_text")
    pieces = ctx.call(
        "generate_text(...)",
        lambda: list(fn(model, tokenizer, prompt, 3, context_length=CONFIG.n_positions)),
    )
    want = tokenizer.decode(
        ref.greedy_generate(
            w, tokenizer.encode(prompt), 3, CONFIG.n_layer, CONFIG.n_head, CONFIG.layer_norm_epsilon
        )
    )
    if "".join(map(str, pieces)) != want or len(pieces) < 2:
        raise Fail(
            f"generate_text yielded {pieces!r}; expected the new text {want!r} in several pieces.",
            "Yield only the text added since the last piece, after each token; not the prompt.",
        )


# Hint ladders: what to look at; the API or the shapes; the line.
SAMPLE_LINES = """```python
logits = logits.astype(np.float64) / temperature
if top_k is not None and top_k < logits.size:
    kth_largest = np.partition(logits, -top_k)[-top_k]
    logits = np.where(logits < kth_largest, -np.inf, logits)
probs = np.exp(logits - logits.max())
probs /= probs.sum()
return int(rng.choice(logits.size, p=probs))
```"""
THRESHOLD_LINES = """```python
kth_largest = np.partition(logits, -top_k)[-top_k]
logits = np.where(logits < kth_largest, -np.inf, logits)
```"""
WRONG_END = (
    "Top-k keeps the k largest logits and masks the rest with `-inf`. The threshold is "
    "the k-th largest logit; the tokens drawn show that yours is some other value.",
    "`np.partition(a, kth)` moves the element that belongs at index `kth` of the sorted "
    "array there, smaller ones before it, larger ones after, each side unsorted. With a "
    "negative `kth = -k`, index `-k` holds the k-th largest: read it from that same index. "
    "`np.where(condition, -np.inf, a)` masks.",
    THRESHOLD_LINES,
)
TOP_K_HINTS = {
    "logits themselves": (
        "`rng.choice` was handed the logits as `p=`. Logits are any real numbers (negative, "
        "`-inf` after top-k); `p=` wants probabilities.",
        "The softmax turns logits into probabilities: `exp` of each (after subtracting the "
        "largest), divided by their sum. `rng.choice(n, p=probs)` draws one of `0..n-1`.",
        SAMPLE_LINES,
    ),
    "sum to 1": (
        "The numbers given to `rng.choice` as `p=` do not add up to 1: the softmax is "
        "missing its last part.",
        "softmax(x)ᵢ = exp(xᵢ - max x) / Σⱼ exp(xⱼ - max x): after the exponentials, "
        "divide by their sum.",
        SAMPLE_LINES,
    ),
    "k-1": (
        "Top-k keeps one token too few: the k-th largest logit is masked along with "
        "everything below it. With `top_k=1` nothing is left, every logit is `-inf`, and "
        "the softmax gives NaN.",
        "Mask only the logits *strictly below* the k-th largest: the comparison in the "
        "condition of `np.where` decides whether the threshold itself survives.",
        THRESHOLD_LINES,
    ),
    "k+1": (
        "Top-k keeps one token too many: the threshold is the (k+1)-th largest logit "
        "instead of the k-th.",
        "`np.partition(a, -k)[-k]` is the k-th largest; `-k - 1` is one further down.",
        THRESHOLD_LINES,
    ),
    "e^-50": (
        "Tokens whose probability is practically zero were drawn: the draw does not use "
        "the probabilities at all.",
        "`rng.choice(n)` draws uniformly; `rng.choice(n, p=probs)` draws token i with "
        "probability `probs[i]`.",
        SAMPLE_LINES,
    ),
    "whatever top_k": (
        "`sample_next_token` always returns the most likely token: that is greedy "
        "decoding. Sampling draws at random, each token as often as its probability says.",
        "`rng.choice(n, p=probs)` draws one id with the probabilities; use the `rng` you "
        "are given.",
        SAMPLE_LINES,
    ),
    "": WRONG_END,
}
TEMPERATURE_HINTS = {
    "changes nothing": (
        "The temperature has no effect on the draws. Where is it applied? Dividing the "
        "*probabilities* by T changes nothing once they are normalized again.",
        "softmax(logits / T): the division acts on the logits, before `exp`. T < 1 "
        "stretches the gaps between logits, T > 1 shrinks them.",
        "```python\nlogits = logits.astype(np.float64) / temperature\n```",
    ),
    "multiplied": (
        "The temperature works backwards: T = 0.5 flattens the distribution and T = 2 "
        "sharpens it. The logits are multiplied by T.",
        "softmax(logits / T): divide. As T goes to 0 this becomes greedy, as T grows it "
        "becomes uniform.",
        "```python\nlogits = logits.astype(np.float64) / temperature\n```",
    ),
    "": (
        "The draws do not follow softmax(logits / T). The message says which token comes "
        "up too often or too rarely, at which temperature and top_k.",
        "Scale (divide by T), cut (top-k), softmax (exp after subtracting the max, divided "
        "by the sum), then one `rng.choice(n, p=probs)`.",
        SAMPLE_LINES,
    ),
}
OVERFLOW_HINTS = (
    "With logits near 1000, `exp` overflows to `inf`, and `inf / inf` is NaN. The softmax "
    "needs the usual shift.",
    "softmax(x) equals softmax(x - c) for any constant c. With c = max(x), every exponent is "
    "at most 0, so every `exp` is at most 1; `-inf` logits still give exactly 0.",
    "```python\nprobs = np.exp(logits - logits.max())\nprobs /= probs.sum()\n```",
)
RNG_HINTS = (
    "The same seed must give the same draws. Does `sample_next_token` draw from anything "
    "other than the `rng` it is given?",
    "`rng.choice(n, p=probs)` uses the generator passed in; `np.random.choice` or a new "
    "`np.random.default_rng()` do not.",
    "```python\nreturn int(rng.choice(logits.size, p=probs))\n```",
)
GREEDY_LINES = """```python
# next_token_logits
input_ids = Tensor(np.asarray([token_ids], dtype=np.int64))
logits = model(input_ids)
return np.asarray(logits.to_numpy())[0, -1]

# generate_tokens, in the loop
logits = next_token_logits(model, token_ids[-context_length:])
...
next_id = int(np.argmax(logits))
token_ids.append(next_id)
```"""
GREEDY_HINTS = {
    "append each chosen": (
        "Every new token is the same: the model keeps seeing the prompt alone. The chosen "
        "token must become part of the sequence before the next step.",
        "`token_ids` is a list: append each chosen id to it before the loop runs the model again.",
        GREEDY_LINES,
    ),
    "outside the vocabulary": (
        "A token id larger than the vocabulary came out of the argmax: it ran over more "
        "than one position's logits.",
        "The model returns `[1, seq, vocab_size]`. `next_token_logits` returns only the "
        "last position's row, `[vocab_size]`; `np.argmax` of a 2-D array without `axis=` "
        "is an index into the flattened array.",
        GREEDY_LINES,
    ),
    "": (
        "Greedy decoding differs from GPT-2's: look at the first difference. Is the row "
        "the *last* position's (the rows before it predict tokens already known)?",
        "`next_token_logits`: a `[1, seq]` int64 `Tensor` of the ids, the model on it "
        "(`[1, seq, vocab_size]`), then the row at batch 0, position -1, as NumPy. Greedy "
        "is `np.argmax` of that row, as a Python `int`.",
        GREEDY_LINES,
    ),
}
SEEDED_HINTS = (
    "Sampled generation must be reproducible with a seed and change with it. How many "
    "random generators does `generate_tokens` use?",
    "`generate_tokens` makes one generator from `seed` before the loop; every call of "
    "`sample_next_token` gets that same one as `rng=`.",
    "```python\nnext_id = sample_next_token(logits, temperature=temperature, top_k=top_k, "
    "rng=rng)\n```",
)
FOLLOWS_HINTS = (
    "Sampled generation must equal `sample_next_token` applied to GPT-2's logits token "
    "after token. Are the options of `generate_tokens` passed on?",
    "Call `sample_next_token` with the logits, `temperature=`, `top_k=` and the one "
    "`rng=`, all as `generate_tokens` received them.",
    "```python\nnext_id = sample_next_token(logits, temperature=temperature, top_k=top_k, "
    "rng=rng)\n```",
)
CROP_LINE = "```python\nlogits = next_token_logits(model, token_ids[-context_length:])\n```"
CROP_HINTS = {
    "one token short": (
        "The model sees one token fewer than its window holds: the crop is off by one.",
        "A Python slice `a[-n:]` keeps the last n items; `a[-n + 1:]` keeps n - 1.",
        CROP_LINE,
    ),
    "one token long": (
        "The model sees one token more than its window holds: the crop is off by one. "
        "With GPT-2 it would ask for a position embedding that does not exist.",
        "A Python slice `a[-n:]` keeps the last n items; `a[-n - 1:]` keeps n + 1.",
        CROP_LINE,
    ),
    "oldest": (
        "The crop keeps the *oldest* tokens: the next token follows the newest ones, "
        "which are cut off.",
        "A slice counted from the end (`a[-n:]`) keeps the last n items; `a[:n]` keeps "
        "the first n.",
        CROP_LINE,
    ),
    "": (
        "The model must see the last `context_length` tokens of the sequence so far, "
        "every step: no more (its position table ends there), no fewer.",
        "Crop `token_ids` with a slice counted from the end before calling "
        "`next_token_logits`; `context_length` is an argument of `generate_tokens`.",
        CROP_LINE,
    ),
}
STREAM_HINTS = (
    "`generate_text` must yield only the text added since the last piece, one piece per "
    "token (or fewer, while a character is incomplete), never the prompt.",
    "`decode_stream` decodes all of `new_ids` each time, compares with what it has "
    "already shown, yields the part after it and remembers the whole text as shown.",
    '```python\ntext = tokenizer.decode(new_ids)\nif not text.endswith("\\ufffd"):\n'
    "    yield text[len(shown) :]\n    shown = text\n```",
)

STEP = Step(
    number=14,
    typical=3,  # seconds, slowest check: the 6,000-draw distribution and 50,257-token top-k checks
    required={"sample_next_token": [], "generate_tokens": [], "generate_text": []},
    checks=[
        Check("top_k=k keeps the k largest logits: not k-1, not k+1", top_k_keeps_k, TOP_K_HINTS),
        Check("top_k=1 always picks the most likely token", top_k_one_is_greedy, WRONG_END),
        Check("a token outside the top k is never drawn", never_outside_top_k, WRONG_END),
        Check("draws follow softmax(logits / temperature)", distribution, TEMPERATURE_HINTS),
        Check(
            "top-k keeps exactly the k largest of 50,257 logits",
            top_k_on_gpt2_vocabulary,
            WRONG_END,
        ),
        Check(
            "logits near 1000 do not overflow the softmax",
            large_logits_do_not_overflow,
            OVERFLOW_HINTS,
        ),
        Check("the same seed gives the same draws", reproducible, RNG_HINTS),
        Check("greedy generation matches GPT-2's", greedy_matches_reference, GREEDY_HINTS),
        Check("sampling is reproducible with a seed", sampling_is_seeded, SEEDED_HINTS),
        Check(
            "sampling passes temperature and top_k on to sample_next_token",
            sampling_follows_sample_next_token,
            FOLLOWS_HINTS,
        ),
        Check("the model sees exactly the last context_length tokens", crop_is_exact, CROP_HINTS),
        Check(
            "a prompt filling the context window still generates",
            long_prompt_is_cropped,
            CROP_HINTS,
        ),
        Check("generate_text streams the new text", streams_text, STREAM_HINTS),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
SCALE = "logits.astype(np.float64) / temperature"
KTH = "np.partition(logits, -top_k)[-top_k]"
DRAW = "return int(rng.choice(logits.size, p=probs))"
CROP = "token_ids[-context_length:]"
MISTAKES = [
    m("temperature multiplies", SCALE, "logits.astype(np.float64) * temperature", "multiplied"),
    m("temperature ignored", SCALE, "logits.astype(np.float64)", "temperature changes nothing"),
    Mutant(
        "temperature after the softmax",
        (
            (SCALE, "logits.astype(np.float64)"),
            ("probs /= probs.sum()", "probs /= temperature\n    probs /= probs.sum()"),
        ),
        "after the softmax",
    ),
    m("top-k off by one", KTH, "np.partition(logits, -top_k - 1)[-top_k - 1]", "k+1"),
    m(
        "top-k keeps k-1",
        "np.where(logits < kth_largest, -np.inf, logits)",
        "np.where(logits <= kth_largest, -np.inf, logits)",
        "k-1",
    ),
    m("argmax when sampling", DRAW, "return int(np.argmax(probs))", "drawn"),
    m("uniform draw", DRAW, "return int(rng.choice(logits.size))", "drew token"),
    m(
        "draws from the logits",
        DRAW,
        "return int(rng.choice(logits.size, p=logits))",
        "logits themselves",
    ),
    m("probabilities not normalized", "probs /= probs.sum()", "pass", "do not sum to 1"),
    m(
        "first position's logits",
        "np.asarray(logits.to_numpy())[0, -1]",
        "np.asarray(logits.to_numpy())[0, 0]",
        "greedy",
    ),
    m(
        "greedy argmax over the flattened logits",
        "np.asarray(logits.to_numpy())[0, -1]",
        "np.asarray(logits.to_numpy())[0]",
        "flattened",
    ),
    m(
        "new rng per token",
        "next_id = sample_next_token(logits, temperature=temperature, top_k=top_k, rng=rng)",
        "next_id = sample_next_token(logits, temperature=temperature, top_k=top_k, "
        "rng=np.random.default_rng())",
        "seed",
    ),
    m("no context crop", CROP, "token_ids", "context window"),
    m("crop one token short", CROP, "token_ids[-context_length + 1 :]", "one token short"),
    m("crop one token long", CROP, "token_ids[-context_length - 1 :]", "one token long"),
    m("crop keeps the oldest tokens", CROP, "token_ids[:context_length]", "oldest"),
    m("yields whole text", "yield text[len(shown) :]", "yield text", "several pieces"),
    m("chosen token never appended", "token_ids.append(next_id)", "pass", "append each chosen"),
    m("k-th largest from the wrong end", KTH, "np.partition(logits, top_k)[-top_k]", "wrong end"),
    m("k-th largest at the wrong index", KTH, "np.partition(logits, -top_k)[top_k]", "wrong end"),
    m(
        "top_k not passed on when sampling",
        "temperature=temperature, top_k=top_k, rng=rng)",
        "temperature=temperature, rng=rng)",
        "top_k= and the one rng",
    ),
    m(
        "softmax without the max shift",
        "np.exp(logits - logits.max())",
        "np.exp(logits)",
        "subtract the max",
    ),
]
