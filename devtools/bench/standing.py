"""`python -m devtools.bench.standing`: where the fast model stands against its
peers on every machine the book has a CPU run of, in one table.

It reads nothing but the runs' saved data: docs/src/bench/results*.json (one
machine's runs) and the same files in each subfolder (another machine's,
such as xeon/), and draws, a column per machine:

- a decoded token, ours over llama.cpp's in the same dtype, at each length;
- what share of the memory's read rate a decoded token reaches (its bytes
  per token times tokens/s), three ways: over the run's fastest read, over
  the probe read right before each decode, over the sustained read right
  before it (docs/src/performance.md, "The ceiling: memory bandwidth");
- a 512-token prompt, ours over PyTorch's in the same dtype;

each a median with its spread (min-max) over the run's interleaved rounds.
The performance page includes the table (docs/src/bench/standing.md), and
`python -m devtools.bench` redraws it whenever it writes the book's tables;
tests/test_bench_standing.py checks that the committed table is what this module
makes of the committed data.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from common.cli import ArgumentParser, UsageError, exit_status
from common.steps import REPO
from devtools.bench.stats import format_percent, format_spread, paired_ratios, summary

BENCH = REPO / "docs" / "src" / "bench"
OUT = BENCH / "standing.md"
DTYPES = ("float32", "bfloat16")
# Each dtype's peers, as the benchmark names its contenders.
LLAMA_CPP = {"float32": "llama.cpp-f32", "bfloat16": "llama.cpp-bf16"}
PYTORCH = {"float32": "transformers", "bfloat16": "transformers-bf16"}
NOT_MEASURED = "-"


def machine_name(data: dict) -> str:
    """'AMD EPYC, 2 cores' of a run's machine line (the software versions left out)."""
    return data["machine"].split(", Python")[0]


def cpu_runs(folder: Path) -> dict[str, dict[str, dict]]:
    """{machine: {dtype: data}} of every CPU run saved under `folder`, the
    machine of the folder's own runs first, then those of its subfolders."""
    runs: dict[str, dict[str, dict]] = {}
    where: dict[tuple[str, str], Path] = {}
    paths = folder.rglob("results*.json")
    for path in sorted(paths, key=lambda p: (len(p.relative_to(folder).parts), p)):
        try:
            data = json.loads(path.read_text())
            if data["device"] != "cpu":
                continue
            key = (machine_name(data), data["dtype"])
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise UsageError(f"{path} is not a benchmark run's data ({error!r})") from error
        if key in where:
            raise UsageError(
                f"{where[key]} and {path} are both {key[1]} runs on {key[0]}: "
                "keep one run per machine and dtype"
            )
        where[key] = path
        runs.setdefault(key[0], {})[key[1]] = data
    return runs


def decode_ratios(data: dict) -> str:
    """'1.09x / 1.38x / 1.39x (0.87-1.60)': ours over llama.cpp at each
    length, the medians, then the spread over every round and length."""
    ratios = data["ratios"].get(f"fast/{LLAMA_CPP[data['dtype']]}")
    if not ratios:
        return NOT_MEASURED
    lengths = [str(n) for n in data["lengths"] if str(n) in ratios]
    medians = " / ".join(f"{ratios[n]['median']:.2f}x" for n in lengths)
    low = min(ratios[n]["min"] for n in lengths)
    high = max(ratios[n]["max"] for n in lengths)
    return f"{medians} ({low:.2f}-{high:.2f})"


def read_shares(data: dict, kind: str) -> str:
    """Ours and llama.cpp's share of the memory's read rate, 'ours / llama.cpp':
    over the run's fastest read (`kind` 'ceiling'), or in the median round
    over the probe ('probe') or sustained read ('sustained') right before."""
    shares = []
    for key in ("fast", LLAMA_CPP[data["dtype"]]):
        fraction = data.get(f"{kind}_fraction", {}).get(key)
        if fraction is None:
            shares.append(NOT_MEASURED)
        elif kind == "ceiling":
            shares.append(f"{100 * fraction:.0f}%")
        else:
            shares.append(format_percent(fraction))
    return " / ".join(shares)


