"""Step 14: generating text.

Goal: turn the model into a writer: pick each next token from the logits
(greedy, temperature, top-k), feed it back in, and stream the decoded text.

Run: pixi run s14    (or: python -m tests.check 14)
Stuck? Read docs/src/step_14.md (pixi run book).
"""

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

import numpy as np
from max.experimental.tensor import Tensor


class Tokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: Sequence[int]) -> str: ...


def sample_next_token(
    logits: np.ndarray,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    rng: np.random.Generator,
) -> int:
    """Draw one token id from a [vocab_size] vector of logits."""
    # TODO: the logits divided by the temperature, in float64 (exp overflows
    #   sooner in float32): [vocab_size] in, [vocab_size] out.
    logits = None
    # END TODO
    if top_k is not None and top_k < logits.size:
        # TODO: the k-th largest logit, found without sorting the whole vector,
        #   and the logits with every one strictly below it set to -inf (the
        #   k-th largest itself stays: top-k keeps k tokens, not k-1). The
        #   page's "The details that matter" has the NumPy operations.
        kth_largest = None
        logits = None
        # END TODO
    # TODO: the softmax of the logits (exp after subtracting the largest, so
    #   nothing overflows, then divided by the sum): [vocab_size] probabilities.
    #   Then one id drawn with those probabilities from `rng`, the generator
    #   the caller seeded, returned as a Python int.
    probs = None
    return None
    # END TODO


def next_token_logits(model, token_ids: Sequence[int]) -> np.ndarray:
    """Run the model on one sequence; return the last position's logits."""
    # TODO: the ids as a [1, seq] int64 Tensor (a batch of one), the model's
    #   logits for it ([1, seq, vocab_size]), and the last position's row as a
    #   NumPy array ([vocab_size]). Index a NumPy copy, not the Tensor: one
    #   eager op fewer per token (the page's "The generation loop").
    input_ids = None
    logits = None  # [1, seq, vocab_size]
    return None
    # END TODO


def generate_tokens(
    model,
    prompt_ids: Sequence[int],
    max_new_tokens: int,
    *,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int | None = None,
    context_length: int = 1024,
) -> Iterator[int]:
    """Yield max_new_tokens new token ids, one at a time, as they are chosen."""
    rng = np.random.default_rng(seed)
    token_ids = list(prompt_ids)
    for _ in range(max_new_tokens):
        # The position table has context_length rows: beyond that, the model
        # sees only the most recent tokens.
        # TODO: logits for exactly the last context_length tokens (no more, no
        #   fewer); then either sample (do_sample), with this function's
        #   temperature, top_k and rng, or take the most likely id of that
        #   [vocab_size] row (greedy), as a Python int; append it and yield it.
        logits = None
        if do_sample:
            next_id = None
        else:
            next_id = None
        token_ids.append(next_id)
        yield next_id
        # END TODO


def decode_stream(tokenizer: Tokenizer, token_ids: Iterable[int]) -> Iterator[str]:
    """Yield the text of `token_ids` piece by piece, as the ids arrive."""
    new_ids: list[int] = []
    shown = ""
    for token_id in token_ids:
        new_ids.append(token_id)
        # Decode everything so far: one character can span several tokens,
        # so decoding token by token could split it.
        # TODO: decode new_ids; unless the text ends in "\ufffd" (half a
        #   character), yield only the part after what was already shown.
        text = None
        if not text.endswith("\ufffd"):  # wait for the rest of a split character
            yield text[len(shown) :]
            shown = None
        # END TODO


def generate_text(
    model, tokenizer: Tokenizer, prompt: str, max_new_tokens: int, **sampling
) -> Iterator[str]:
    """Yield the generated text piece by piece, as tokens are produced."""
    yield from decode_stream(
        tokenizer, generate_tokens(model, tokenizer.encode(prompt), max_new_tokens, **sampling)
    )
