"""The learner's exercises: one file a step, `step_01.py` to the last step's.

Each is a skeleton: the imports, signatures and docstrings are there, and
every `# TODO` block leaves a line that still assigns or returns `None` for the
learner to write. `python -m tests.check NN` checks one; `python -m tools.learn
reset NN` restores it (the learner's version saved in .backups/ first).
`try_it/` holds the small experiments of each page's "Try it" section.

A step takes the pieces of earlier steps from `solutions`, so a mistake in one
step never blocks the next; nothing here imports the checker (`tests`).
"""
