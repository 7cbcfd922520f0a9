"""The reference solutions, one file a step: `solution_01.py` to the last step's.

For the learner who is stuck (each step's page folds its solution away, and
`python -m tools.learn hint NN --solution` shows it), and for every other room:
the skeletons in `steps` import the pieces of earlier steps from here, the
checker runs `python -m tests.check NN --solutions` against them, and the fast
model, the served architecture and the learner's commands build on them.

A solution differs from its skeleton only inside the `# TODO` blocks
(tests/test_skeletons.py). It imports earlier solutions, MAX, NumPy,
safetensors and the standard library: nothing from the other rooms.
"""
