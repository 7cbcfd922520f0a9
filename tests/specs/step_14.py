"""Checks for step 14: sampling and text generation."""

import numpy as np

from solutions.solution_13 import MaxGPT2LMHeadModel
from tests import reference as ref
from tests.checker import Check, Context, Fail, Step
from tests.mutants import m
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
    first = ctx.call("sample_next_token(logits, ...)", fn, logits, rng=rng, **options)
    if not isinstance(first, (int, np.integer)):
        raise Fail(
            f"sample_next_token returned {type(first).__name__}, expected an int token id.",
            "Return int(rng.choice(...)).",
        )
    rest = [fn(logits, rng=rng, **options) for _ in range(n - 1)]
    return np.asarray([first, *rest])


def expected_probs(logits: np.ndarray, temperature: float, top_k: int | None) -> np.ndarray:
    scaled = logits / temperature
    if top_k is not None:
        scaled = np.where(scaled < np.sort(scaled)[-top_k], -np.inf, scaled)
    return ref.softmax(scaled)


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
                "Keep the k largest logits and mask the rest with -inf: "
                "np.partition(logits, -top_k)[-top_k] is the k-th largest (an index from the "
                "wrong end of the partition is not).",
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


def frequencies_differ(
    ctx: Context, logits: np.ndarray, temperature: float, top_k: int | None, want: np.ndarray
) -> str | None:
    """None when DRAWS draws follow `want`, else what went wrong."""
    counts = np.bincount(
        draws(ctx, logits, temperature=temperature, top_k=top_k), minlength=want.size
    )
    frequencies = counts[: want.size] / DRAWS
    if np.max(np.abs(frequencies - want)) <= 0.03:  # ~5 sigma for 6,000 draws
        return None
    worst = int(np.argmax(np.abs(frequencies - want)))
    return (
        f"token {worst} was drawn {frequencies[worst]:.3f} of the time; "
        f"softmax(logits / T) gives {want[worst]:.3f}."
    )


def distribution(ctx: Context) -> None:
    for temperature, top_k in ((1.0, None), (0.5, None), (2.0, None), (1.0, 3)):
        wrong = frequencies_differ(
            ctx, LOGITS, temperature, top_k, expected_probs(LOGITS, temperature, top_k)
        )
        if wrong:
            hint = "Divide the logits by the temperature before the softmax."
            if temperature == 1.0 and top_k is None:
                hint = "Draw with the softmax probabilities: rng.choice(vocab_size, p=probs)."
            raise Fail(f"with temperature={temperature}, top_k={top_k}, {wrong}", hint)


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


def generate(ctx: Context, model, prompt, n, **options) -> list[int]:
    fn = ctx.get("generate_tokens")
    out = ctx.call(
        "generate_tokens(...)",
        lambda: list(fn(model, prompt, n, context_length=CONFIG.n_positions, **options)),
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
                "Feed the model only the last context_length ids: token_ids[-context_length:].",
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


STEP = Step(
    number=14,
    title="Text generation",
    typical=3,  # seconds, slowest check: the 6,000-draw distribution and 50,257-token top-k checks
    required={"sample_next_token": [], "generate_tokens": [], "generate_text": []},
    checks=[
        Check("top_k=1 always picks the most likely token", top_k_one_is_greedy),
        Check("a token outside the top k is never drawn", never_outside_top_k),
        Check("draws follow softmax(logits / temperature)", distribution),
        Check("top-k keeps exactly the k largest of 50,257 logits", top_k_on_gpt2_vocabulary),
        Check("logits near 1000 do not overflow the softmax", large_logits_do_not_overflow),
        Check("the same seed gives the same draws", reproducible),
        Check("greedy generation matches GPT-2's", greedy_matches_reference),
        Check("sampling is reproducible with a seed", sampling_is_seeded),
        Check(
            "sampling passes temperature and top_k on to sample_next_token",
            sampling_follows_sample_next_token,
        ),
        Check("a prompt filling the context window still generates", long_prompt_is_cropped),
        Check("generate_text streams the new text", streams_text),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m(
        "temperature multiplies",
        "logits.astype(np.float64) / temperature",
        "logits.astype(np.float64) * temperature",
        "temperature",
    ),
    m(
        "top-k off by one",
        "np.partition(logits, -top_k)[-top_k]",
        "np.partition(logits, -top_k - 1)[-top_k - 1]",
        "top_k",
    ),
    m(
        "argmax when sampling",
        "return int(rng.choice(logits.size, p=probs))",
        "return int(np.argmax(probs))",
        "drawn",
    ),
    m(
        "uniform draw",
        "return int(rng.choice(logits.size, p=probs))",
        "return int(rng.choice(logits.size))",
        "drew token",
    ),
    m(
        "first position's logits",
        "np.asarray(logits.to_numpy())[0, -1]",
        "np.asarray(logits.to_numpy())[0, 0]",
        "greedy",
    ),
    m(
        "new rng per token",
        "next_id = sample_next_token(logits, temperature=temperature, top_k=top_k, rng=rng)",
        "next_id = sample_next_token(logits, temperature=temperature, top_k=top_k, "
        "rng=np.random.default_rng())",
        "seed",
    ),
    m("no context crop", "token_ids[-context_length:]", "token_ids", "context window"),
    m("yields whole text", "yield text[len(shown) :]", "yield text", "several pieces"),
    m("chosen token never appended", "token_ids.append(next_id)", "pass", "append each chosen"),
    m(
        "k-th largest from the wrong end",
        "np.partition(logits, -top_k)[-top_k]",
        "np.partition(logits, top_k)[-top_k]",
        "wrong end",
    ),
    m(
        "k-th largest at the wrong index",
        "np.partition(logits, -top_k)[-top_k]",
        "np.partition(logits, -top_k)[top_k]",
        "wrong end",
    ),
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
