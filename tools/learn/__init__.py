"""`python -m tools.learn`, the learner's command: progress, the next step,
hints, a file watcher, reset and doctor. One module per idea:

cli         the command line (its docstring is --help's text); __main__ runs it
checker     the checker (tests/checker), loaded only when a command needs it
files       the learner's files: read, written whole, or missing
skeletons   placeholders, and a step's untouched skeleton from git's history
progress    checks run from this process: `status` and `next`
watch       `watch`: re-check a step on every save
hints       `hint`: the step's own ladder and the failing check's, counted
            in .learn_state.json
reset       `reset`: back up the learner's file, restore the skeleton
doctor      `doctor` and `warm`: is this machine ready for the tutorial?
"""

from .cli import main

__all__ = ["main"]
