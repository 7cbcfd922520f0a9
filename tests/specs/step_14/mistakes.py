"""The mistakes step 14's checks must name: plausible learner edits of
solutions/solution_14.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

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
