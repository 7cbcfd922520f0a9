"""Running the mutants: each one through its step's checker, in worker processes.

A mutant the checker fails is killed. Each step's time limit is what the
checker itself allows, measured on the solution first (a solution that fails
its own checker stops the run). A survivor listed in
tests/mutation_equivalents.toml computes the same as the solution and is
counted as equivalent; any other survivor is reported.
"""

from __future__ import annotations

import itertools
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from common import steps
from common.cli import Failure
from common.steps import REPO
from devtools.mutate.operators import Mutant, file_order, mutants, sample

EQUIVALENTS = REPO / "tests" / "mutation_equivalents.toml"


# -- the equivalents file ----------------------------------------------------


def load_equivalents(path: Path = EQUIVALENTS) -> dict[tuple[int, str], str]:
    """{(step, mutant key): reason} from the committed file."""
    if not path.is_file():
        return {}
    entries = tomllib.loads(path.read_text(encoding="utf-8")).get("equivalent", [])
    return {(int(e["step"]), str(e["mutant"])): str(e["reason"]) for e in entries}


# -- checking the mutants ----------------------------------------------------


@dataclass
class StepResult:
    """One step's mutants, counted by what became of them."""

    number: int
    killed: int = 0
    equivalent: int = 0
    survivors: list[Mutant] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return self.killed + self.equivalent + len(self.survivors)


class SolutionFails(Failure):
    """The solution itself fails its checker: no mutant result would mean anything."""


def time_limit(number: int) -> float:
    """Seconds per check for this step's mutants: what the checker allows
    (LIMIT_FACTOR times the usual time, at least LIMIT_FLOOR), with the usual
    time measured now, on the solution, on this machine as loaded as it is.
    A mutant that runs longer is killed: the checker would stop it too."""
    from tests.checker import CheckProcess
    from tests.checker.engine import LIMIT_FACTOR, LIMIT_FLOOR

    with CheckProcess(quiet=True) as worker:
        _, outcomes = worker.run_step(number, steps.step(number).solution)
        failed = [o for o in outcomes if o.status != "pass"]
        if failed:
            raise SolutionFails(
                f"{steps.step(number).solution.relative_to(REPO)} fails its own checker "
                f"({failed[0].name}: {failed[0].message})"
            )
        slowest = max(worker.durations.values(), default=0.0)
    return max(LIMIT_FLOOR, LIMIT_FACTOR * slowest)


def run(
    todo: list[Mutant], jobs: int, progress: Callable[[Mutant, bool], None], limit: float
) -> dict[Mutant, bool]:
    """Check every mutant in `jobs` worker processes: {mutant: killed}."""
    from tests.checker import CheckProcess

    queue = list(reversed(todo))
    killed: dict[Mutant, bool] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    numbers = itertools.count()
    scratch = tempfile.TemporaryDirectory(prefix="mutants-")

    def check(worker: CheckProcess, mutant: Mutant) -> bool:
        # A folder per mutant: a reused path could meet a stale .pyc.
        folder = Path(scratch.name) / f"{next(numbers):05d}"
        folder.mkdir()
        path = folder / steps.step(mutant.step).skeleton.name
        path.write_text(mutant.source, encoding="utf-8")
        _, outcomes = worker.run_step(mutant.step, path, limit=limit)
        return any(o.status == "fail" for o in outcomes)

    def work() -> None:
        try:
            with CheckProcess(quiet=True) as worker:
                while True:
                    with lock:
                        if not queue or errors:
                            return
                        mutant = queue.pop()
                    caught = check(worker, mutant)
                    with lock:
                        killed[mutant] = caught
                        progress(mutant, caught)
        except BaseException as error:  # reported by the main thread
            with lock:
                errors.append(error)

    with scratch:
        threads = [threading.Thread(target=work) for _ in range(max(1, jobs))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return killed


def bar(done: int, total: int, width: int = 30) -> str:
    """`[#####-----] done/total`."""
    filled = round(width * done / total) if total else width
    return "[" + "#" * filled + "-" * (width - filled) + f"] {done}/{total}"


class Progress:
    """A progress bar: redrawn in place on a terminal, every 10 mutants in a log."""

    def __init__(self, label: str, total: int, tty: bool) -> None:
        self.label, self.total, self.tty, self.done = label, total, tty, 0
        if tty:
            print(f"{label} {bar(0, total)}", end="", flush=True)

    def __call__(self, mutant: Mutant, caught: bool) -> None:
        self.done += 1
        line = f"{self.label} {bar(self.done, self.total)}"
        if self.tty:
            print(f"\r{line}", end="", flush=True)
        elif self.done == self.total or self.done % 10 == 0:
            print(line, flush=True)


def mutate_step(
    number: int,
    count: int | None,
    jobs: int,
    equivalents: dict[tuple[int, str], str],
    tty: bool,
) -> StepResult:
    """Check one step's mutants (`count` of them, or all) and sort out the survivors."""
    found = mutants(number)
    todo = found if count is None else sample(found, count)
    result = StepResult(number)
    started = time.perf_counter()
    limit = time_limit(number)
    progress = Progress(f"step {number:02d}", len(todo), tty)
    for mutant, caught in run(todo, jobs, progress, limit).items():
        if caught:
            result.killed += 1
        elif (number, mutant.key) in equivalents:
            result.equivalent += 1
        else:
            result.survivors.append(mutant)
    # Workers finish in any order: list the survivors in file order.
    result.survivors.sort(key=file_order)
    result.seconds = time.perf_counter() - started
    return result


def print_result(result: StepResult) -> None:
    print(
        f"step {result.number:02d}: {result.total} mutants, {result.killed} killed, "
        f"{result.equivalent} equivalent, {len(result.survivors)} survived "
        f"({result.seconds:.0f} s)",
        flush=True,
    )
    for mutant in result.survivors:
        print(f"   survived: {mutant.describe()}", flush=True)


def mutate_steps(numbers: list[int], count: int | None, jobs: int) -> list[StepResult]:
    """Each step's result, printed as it comes (a full run takes tens of minutes)."""
    equivalents = load_equivalents()
    tty = sys.stdout.isatty()
    results = []
    for number in numbers:
        result = mutate_step(number, count, jobs, equivalents, tty)
        if tty:
            print()  # end the progress bar's line
        print_result(result)
        results.append(result)
    return results


def measure_times(numbers: list[int]) -> None:
    """Each solution's slowest check, as the worker runs it (for Step.typical)."""
    from tests.checker import CheckProcess, load_spec

    with CheckProcess(quiet=True) as worker:
        for number in numbers:
            worker.run_step(number, steps.step(number).solution)  # warm-up: caches
            _, outcomes = worker.run_step(number, steps.step(number).solution)
            slowest = max(worker.durations.items(), key=lambda item: item[1])
            step = load_spec(number)
            print(
                f"step {number:02d}: slowest check {slowest[1]:.1f} s ({slowest[0]}); "
                f"declared typical {step.typical:g} s",
                flush=True,
            )
