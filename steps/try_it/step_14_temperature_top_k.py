"""Step 14, try it: what temperature and top-k do to the next-token distribution.

One fixed vector of logits over a made-up vocabulary of 1,000 tokens, shaped
like a language model's: a few likely tokens, then a long tail. For each
setting it draws 5,000 tokens with sample_next_token and prints how often the
five most likely tokens came up, how much went to all the others, and how many
different tokens were drawn at all.
"""

import numpy as np

from solutions.solution_14 import sample_next_token

VOCAB, DRAWS = 1000, 5000


def made_up_logits() -> np.ndarray:
    """Token i is the (i+1)-th most likely: logits fall off like a log of the rank."""
    rank = np.arange(1, VOCAB + 1)
    noise = np.random.default_rng(0).normal(0.0, 0.05, VOCAB)
    return (4.0 - 1.2 * np.log(rank) + noise).astype(np.float32)


def row(label: str, logits: np.ndarray, **options) -> str:
    rng = np.random.default_rng(0)
    drawn = np.array([sample_next_token(logits, rng=rng, **options) for _ in range(DRAWS)])
    share = np.bincount(drawn, minlength=VOCAB) / DRAWS
    top = " ".join(f"{p:5.2f}" for p in share[:5])
    return f"{label:<16} {top}   {share[5:].sum():5.2f}   {len(set(drawn.tolist())):>5}"


def main() -> None:
    logits = made_up_logits()
    print(f"{'setting':<16} {'tok0  tok1  tok2  tok3  tok4':<29}  rest   distinct")
    for t in (0.5, 1.0, 2.0):
        print(row(f"temperature {t}", logits, temperature=t))
    for k in (1, 5, 50):
        print(row(f"top_k {k}", logits, top_k=k))
    print(row("T 2.0, top_k 5", logits, temperature=2.0, top_k=5))


if __name__ == "__main__":
    main()
