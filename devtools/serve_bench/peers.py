"""The peers, measured only after the server has stopped.

- transformers' `generate`, the way one serves without a serving engine:
  `concurrency` prompts in one batch, left-padded so that every row's last
  prompt token is in the last column, greedy, exactly max_tokens tokens.
  A streamer stamps each token the batch produces (one for every row at
  once), so a batch gives every row's TTFT (the first token) and ITL (the
  tokens after it) like a served request.
- our fast model (fast/gpt2.py) on one stream: what one request at a time
  could run at on this machine.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from devtools.bench.machine import usable_cpus
from devtools.serve_bench.load import PROMPTS, summarize


class TokenClock:
    """A `generate` streamer that records when each new token is produced."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.arrivals: list[float] = []
        self._prompt_seen = False

    def put(self, value) -> None:
        if not self._prompt_seen:  # generate hands the prompt over first
            self._prompt_seen = True
            return
        self.arrivals.append(time.perf_counter() - self.started)

    def end(self) -> None:
        pass


def left_padded(rows: list[list[int]], pad_id: int):
    """input_ids and attention_mask with every row right-aligned."""
    import torch

    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, width - len(row) :] = torch.tensor(row)
        mask[i, width - len(row) :] = 1
    return ids, mask


def greedy(model, prompts, tokens: int, clock: TokenClock | None = None):
    """Exactly `tokens` greedy tokens for every row of `prompts` (ids, mask)."""
    ids, mask = prompts
    return model.generate(
        ids,
        attention_mask=mask,
        max_new_tokens=tokens,
        min_new_tokens=tokens,
        do_sample=False,
        pad_token_id=0,
        streamer=clock,
    )


def transformers_levels(
    directory: Path, levels: list[int], requests: int, max_tokens: int
) -> list[dict]:
    """Batched greedy `generate` at each concurrency, as many requests as the
    server answered at that level."""
    import torch
    from transformers import GPT2LMHeadModel

    from tools.generate import Tokenizer

    torch.set_num_threads(usable_cpus())
    model = GPT2LMHeadModel.from_pretrained(directory).eval()
    encoded = [Tokenizer(directory).encode(prompt) for prompt in PROMPTS]
    results = []
    with torch.no_grad():
        for concurrency in levels:
            prompts = left_padded([encoded[i % len(encoded)] for i in range(concurrency)], 0)
            greedy(model, prompts, 2)  # warm-up
            arrivals, started = [], time.perf_counter()
            for _ in range(math.ceil(max(requests, 2 * concurrency) / concurrency)):
                clock = TokenClock()
                greedy(model, prompts, max_tokens, clock)
                arrivals += [clock.arrivals] * concurrency  # every row gets each token at once
            results.append(summarize(arrivals, time.perf_counter() - started, concurrency))
    return results


def fast_single_stream(directory: Path, max_tokens: int, requests: int) -> dict:
    """fast/gpt2.py, float32, one request after another."""
    from fast import gpt2 as fast_gpt2
    from tools.generate import Tokenizer

    generator = fast_gpt2.FastGenerator(fast_gpt2.load(directory))
    encoded = [Tokenizer(directory).encode(prompt) for prompt in PROMPTS]
    return one_stream(generator, encoded, max_tokens, requests)


def one_stream(generator, encoded: list[list[int]], max_tokens: int, requests: int) -> dict:
    """`requests` greedy generations of `max_tokens` by `generator` (a fast
    path's), one after another, the prompts `encoded` in turn."""
    list(generator.generate(encoded[0], 4, do_sample=False))  # compiles, warms up
    arrivals, started = [], time.perf_counter()
    for i in range(requests):
        begun, times = time.perf_counter(), []
        for _ in generator.generate(encoded[i % len(encoded)], max_tokens, do_sample=False):
            times.append(time.perf_counter() - begun)
        arrivals.append(times)
    return summarize(arrivals, time.perf_counter() - started, 1)
