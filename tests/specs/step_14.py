"""Checks for step 14: sampling and text generation."""

import numpy as np

from solutions.solution_13 import MaxGPT2LMHeadModel
from tests import reference as ref
from tests.checker import Check, Context, Fail, Step
from tests.specs.common import small_config, tied_lm_weights

CONFIG = small_config(n_positions=24, n_layer=1)
LOGITS = np.array([2.0, 1.0, 0.5, 3.0, -1.0, 0.0, 2.5, -2.0])
DRAWS = 6000


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
                "Keep the k largest logits (np.partition / np.argsort) and mask the rest with -inf.",
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


def distribution(ctx: Context) -> None:
    for temperature, top_k in ((1.0, None), (0.5, None), (2.0, None), (1.0, 3)):
        counts = np.bincount(
            draws(ctx, LOGITS, temperature=temperature, top_k=top_k), minlength=LOGITS.size
        )
        frequencies = counts / DRAWS
        want = expected_probs(LOGITS, temperature, top_k)
        if np.max(np.abs(frequencies - want)) > 0.03:  # ~5 sigma for 6,000 draws
            worst = int(np.argmax(np.abs(frequencies - want)))
            hint = "Divide the logits by the temperature before the softmax."
            if temperature == 1.0 and top_k is None:
                hint = "Draw with the softmax probabilities: rng.choice(vocab_size, p=probs)."
            raise Fail(
                f"with temperature={temperature}, top_k={top_k}, token {worst} was drawn "
                f"{frequencies[worst]:.3f} of the time; softmax(logits / T) gives {want[worst]:.3f}.",
                hint,
            )


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
    weights = tied_lm_weights(ctx, CONFIG, wte_scale=15)
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
    prompt = [3, 14, 15, 92, 65]
    want = ref.greedy_generate(
        w, prompt, 5, CONFIG.n_layer, CONFIG.n_head, CONFIG.layer_norm_epsilon
    )
    got = generate(ctx, model, prompt, 5)
    if got != want:
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


def long_prompt_is_cropped(ctx: Context) -> None:
    model, _ = tiny_model(ctx)
    prompt = list(range(CONFIG.n_positions))  # fills the context window
    generate(ctx, model, prompt, 2)


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
    required={"sample_next_token": [], "generate_tokens": [], "generate_text": []},
    checks=[
        Check("top_k=1 always picks the most likely token", top_k_one_is_greedy),
        Check("a token outside the top k is never drawn", never_outside_top_k),
        Check("draws follow softmax(logits / temperature)", distribution),
        Check("the same seed gives the same draws", reproducible),
        Check("greedy generation matches GPT-2's", greedy_matches_reference),
        Check("sampling is reproducible with a seed", sampling_is_seeded),
        Check("a prompt filling the context window still generates", long_prompt_is_cropped),
        Check("generate_text streams the new text", streams_text),
    ],
)
