"""`hint`: one rung more of a ladder each time the learner asks.

Two kinds of ladder, both in the step's hints file (tests/specs/step_NN/hints.toml).
When a check fails with a ladder of its own, `hint` climbs that one: it answers
the mistake the learner made. Otherwise (placeholders left, a syntax error,
nothing failing) it climbs the step's own ladder, and once that is spent it
shows the reference solution, but only after the step passes unless asked with
--solution. How many rungs the learner has seen is kept in STATE_FILE.
"""

from __future__ import annotations

import argparse
import json
import sys

from common import steps
from common.cli import Failure
from common.steps import REPO, display_path, learn_command

from .checker import checker
from .files import read_source, step_missing, write_atomically
from .progress import passes, prepare_max, transient

STATE_FILE = REPO / ".learn_state.json"


# -- the state file: rungs shown so far ----------------------------------------


def load_state() -> dict:
    try:
        state = json.loads(STATE_FILE.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        print(f"(ignoring {display_path(STATE_FILE)}: it is not readable JSON)", file=sys.stderr)
        return {}
    return state if isinstance(state, dict) else {}


def save_state(state: dict) -> None:
    try:
        write_atomically(STATE_FILE, json.dumps(state, indent=2, sort_keys=True) + "\n")
    except OSError as error:  # a read-only checkout: the hint is shown all the same
        print(
            f"(could not save your hint count to {display_path(STATE_FILE)}: {error})",
            file=sys.stderr,
        )


def hint_counts(state: dict) -> dict:
    """{"NN": how many of step NN's hints were shown}, from the state file."""
    counts = state.get("hints_shown")
    return counts if isinstance(counts, dict) else {}


def hints_shown(state: dict, number: int) -> int:
    count = hint_counts(state).get(f"{number:02d}", 0)
    return count if isinstance(count, int) and count >= 0 else 0


def record_hints_shown(state: dict, number: int, count: int) -> None:
    state["hints_shown"] = {**hint_counts(state), f"{number:02d}": count}
    save_state(state)


def check_hint_counts(state: dict, number: int) -> dict:
    """{"check|topic": rungs shown} for step `number`, from the state file."""
    by_step = state.get("check_hints")
    counts = by_step.get(f"{number:02d}") if isinstance(by_step, dict) else None
    return counts if isinstance(counts, dict) else {}


def record_check_hints(state: dict, number: int, key: str, count: int) -> None:
    by_step = state.get("check_hints") if isinstance(state.get("check_hints"), dict) else {}
    by_step[f"{number:02d}"] = {**check_hint_counts(state, number), key: count}
    state["check_hints"] = by_step
    save_state(state)


# -- the step's own ladder -------------------------------------------------------


def load_hints(number: int) -> list[str]:
    """The step's own hint tiers (the [step] ladder of its hints file)."""
    path = steps.step(number).hints
    if not path.is_file():
        raise Failure(f"no hints for step {number:02d}: {display_path(path)} is missing.")
    return checker().step_ladder(number)


def print_hints(number: int, tiers: list[str], shown: int) -> None:
    report = checker().report
    print(
        report.bold(f"Step {number:02d}, {steps.step(number).title}: hint {shown} of {len(tiers)}")
    )
    for index, tier in enumerate(tiers[:shown], start=1):
        print(f"\n{report.bold(f'Hint {index}')}\n{tier}")


def print_solution(number: int) -> None:
    path = steps.step(number).solution
    print(checker().report.bold(f"The reference solution, {display_path(path)}:") + "\n")
    print(read_source(path).rstrip())


def show_next_hint(number: int, tiers: list[str], state: dict, shown: int) -> None:
    print_hints(number, tiers, shown + 1)
    record_hints_shown(state, number, shown + 1)
    more = "one more hint" if shown + 1 < len(tiers) else "the solution, once the step passes"
    print(f"\nStill stuck? {learn_command('hint', f'{number:02d}')} again shows {more}.")


def show_solution_if_passing(number: int, tiers: list[str]) -> None:
    print_hints(number, tiers, len(tiers))
    print()
    if passes(number):
        print(f"Step {number:02d} passes: compare your code with the reference.\n")
        print_solution(number)
        return
    print(
        f"That was the last hint. The solution is shown once step {number:02d} passes, "
        f"or now with {learn_command('hint', f'{number:02d}', '--solution')}."
    )


def show_step_hint(number: int) -> None:
    """The step's own ladder, one tier more each ask."""
    tiers = load_hints(number)
    state = load_state()
    shown = min(hints_shown(state, number), len(tiers))
    if shown < len(tiers):
        show_next_hint(number, tiers, state, shown)
    else:
        show_solution_if_passing(number, tiers)


# -- the ladder of the check that fails ------------------------------------------


def current_outcomes(number: int):  # -> list[tests.checker.Outcome]
    """The step's outcomes now: the last check's if the file is unchanged since,
    else from running the check (quietly)."""
    interface = checker()
    path = steps.step(number).skeleton
    outcomes = interface.last_result(number, path)
    if outcomes is None:
        prepare_max()
        transient(f"checking step {number:02d}…")
        passes(number)  # the check remembers its outcomes on the learner's file
        transient()
        outcomes = interface.last_result(number, path)
    return outcomes or []


def print_failure(number: int, failure) -> None:
    report = checker().report
    print(report.bold(f"Step {number:02d}, {steps.step(number).title}: the check that fails"))
    report.print_outcomes([failure])


def show_check_hint(number: int, failure, state: dict) -> None:
    """The next rung of the failing check's ladder, and the rungs before it."""
    report = checker().report
    key = f"{failure.name}|{failure.topic}"
    shown = check_hint_counts(state, number).get(key, 0)
    shown = min(shown if isinstance(shown, int) and shown >= 0 else 0, len(failure.ladder))
    now = min(shown + 1, len(failure.ladder))
    print_failure(number, failure)
    about = f" ({failure.topic})" if failure.topic else ""
    for index, rung in enumerate(failure.ladder[:now], start=1):
        heading = f"Hint {index} of {len(failure.ladder)} for this check{about}"
        print(f"\n{report.bold(heading)}\n{rung}")
    record_check_hints(state, number, key, now)
    again = learn_command("hint", f"{number:02d}")
    if now < len(failure.ladder):
        print(f"\nStill stuck? {again} again shows one more hint for this check.")
    else:
        print(
            f"\nThat was the last hint for this check. Fix it and run "
            f"{steps.step(number).check_command()}; the reference solution is shown once the "
            f"step passes, or now with {learn_command('hint', f'{number:02d}', '--solution')}."
        )


# -- the command ---------------------------------------------------------------


def cmd_hint(args: argparse.Namespace) -> int:
    number = steps.parse_step(args.step)
    if args.solution:
        print_solution(number)
        return 0
    if not steps.step(number).skeleton.is_file():
        raise step_missing(number)
    failure = next((o for o in current_outcomes(number) if o.status == "fail"), None)
    if failure is not None and failure.ladder:
        show_check_hint(number, failure, load_state())
        return 0
    if failure is not None:  # placeholders, a syntax error, an import: the step's ladder
        print_failure(number, failure)
        print()
    show_step_hint(number)
    return 0
