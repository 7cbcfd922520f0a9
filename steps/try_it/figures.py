"""The experiments' figures: drawn under the cell in a notebook, saved as PNG
files when an experiment runs as a script, skipped without matplotlib.

matplotlib comes with the notebook extra (`pip install -e ".[notebook]"`). Every
experiment prints what it shows, so it runs without matplotlib too.
"""

import sys

from common.steps import REPO, display_path

# Where a script's figures go: beside the experiments, in a folder git ignores
# (.gitignore), so a run leaves git clean.
FOLDER = REPO / "steps" / "try_it" / "figures_out"


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel, which shows figures under the cell."""
    return "ipykernel" in sys.modules


def pyplot():
    """matplotlib.pyplot, or None (and a note saying so) without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        print('(no figure: matplotlib is not installed; pip install -e ".[notebook]" adds it)')
        return None
    if not in_notebook():
        matplotlib.use("Agg")  # draws into files only: a script never opens a window
    import matplotlib.pyplot as plt

    return plt


def show(figure, name: str) -> None:
    """Under the cell in a notebook; from a script, saved as FOLDER/name.png."""
    import matplotlib.pyplot as plt

    if in_notebook():
        from IPython.display import display

        display(figure)
    else:
        FOLDER.mkdir(exist_ok=True)
        path = FOLDER / f"{name}.png"
        figure.savefig(path, dpi=120, bbox_inches="tight")
        print(f"(figure saved as {display_path(path)})")
    plt.close(figure)  # shown once: the notebook does not draw it again at the cell's end


def attention_maps(maps, titles: list[str], tokens: list[str], columns: int = 4):
    """A figure of heat maps, one per [seq, seq] attention matrix: row i is
    what query token i gives each key token (0 white, 1 dark blue)."""
    import matplotlib.pyplot as plt

    columns = min(columns, len(maps))
    rows = -(-len(maps) // columns)  # ceiling division
    size = 1.2 + 0.3 * len(tokens)  # inches per panel: room for the token labels
    figure, axes = plt.subplots(
        rows, columns, figsize=(columns * size, rows * size), squeeze=False, layout="constrained"
    )
    for panel, weights, title in zip(axes.flat, maps, titles, strict=False):
        image = panel.imshow(weights, cmap="Blues", vmin=0, vmax=1)
        panel.set_title(title)
        panel.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=8)
        panel.set_yticks(range(len(tokens)), tokens, fontsize=8)
    for panel in axes.flat[len(maps) :]:
        panel.axis("off")
    figure.colorbar(image, ax=axes, label="attention weight")
    figure.supxlabel("key")
    figure.supylabel("query")
    return figure
