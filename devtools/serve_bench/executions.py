"""Where a served token's time goes: in our model's compiled graph, or in
MAX's pipeline around it (scheduling, sampling, the handoff to the HTTP
process).

The bench serves our GPT-2 through timed_arch, whose model worker appends
the start and end of every model execution (one call of the pipeline model's
`execute`) to the file EXECUTION_LOG names. At concurrency 1 an execution is
one token of one request, so the median execution is a token's time in the
model, and the median gap between the end of one execution and the start of
the next is the time the pipeline adds to every token.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from devtools.serve_bench.load import percentile

# The environment variable that names the log, for the server's model worker.
EXECUTION_LOG = "SERVE_BENCH_EXECUTION_LOG"


def read_executions(path: Path) -> list[tuple[int, int]]:
    """(start, end) of every logged execution, in monotonic nanoseconds."""
    if not path.is_file():
        return []
    executions = []
    for line in path.read_text().splitlines():
        started, ended = line.split()
        executions.append((int(started), int(ended)))
    return executions


def split_execution_time(executions: list[tuple[int, int]], window: tuple[int, int]) -> dict | None:
    """The executions that ran inside `window` (monotonic nanoseconds): how
    many, and the median milliseconds in the model and between two
    executions. None when fewer than two ran in it."""
    first, last = window
    inside = sorted(run for run in executions if first <= run[0] and run[1] <= last)
    if len(inside) < 2:
        return None
    in_model = [(ended - started) / 1e6 for started, ended in inside]
    between = [(later[0] - earlier[1]) / 1e6 for earlier, later in pairwise(inside)]
    return {
        "executions": len(inside),
        "model_ms": round(percentile(in_model, 50), 2),
        "between_ms": round(percentile(between, 50), 2),
    }
