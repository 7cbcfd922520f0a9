"""Mutation testing of the checkers: `python -m devtools.mutate [NN ...]` (pixi run mutate).

A checker earns trust by failing on wrong code. For each step this makes every
small change a learner could plausibly get wrong in the code the learner
writes (the solution's lines that the skeleton leaves as `# TODO` blocks), one
change at a time, and runs the step's checker on each mutated copy in a
scratch folder (solutions/ and steps/ are never written). A mutant the
checker fails is killed; one it passes survives. Survivors that compute the
same thing as the solution on every valid input are listed, with the reason,
in tests/mutation_equivalents.toml; any other survivor fails the run.

Changes (operators.py): an arithmetic, comparison or boolean operator swapped,
an integer constant nudged by one, a float constant doubled or zeroed, the
sign of an index or axis flipped, a boolean flag flipped, a keyword argument
dropped, a call replaced by one of its arguments, two arguments (or the
operands of a non-commutative operator) swapped, a statement dropped.

    python -m devtools.mutate              every step (tens of minutes)
    python -m devtools.mutate 14 15        some steps
    python -m devtools.mutate --sample 3   3 mutants per step, always the same ones (the tests)
    python -m devtools.mutate --list 14    print the mutants, run nothing
    python -m devtools.mutate --times      each solution's slowest check (Step.typical)

Exit status: 0 no survivor outside the equivalents file, 1 otherwise, 2 usage error.

The modules: operators.py finds the learner's lines and makes the mutants,
running.py checks them in worker processes against the equivalents file, and
__main__.py is the command line.
"""
