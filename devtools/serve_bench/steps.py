"""Where a served token's time goes: in our model's compiled graph, or in
MAX's pipeline around it (scheduling, sampling, the handoff to the HTTP
process).

The server runs with gpt2_serving.model.STEP_LOG naming a file, and the model
worker appends each step's start and end to it. At concurrency 1 a step is
one token of one request, so the median step is a token's time in the
model, and the median gap between the end of one step and the start of the
next is the time the pipeline adds to every token.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from devtools.serve_bench.load import percentile


def read_steps(path: Path) -> list[tuple[int, int]]:
    """(start, end) of every logged step, in monotonic nanoseconds."""
    if not path.is_file():
        return []
    steps = []
    for line in path.read_text().splitlines():
        started, ended = line.split()
        steps.append((int(started), int(ended)))
    return steps


def split_step_time(steps: list[tuple[int, int]], window: tuple[int, int]) -> dict | None:
    """The steps that ran inside `window` (monotonic nanoseconds): how many,
    and the median milliseconds in the model and between two steps. None
    when fewer than two steps ran in it."""
    first, last = window
    inside = sorted(step for step in steps if first <= step[0] and step[1] <= last)
    if len(inside) < 2:
        return None
    in_model = [(ended - started) / 1e6 for started, ended in inside]
    between = [(later[0] - earlier[1]) / 1e6 for earlier, later in pairwise(inside)]
    return {
        "steps": len(inside),
        "model_ms": round(percentile(in_model, 50), 2),
        "between_ms": round(percentile(between, 50), 2),
    }
