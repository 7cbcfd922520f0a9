"""The next token from a model's logits, as both fast generators choose it:
the most likely, or sampled by step 14's sample_next_token."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from solutions.solution_14 import sample_next_token


def token_chooser(
    do_sample: bool = False, seed: int | None = None, **options
) -> Callable[[np.ndarray], int]:
    """logits -> the next token id: the most likely, or sampled with `options`
    (step 14's temperature and top_k) from a generator seeded once, so that a
    seed gives the same tokens run after run."""
    if not do_sample:
        return lambda logits: int(np.argmax(logits))
    rng = np.random.default_rng(seed)
    return lambda logits: sample_next_token(logits, rng=rng, **options)
