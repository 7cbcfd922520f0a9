"""The checker and the project's tests.

For the learner: `check.py` (`python -m tests.check NN`) runs a step's
checks, declared in `specs/step_NN.py` (one file per step: its checks, their
hint ladders and the mistakes they must name) on the shared machinery in
`checker/`, against the NumPy reference in `reference.py`.

For maintainers: `test_*.py`, run by pytest; `fixtures.py` makes checkpoints
locally; `mistakes.py` applies a spec's named mistakes to its solution.

The checker imports `common` and `solutions` only.
"""
