"""The load generator: streamed completions, `concurrency` at a time.

A token is an event of the stream, not a piece of text. A token can carry no
text (bytes of a character still incomplete, or an id the tokenizer of a
locally made checkpoint has no text for), and counting only the events with
text makes the tokens seem to arrive in bursts.
"""

from __future__ import annotations

import json
import math
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

PROMPTS = (
    "The quick brown fox",
    "A language model predicts",
    "Attention lets every position",
    "MAX compiles the model",
)
# A bound on every request, so a stuck server fails the run instead of hanging it.
REQUEST_TIMEOUT = 600.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), interpolated between the nearest ranks."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_ms(values: Sequence[float]) -> dict:
    """Median and 99th percentile of `values` (seconds), in milliseconds."""
    if not values:
        return {"p50": None, "p99": None}
    return {
        "p50": round(1000 * percentile(values, 50), 2),
        "p99": round(1000 * percentile(values, 99), 2),
    }


def summarize(arrivals: Sequence[Sequence[float]], seconds: float, concurrency: int) -> dict:
    """A level's numbers from each request's token arrival times (seconds
    after the request was sent) and the level's wall time."""
    tokens = sum(len(times) for times in arrivals)
    gaps = [later - earlier for times in arrivals for earlier, later in pairwise(times)]
    return {
        "concurrency": concurrency,
        "requests": len(arrivals),
        "tokens": tokens,
        "seconds": round(seconds, 3),
        "tokens_per_second": round(tokens / seconds, 2),
        "ttft_ms": latency_ms([times[0] for times in arrivals if times]),
        "itl_ms": latency_ms(gaps),
    }


def completion_body(model: str, prompt: str, max_tokens: int) -> dict:
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,  # every request generates exactly max_tokens tokens
        "stream": True,
    }


def is_token_event(chunk: dict) -> bool:
    """Whether a streamed chunk carries a generated token. A token may have no
    text (its bytes end in a later token); a closing chunk with no text that
    only says why the stream ended (llama.cpp's server sends one) is no token."""
    choices = chunk.get("choices") or []
    return any(c.get("text") or c.get("finish_reason") is None for c in choices)


def token_arrivals(base_url: str, body: dict) -> list[float]:
    """Send one streamed completion; the arrival time of each token event."""
    request = urllib.request.Request(
        f"{base_url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    started = time.perf_counter()
    arrivals = []
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            if is_token_event(json.loads(line.removeprefix("data:"))):
                arrivals.append(time.perf_counter() - started)
    return arrivals


def post_json(url: str, body: dict, timeout: float = 120) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def completion_tokens(base_url: str, body: dict) -> int:
    """Send one completion, not streamed; how many tokens it generated."""
    answer = post_json(f"{base_url}/v1/completions", body, timeout=REQUEST_TIMEOUT)
    return int(answer["usage"]["completion_tokens"])


def run_level(
    base_url: str,
    model: str,
    concurrency: int,
    requests: int,
    max_tokens: int,
    extra: dict | None = None,
    stream: bool = True,
) -> dict:
    """`requests` completions, `concurrency` in flight at a time; `extra`
    adds fields a particular server needs to each request. Streamed, every
    token is timed; not streamed (stream=False), only the tokens the server
    counted and the wall time are known: throughput, no latencies."""
    bodies = [
        completion_body(model, PROMPTS[i % len(PROMPTS)], max_tokens)
        | (extra or {})
        | {"stream": stream}
        for i in range(requests)
    ]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        if stream:
            arrivals = list(pool.map(lambda body: token_arrivals(base_url, body), bodies))
        else:
            counts = list(pool.map(lambda body: completion_tokens(base_url, body), bodies))
    seconds = time.perf_counter() - started
    if stream:
        return summarize(arrivals, seconds, concurrency)
    return summarize([[] for _ in counts], seconds, concurrency) | {
        "tokens": sum(counts),
        "tokens_per_second": round(sum(counts) / seconds, 2),
    }