def prefill_ratio(data: dict) -> str:
    """'1459 / 913 tok/s, 1.60x (1.46-1.64)': ours and PyTorch's medians, then
    ours over PyTorch's paired round by round."""
    contenders = data["contenders"]
    peer = PYTORCH[data["dtype"]]
    if peer not in contenders:
        return NOT_MEASURED
    ours = contenders["fast"]["prefill_tokens_per_s"]
    theirs = contenders[peer]["prefill_tokens_per_s"]
    paired = summary(paired_ratios(ours["samples"], theirs["samples"]))
    return f"{ours['median']:.0f} / {theirs['median']:.0f} tok/s, {format_spread(paired, 'x')}"


def memory_read(data: dict) -> str:
    """The probes' reads over the run, GB/s: median (min-max)."""
    return format_spread(data["bandwidth_gb_s"], " GB/s", 1)


# (what a row says, with {dtype}; the cell it draws from one run; what the
# figures were measured over, which a run may set otherwise than the others)
ROWS = (
    ("{dtype} decode: ours / llama.cpp", decode_ratios, "{lengths} tokens"),
    ("{dtype} decode, of the run's fastest read: ours / llama.cpp", lambda d: read_shares(d, "ceiling"), None),
    ("{dtype} decode, of the probe right before it: ours / llama.cpp", lambda d: read_shares(d, "probe"), None),
    ("{dtype} decode, of the sustained read right before it: ours / llama.cpp", lambda d: read_shares(d, "sustained"), None),
    ("{dtype} prefill: ours / PyTorch", prefill_ratio, "{prefill} tokens"),
    ("{dtype} run: the memory's read rate, all probes", memory_read, None),
)  # fmt: skip


def scope_of(scope: str | None, data: dict) -> str:
    """What one run's figures of a row were measured over ('32 / 128 tokens')."""
    if scope is None:
        return ""
    lengths = " / ".join(str(n) for n in data["lengths"])
    return scope.format(lengths=lengths, prefill=data["prefill_length"])


def format_standing(runs: dict[str, dict[str, dict]]) -> str:
    """The book's table: a row per figure and dtype, a column per machine."""
    machines = list(runs)
    lines = [
        "Where the fast model stands on each machine measured, drawn from the data of "
        "the benchmark's runs on this page (`python -m devtools.bench.standing`): each "
        "figure the median over a run's interleaved rounds, (min-max) its spread over "
        "them; a share of the read rate is at the length the contender decoded fastest.",
        "",
        "| | " + " | ".join(machines) + " |",
        "|---" * (len(machines) + 1) + "|",
    ]
    for dtype in DTYPES:
        measured = [r[dtype] for r in runs.values() if dtype in r]
        if not measured:
            continue
        for label, cell, scope in ROWS:
            # The label says the first run's scope; a cell whose run differs says its own.
            common = scope_of(scope, measured[0])
            what = label.format(dtype=dtype) + (f", {common}" if common else "")
            cells = []
            for run in runs.values():
                if dtype not in run:
                    cells.append(NOT_MEASURED)
                    continue
                own = scope_of(scope, run[dtype])
                cells.append(cell(run[dtype]) + (f" at {own}" if own != common else ""))
            lines.append(f"| {what} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write() -> str:
    """Draw the table from the runs under BENCH into OUT; return it."""
    table = format_standing(cpu_runs(BENCH))
    OUT.write_text(table)
    return table


def main(argv: list[str] | None = None) -> int:
    def run() -> None:
        parser = ArgumentParser(
            prog="python -m devtools.bench.standing", description=__doc__.splitlines()[0]
        )
        parser.add_argument("--no-book", action="store_true", help="print only")
        args = parser.parse_args(argv)
        if args.no_book:
            print(format_standing(cpu_runs(BENCH)), end="")
            return
        print(write(), end="")
        print(f"Wrote {OUT}")

    return exit_status(run)


if __name__ == "__main__":
    sys.exit(main())
