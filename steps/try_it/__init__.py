"""Small experiments for the book's "Try it" sections: `python -m steps.try_it.NAME`.

Each one runs on the reference solutions in seconds and prints what it shows;
tests/test_try_it.py runs them all, as scripts and as notebooks. They are
written in jupytext's percent format (`# %%` starts a cell, `# %% [markdown]`
a cell of prose), so Jupyter Lab with jupytext opens each file as a notebook:
`pip install -e ".[notebook]"`, then `PYTHONPATH=$PWD jupyter lab steps/try_it`
(or `pixi run -e notebook notebook`). figures.py draws their plots;
checkpoints.py finds a GPT-2 checkpoint for the ones that want trained weights.
"""
