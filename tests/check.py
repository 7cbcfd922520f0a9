"""Check a step of the tutorial: `python -m tests.check 09` (or `pixi run s09`).

    python -m tests.check 9            check steps/step_09.py
    python -m tests.check 09 --solutions   check solutions/solution_09.py
    python -m tests.check all          check every step, with a progress summary
                                       (a step unchanged since it passed is not run again)
    python -m tests.check all --rerun  ... running every check

Exit status: 0 all checks pass, 1 a check fails, 2 usage error.

CHECK_PLAIN=1 prints the same text on every run: no colour, no timings, no
notice about MAX's kernel cache (devtools/book_outputs.py puts it in the book).
"""

# This module is the command line only; the checker's interface is
# tests/checker/__init__.py.

from __future__ import annotations

import sys
from pathlib import Path

from common import max_runtime, steps
from common.cli import ArgumentParser, UsageError, exit_status
from common.steps import display_path

from .checker import CheckProcess, check_all, check_step


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m tests.check", description=__doc__.splitlines()[0])
    parser.add_argument("step", help="step number (9, 09, s09) or 'all'")
    parser.add_argument(
        "--solutions", action="store_true", help="check solutions/ instead of steps/"
    )
    parser.add_argument("--file", type=Path, help="check this file instead (for tests and tools)")
    parser.add_argument(
        "--rerun",
        action="store_true",
        help="with 'all': run every step's checks, even those unchanged since they passed",
    )
    max_runtime.prepare()
    worker = CheckProcess()

    def run() -> int:
        args = parser.parse_args(argv)
        everything = args.step.strip().lower() == "all"
        if not everything:
            number = steps.parse_step(args.step, also="'all'")
            path = args.file.resolve() if args.file else steps.step(number).file(args.solutions)
            if not path.is_file():
                raise UsageError(f"{display_path(path)} does not exist.")
        if everything:  # its workers start on their first step, if any must run
            return 0 if check_all(args.solutions, worker, rerun=args.rerun) else 1
        if args.rerun:
            raise UsageError("--rerun goes with 'all': a single step's check always runs.")
        worker.start()  # imports MAX once, before the first step's header
        return 0 if check_step(number, path, worker=worker) else 1

    try:
        return exit_status(run)
    finally:
        worker.stop()


if __name__ == "__main__":
    sys.exit(main())
