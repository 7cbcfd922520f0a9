"""The pieces of `python -m tools.learn`, the learner's command (tools/learn.py).

basics      what every command uses: the checker, loaded on demand; paths and
            commands as the learner reads and types them; whole-file writes
skeletons   placeholders, and a step's untouched skeleton from git's history
progress    checks run in this process: `status` and `next`
watch       `watch`: re-check a step on every save
hints       `hint`: the step's own ladder and the failing check's, counted
            in .learn_state.json
reset       `reset`: back up the learner's file, restore the skeleton
doctor      `doctor` and `warm`: is this machine ready for the tutorial?
"""
