"""Generate the book's figures as plain SVG: `python -m devtools.figures`.

No plotting library: each figure is a few rectangles, lines and labels written
from string templates. The numbers in the figures come from the NumPy reference
(tests/reference_gpt2.py), so a figure shows what the checkers test.

The output is deterministic (no dates, fixed number formatting), and
tests/test_book.py regenerates the figures and compares them byte for byte with
the copies committed under docs/src/figures.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from common.steps import REPO
from devtools.figures.heads import heads_split_merge_svg
from devtools.figures.mask import causal_mask_svg
from devtools.figures.residual import block_data_flow_svg, residual_pre_vs_post_svg

FIGURES_DIR = REPO / "docs" / "src" / "figures"


FIGURES: dict[str, Callable[[], str]] = {
    "causal_mask.svg": causal_mask_svg,
    "heads_split_merge.svg": heads_split_merge_svg,
    "residual_pre_vs_post.svg": residual_pre_vs_post_svg,
    "block_data_flow.svg": block_data_flow_svg,
}


def write_figures(out_dir: Path = FIGURES_DIR) -> list[Path]:
    """Write every figure into `out_dir`; return the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in FIGURES.items():
        path = out_dir / name
        path.write_text(make(), encoding="utf-8", newline="\n")
        written.append(path)
    return written
