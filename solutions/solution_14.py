"""Step 14: generating text.

A language model only ever predicts the next token. To write text we ask it
again and again: run the model on the tokens so far, turn the last position's
logits into one new token, append it, repeat. How we pick that token decides
the character of the text:

- greedy: always the most likely token. Deterministic, often repetitive.
- temperature: divide the logits by T before the softmax. T < 1 sharpens the
  distribution toward the likely tokens, T > 1 flattens it.
- top-k: sample only among the k most likely tokens, so a long tail of
  unlikely tokens cannot derail the text.
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
    logits = logits.astype(np.float64) / temperature
    if top_k is not None and top_k < logits.size:
        # Everything below the k-th largest logit gets probability zero.
        kth_largest = np.partition(logits, -top_k)[-top_k]
        logits = np.where(logits < kth_largest, -np.inf, logits)
    probs = np.exp(logits - logits.max())  # softmax, shifted for stability
    probs /= probs.sum()
    return int(rng.choice(logits.size, p=probs))


def next_token_logits(model, token_ids: Sequence[int]) -> np.ndarray:
    """Run the model on one sequence; return the last position's logits."""
    input_ids = Tensor(np.asarray([token_ids], dtype=np.int64))
    logits = model(input_ids)  # [1, seq, vocab_size]
    # Copy the logits out and slice in NumPy: slicing the MAX tensor would run
    # one more eager op per token, which costs more than the copy.
    return np.asarray(logits.to_numpy())[0, -1]


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
        logits = next_token_logits(model, token_ids[-context_length:])
        if do_sample:
            next_id = sample_next_token(logits, temperature=temperature, top_k=top_k, rng=rng)
        else:
            next_id = int(np.argmax(logits))
        token_ids.append(next_id)
        yield next_id


def decode_stream(tokenizer: Tokenizer, token_ids: Iterable[int]) -> Iterator[str]:
    """Yield the text of `token_ids` piece by piece, as the ids arrive."""
    new_ids: list[int] = []
    shown = ""
    for token_id in token_ids:
        new_ids.append(token_id)
        # Decode everything so far: one character can span several tokens,
        # so decoding token by token could split it.
        text = tokenizer.decode(new_ids)
        if not text.endswith("\ufffd"):  # wait for the rest of a split character
            yield text[len(shown) :]
            shown = text


def generate_text(
    model, tokenizer: Tokenizer, prompt: str, max_new_tokens: int, **sampling
) -> Iterator[str]:
    """Yield the generated text piece by piece, as tokens are produced."""
    yield from decode_stream(
        tokenizer, generate_tokens(model, tokenizer.encode(prompt), max_new_tokens, **sampling)
    )
