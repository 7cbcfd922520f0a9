"""Small experiments for the book's "Try it" sections: `python -m steps.try_it.NAME`.

Each one runs in seconds and prints what it shows, on the learner's step once
it passes its check, else on the reference solution (learner.py chooses, and
says which); tests/test_try_it.py runs them all, as scripts and as notebooks.
They are written in jupytext's percent format (`# %%` starts a cell,
`# %% [markdown]` a cell of prose), so Jupyter Lab with jupytext opens each
file as a notebook:
`pip install -e ".[notebook]"`, then `PYTHONPATH=$PWD jupyter lab steps/try_it`
(or `pixi run -e notebook notebook`). figures.py draws their plots;
checkpoints.py finds a GPT-2 checkpoint for the ones that want trained weights.
"""

from common import max_runtime

max_runtime.prepare()  # before MAX runs, as every entry point does

# The experiments run on the CPU, like the checks, also where MAX would make
# every new tensor on a GPU: the numbers they print are the CPU's, and a tensor
# made without a device then meets the ones made with `device=CPU()`. Entered
# once, when the package is imported, and never left (a notebook keeps it from
# cell to cell); held by a name, since collecting it would leave it.
ON_THE_CPU = max_runtime.on_the_cpu()
ON_THE_CPU.__enter__()
