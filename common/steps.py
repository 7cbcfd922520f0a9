"""One record per step: its number, title and every file that belongs to it.

Every tool asks this module where a step's skeleton, solution, spec (with its
hints and mistakes), page, book outputs and pixi task are, and what the step is called; the book's
headings, pixi's task descriptions and the README's table say the same titles
(tests/test_titles.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from common.cli import UsageError

REPO = Path(__file__).resolve().parents[1]

TITLES = {
    1: "Model configuration",
    2: "Causal masking",
    3: "Layer normalization",
    4: "Feed-forward network",
    5: "Token embeddings",
    6: "Position embeddings",
    7: "Query, key and value projections",
    8: "Attention with causal masking",
    9: "Multi-head attention",
    10: "Residual connections and pre-norm",
    11: "The transformer block",
    12: "Stacking blocks into GPT2Model",
    13: "The language-model head",
    14: "Generating text",
    15: "Loading pretrained weights",
    16: "Compiling the model",
    17: "A KV cache",
    18: "Serving GPT-2 with max serve",
    # Part II: from GPT-2 to the models people run today.
    19: "Rotary position embeddings",
    20: "RMSNorm and the SwiGLU MLP",
    21: "Grouped-query attention",
    22: "Sliding-window attention",
    23: "A Llama-style model",
    # Part III: where the attention story ends.
    24: "Multi-head latent attention",
    25: "The absorbed decode",
    26: "Attention's backward pass",
    # Part IV: the files people actually run.
    27: "Eight-bit blocks",
    28: "Four-bit blocks",
    29: "Reading a GGUF file",
    30: "Your first Mojo kernel",
}

# The steps whose learner writes Mojo: their skeleton and solution are .mojo
# files (a custom operation's body), built by common/mojo_file.py.
MOJO_STEPS = {30}


@dataclass(frozen=True)
class StepRecord:
    number: int
    title: str

    @property
    def id(self) -> str:
        """Two digits, as in every file name: "09"."""
        return f"{self.number:02d}"

    @property
    def suffix(self) -> str:
        """The learner's language, as a file extension: ".py", or ".mojo"."""
        return ".mojo" if self.number in MOJO_STEPS else ".py"

    @property
    def skeleton(self) -> Path:
        """The exercise the learner fills in."""
        return REPO / "steps" / f"step_{self.id}{self.suffix}"

    @property
    def solution(self) -> Path:
        return REPO / "solutions" / f"solution_{self.id}{self.suffix}"

    def file(self, solutions: bool = False) -> Path:
        return self.solution if solutions else self.skeleton

    @property
    def module(self) -> str:
        """The skeleton as an importable module (steps import earlier steps)."""
        return f"steps.step_{self.id}"

    @property
    def spec_module(self) -> str:
        """The step's checks."""
        return f"tests.specs.step_{self.id}"

    @property
    def spec(self) -> Path:
        """The spec's folder: its checks (__init__.py), hints and mistakes."""
        return REPO / "tests" / "specs" / f"step_{self.id}"

    @property
    def hints(self) -> Path:
        """Every hint of the step: its own ladder and each check's."""
        return self.spec / "hints.toml"

    @property
    def mistakes_module(self) -> str:
        """The mistakes the checks must name (tests/specs/step_NN/mistakes.py)."""
        return f"{self.spec_module}.mistakes"

    @property
    def try_it(self) -> list[Path]:
        """The page's experiments (steps/try_it/step_NN_*.py)."""
        return sorted((REPO / "steps" / "try_it").glob(f"step_{self.id}_*.py"))

    @property
    def page(self) -> Path:
        return REPO / "docs" / "src" / f"step_{self.id}.md"

    def output(self, kind: str) -> Path:
        """What the checker prints on the skeleton or the solution, in the book."""
        return REPO / "docs" / "src" / "outputs" / f"step_{self.id}-{kind}.txt"

    @property
    def task(self) -> str:
        """pixi's task that checks the step."""
        return f"s{self.id}"

    def check_command(self, flag: str = "") -> str:
        """The command that checks the step, as pixi users and pip users type it:
        "`pixi run s09` (pip: `python -m tests.check 09`)"."""
        # pixi's sNN tasks take no flags; its `check` task passes them on.
        pixi = f"pixi run check {self.id}{flag}" if flag else f"pixi run {self.task}"
        return both_ways(pixi, f"python -m tests.check {self.id}{flag}")


def both_ways(pixi: str, pip: str) -> str:
    """A command as pixi users and pip users type it: "`pixi ...` (pip: `python ...`)"."""
    return f"`{pixi}` (pip: `{pip}`)"


def check_all_command(flag: str = "") -> str:
    """The command that checks every step, both ways, with `flag` (" --rerun")."""
    return both_ways(f"pixi run check all{flag}", f"python -m tests.check all{flag}")


LEARN = "python -m tools.learn"  # the learner's commands, as pip users type them


def learn_command(*words: str) -> str:
    """One of the learner's commands, as pixi users and pip users type it:
    "`pixi run hint 09` (pip: `python -m tools.learn hint 09`)"."""
    said = " ".join(words)
    return both_ways(f"pixi run {said}", f"{LEARN} {said}")


STEPS = tuple(StepRecord(number, title) for number, title in TITLES.items())


def numbers() -> list[int]:
    return [record.number for record in STEPS]


def step(number: int) -> StepRecord:
    return next(record for record in STEPS if record.number == number)


def parse_step(text: str, *, also: str = "") -> int:
    """The step a learner means by "9", "09", "s09" or "step_09"; otherwise a
    UsageError listing the accepted forms (and `also`, what else the command
    takes, e.g. "'all'")."""
    match = re.fullmatch(r"s?(?:tep)?[_-]?0*(\d{1,2})", text.strip().lower())
    if not match or int(match.group(1)) not in TITLES:
        first, last = min(TITLES), max(TITLES)
        raise UsageError(
            f"unknown step {text!r}: steps are {first:02d}-{last:02d} (write 9, 09 or s09)"
            + (f", or {also}." if also else ".")
        )
    return int(match.group(1))


def display_path(path: Path | str) -> str:
    """`path` as the learner reads it: relative to the repository where it can be."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)
