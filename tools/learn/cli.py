"""Your way through the tutorial: progress, the next step, hints, a file watcher.

    python -m tools.learn status        every step: not started, in progress or done
    python -m tools.learn next          check the first step that does not pass yet
    python -m tools.learn watch [NN]    re-check a step each time you save its file
    python -m tools.learn hint NN       one more hint for a step (--solution: the answer)
    python -m tools.learn reset NN      back to the skeleton (your file is saved first)
    python -m tools.learn doctor        is this machine ready for the tutorial?
    python -m tools.learn warm          compile MAX's kernels once (about 5 minutes)

Exit status: 0 ok, 1 a check fails (or doctor found a problem), 2 usage error.
"""

# This module is the command line only (its docstring is --help's text); each
# command lives in its own module of this package.

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from common import max_runtime
from common.cli import ArgumentParser, exit_status
from common.steps import LEARN

from .doctor import cmd_doctor, cmd_warm
from .hints import cmd_hint
from .progress import cmd_next, cmd_status
from .reset import cmd_reset
from .watch import cmd_watch


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog=LEARN, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, run: Callable[[argparse.Namespace], int], text: str) -> ArgumentParser:
        sub = commands.add_parser(name, help=text, description=text)
        sub.set_defaults(run=run)
        return sub

    command("status", cmd_status, "every step: not started, in progress or done")
    command("next", cmd_next, "check the first step that does not pass yet")
    watch_parser = command("watch", cmd_watch, "re-check a step each time you save it")
    watch_parser.add_argument("step", nargs="?", help="step number (default: the first undone)")
    watch_parser.add_argument("--interval", type=float, default=0.5, help=argparse.SUPPRESS)
    watch_parser.add_argument(
        "--max-runs", type=int, metavar="N", help="stop after N checks (for scripts and tests)"
    )
    hint_parser = command("hint", cmd_hint, "one more hint for a step each time you ask")
    hint_parser.add_argument("step", help="step number (9, 09 or s09)")
    hint_parser.add_argument(
        "--solution", action="store_true", help="show the reference solution now"
    )
    reset_parser = command("reset", cmd_reset, "restore a step's skeleton (yours is saved first)")
    reset_parser.add_argument("step", help="step number (9, 09 or s09)")
    command("doctor", cmd_doctor, "check that this machine is ready for the tutorial")
    warm_parser = command("warm", cmd_warm, "compile MAX's kernels once, so checks take seconds")
    warm_parser.add_argument(
        "--check", action="store_true", help="only say whether it is needed (exit 1 if so)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    max_runtime.prepare()  # Ctrl-C becomes a KeyboardInterrupt, before MAX runs

    def run() -> int:
        args = build_parser().parse_args(argv)
        return args.run(args)

    return exit_status(run)


if __name__ == "__main__":
    sys.exit(main())
