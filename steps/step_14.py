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
    # TODO: scale the logits by the temperature (float64 avoids overflow).
    logits = None
    # END TODO
    if top_k is not None and top_k < logits.size:
        # TODO: give every logit strictly below the k-th largest -inf (the k-th
        #   largest itself stays: top-k keeps k tokens, not k-1).
        #   Hint: np.partition(a, kth) puts the value that belongs at index kth
        #   of the sorted array there; a negative kth counts from the end.
        #   np.where(condition, -np.inf, a) masks.
        kth_largest = None
        logits = None
        # END TODO
    # TODO: softmax (subtract the max first: exp of large numbers overflows;
    #   then divide by the sum), and draw one id with those probabilities.
    #   Hint: rng.choice(n, p=probs) draws from 0..n-1 (p= wants probabilities,
    #   not logits); return it as a Python int.
    probs = None
    return None
    # END TODO


def next_token_logits(model, token_ids: Sequence[int]) -> np.ndarray:
    """Run the model on one sequence; return the last position's logits."""
    # TODO: a [1, seq] int64 Tensor of the ids (a batch of one), the model's
    #   logits for it ([1, seq, vocab_size]), and the last position's row as a
    #   NumPy array ([vocab_size]).
    #   Hint: Tensor(array) wraps a NumPy array; .to_numpy() copies a Tensor
    #   out. Index the NumPy array, not the Tensor (one op fewer per token).
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
        #   fewer); then either sample (do_sample) or take the argmax of that
        #   [vocab_size] row (greedy); append the id and yield it.
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
