"""Step 14's checks of generate_tokens and generate_text: greedy and seeded sampling on a tiny model, the context window, streamed text."""

import numpy as np

from tests import reference_gpt2 as ref
from tests.checker import Context, Fail
from tests.specs.model_parts import tied_lm_weights

from .sampling import CONFIG


def tiny_model(ctx: Context):
    """One small GPT-2 per check run, made on first use: (model, weights)."""
    return ctx.once("tiny model", lambda: build_tiny_model(ctx))


def build_tiny_model(ctx: Context):
    # Token and position both steer the prediction, so the greedy continuation
    # changes with the context: a loop that forgets to append the chosen token
    # repeats one token where GPT-2 moves on.
    weights = tied_lm_weights(ctx, CONFIG, wte_scale=3, wpe_scale=12)
    return ReferenceGPT2(weights), weights


def batch_of_one(input_ids) -> np.ndarray:
    """The [1, seq] ids a model was called with, or a Fail that says what came instead."""
    from max.experimental.tensor import Tensor

    if not isinstance(input_ids, Tensor):
        raise Fail(
            f"the model was given a {type(input_ids).__name__}, not a MAX Tensor: GPT-2's "
            "MAX model takes its ids as a Tensor (with a NumPy array it fails inside MAX).",
            "next_token_logits makes a [1, seq] int64 array of the ids and turns it into a "
            "Tensor before calling the model.",
        )
    ids = np.asarray(input_ids.to_numpy())
    if ids.ndim != 2 or ids.shape[0] != 1:
        raise Fail(
            f"the model was given ids of shape {list(ids.shape)}, expected [1, seq].",
            "next_token_logits wraps the ids in a batch of one: a [1, seq] int64 Tensor.",
        )
    if not np.issubdtype(ids.dtype, np.integer):
        raise Fail(
            f"the model was given ids of dtype {ids.dtype}, expected integers (int64).",
            "Token ids are integers: make the array with dtype=np.int64.",
        )
    return ids


class ReferenceGPT2:
    """GPT-2 (steps 12-13's model) computed by the NumPy reference behind the
    model's call: it takes a [1, seq] Tensor of ids and returns the [1, seq,
    vocab_size] logits as a MAX Tensor, as MaxGPT2LMHeadModel does. Step 14
    checks the loop around the model, which calls it once per new token; the
    reference answers in a millisecond where the eager MAX model takes a
    tenth of a second."""

    config = CONFIG

    def __init__(self, weights: dict) -> None:
        self.weights = weights

    def __call__(self, input_ids):
        from max.experimental.tensor import Tensor

        ids = batch_of_one(input_ids)
        logits = ref.lm_logits(
            self.weights, ids, CONFIG.n_layer, CONFIG.n_head, CONFIG.layer_norm_epsilon
        )
        return Tensor(np.ascontiguousarray(logits, dtype=np.float32))


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

        ids = batch_of_one(input_ids)
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
