"""Generate the book's figures as plain SVG: `python -m tools.figures`.

No plotting library: each figure is a few rectangles, lines and labels written
from string templates. The numbers in the figures come from the NumPy reference
(tests/reference.py), so a figure shows what the checkers test.

The output is deterministic (no dates, fixed number formatting), and
tests/test_book.py regenerates the figures and compares them byte for byte with
the copies committed under docs/src/figures.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from html import escape
from pathlib import Path

import numpy as np

from tests import reference as ref

REPO = Path(__file__).resolve().parents[1]
FIGURES_DIR = REPO / "docs" / "src" / "figures"

SANS = "Helvetica, Arial, sans-serif"
MONO = "ui-monospace, Menlo, Consolas, monospace"

INK = "#222222"
MUTED = "#666666"
GRID = "#555555"
ALLOWED = "#cdebc5"  # a score that is kept
MASKED = "#e9e9e9"  # a score set to -inf
MASKED_INK = "#9a1b1b"
HEAD_FILLS = ["#cfe2f3", "#fde0c5", "#d9ead3", "#ead1dc"]


# -- SVG building blocks --------------------------------------------------------


def num(value: float) -> str:
    """A coordinate, printed the same way on every machine."""
    rounded = round(float(value), 2)
    if rounded == int(rounded):
        return str(int(rounded))
    return f"{rounded:.2f}".rstrip("0")


def rect(x: float, y: float, w: float, h: float, fill: str, stroke: str = GRID) -> str:
    return (
        f'<rect x="{num(x)}" y="{num(y)}" width="{num(w)}" height="{num(h)}" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="1"/>'
    )


def text(
    x: float,
    y: float,
    content: str,
    *,
    size: float = 13,
    anchor: str = "middle",
    font: str = SANS,
    fill: str = INK,
    weight: str = "normal",
) -> str:
    return (
        f'<text x="{num(x)}" y="{num(y)}" font-family="{font}" '
        f'font-size="{num(size)}" text-anchor="{anchor}" fill="{fill}" '
        f'font-weight="{weight}" dominant-baseline="central">{escape(content)}</text>'
    )


def line(x1: float, y1: float, x2: float, y2: float, *, arrow: bool = False) -> str:
    marker = ' marker-end="url(#arrow)"' if arrow else ""
    return (
        f'<line x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}" '
        f'stroke="{INK}" stroke-width="1.5"{marker}/>'
    )


def polyline(points: list[tuple[float, float]], *, arrow: bool = False) -> str:
    marker = ' marker-end="url(#arrow)"' if arrow else ""
    coords = " ".join(f"{num(x)},{num(y)}" for x, y in points)
    return f'<polyline points="{coords}" fill="none" stroke="{INK}" stroke-width="1.5"{marker}/>'


def bracket(x1: float, x2: float, y: float, label: str) -> list[str]:
    """A horizontal brace-like bracket above [x1, x2] with a label over it."""
    return [
        polyline([(x1, y + 5), (x1, y), (x2, y), (x2, y + 5)]),
        text((x1 + x2) / 2, y - 10, label, size=12, fill=MUTED),
    ]


def document(width: float, height: float, title: str, body: list[str]) -> str:
    """A standalone SVG with a white card behind it (readable on dark themes)."""
    head = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{num(width)}" '
        f'height="{num(height)}" viewBox="0 0 {num(width)} {num(height)}" '
        f'role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        "<defs>",
        '<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">',
        f'<path d="M 0 0 L 10 5 L 0 10 z" fill="{INK}"/>',
        "</marker>",
        "</defs>",
        f'<rect x="0" y="0" width="{num(width)}" height="{num(height)}" rx="8" fill="#ffffff"/>',
    ]
    return "\n".join([*head, *body, "</svg>"]) + "\n"


# -- Step 02: the causal mask --------------------------------------------------


def mask_panel(
    x0: float, y0: float, sequence_length: int, num_tokens: int, cell: float
) -> list[str]:
    """One mask grid from the reference, with row and column labels."""
    mask = ref.causal_mask(sequence_length, num_tokens)
    rows, cols = mask.shape
    out = [
        text(
            x0 + cols * cell / 2,
            y0 - 62,
            f"causal_mask({sequence_length}, {num_tokens}) \u2192 shape [{rows}, {cols}]",
            size=14,
            font=MONO,
            weight="bold",
        )
    ]
    if num_tokens:
        out += bracket(x0, x0 + num_tokens * cell, y0 - 30, "cached tokens")
        out += bracket(x0 + num_tokens * cell, x0 + cols * cell, y0 - 30, "new tokens")
    for j in range(cols):
        out.append(text(x0 + (j + 0.5) * cell, y0 - 12, str(j), size=12, fill=MUTED))
    for i in range(rows):
        label = f"i={i}" if not num_tokens else f"i={i} (pos {num_tokens + i})"
        out.append(text(x0 - 8, y0 + (i + 0.5) * cell, label, size=12, anchor="end", fill=MUTED))
        for j in range(cols):
            allowed = bool(np.isfinite(mask[i, j]))
            x, y = x0 + j * cell, y0 + i * cell
            out.append(rect(x, y, cell, cell, ALLOWED if allowed else MASKED))
            out.append(
                text(
                    x + cell / 2,
                    y + cell / 2,
                    "0" if allowed else "\u2212\u221e",
                    size=14,
                    font=MONO,
                    fill=INK if allowed else MASKED_INK,
                )
            )
    return out


def causal_mask_svg() -> str:
    cell = 40
    left = (100, 110, 5, 0)  # x0, y0, sequence_length, num_tokens
    right = (520, 110, 3, 4)
    width, height = 840, 400
    body: list[str] = [
        text(
            width / 2,
            24,
            "Row i is a query, column j a key: 0 keeps the score, \u2212\u221e drops it",
            size=15,
            weight="bold",
        )
    ]
    for x0, y0, sequence_length, num_tokens in (left, right):
        body += mask_panel(x0, y0, sequence_length, num_tokens, cell)
    # Axis captions under each grid.
    body.append(text(left[0] + 5 * cell / 2, left[1] + 5 * cell + 20, "key position j"))
    body.append(text(right[0] + 7 * cell / 2, right[1] + 3 * cell + 20, "key position j"))
    body.append(
        text(
            right[0] + 7 * cell / 2,
            right[1] + 3 * cell + 44,
            "row i may see columns j \u2264 num_tokens + i",
            size=12,
            fill=MUTED,
        )
    )
    # Legend.
    legend_y = height - 40
    body.append(rect(100, legend_y - 10, 20, 20, ALLOWED))
    body.append(text(128, legend_y, "0: attention allowed", anchor="start"))
    body.append(rect(300, legend_y - 10, 20, 20, MASKED))
    body.append(
        text(
            328,
            legend_y,
            "\u2212\u221e: masked, softmax weight exactly 0",
            anchor="start",
        )
    )
    return document(width, height, "Causal masks without and with cached tokens", body)


# -- Step 09: splitting and merging heads -------------------------------------


def head_grid(
    x0: float,
    y0: float,
    labels: np.ndarray,
    cell: float,
    n_embd: int,
    head_dim: int,
    *,
    row_labels: bool = True,
) -> list[str]:
    """A [rows, cols] grid of feature labels (token * n_embd + feature)."""
    out = []
    for r, row in enumerate(labels):
        if row_labels:
            token = int(row[0]) // n_embd
            out.append(text(x0 - 8, y0 + (r + 0.5) * cell, f"t{token}", size=12, anchor="end"))
        for c, value in enumerate(row):
            feature = int(value) % n_embd
            x, y = x0 + c * cell, y0 + r * cell
            out.append(rect(x, y, cell, cell, HEAD_FILLS[feature // head_dim]))
            out.append(text(x + cell / 2, y + cell / 2, str(feature), font=MONO))
    return out


def heads_split_merge_svg() -> str:
    batch, seq, n_embd, n_head = 1, 4, 6, 2
    head_dim = n_embd // n_head
    # Label every element by where it started: token * n_embd + feature. The
    # reference's split/merge then show exactly where each element goes.
    x = np.arange(batch * seq * n_embd).reshape(batch, seq, n_embd)
    reshaped = x.reshape(batch, seq, n_head, head_dim)
    split = ref.split_heads(x, n_head)
    merged = ref.merge_heads(split)
    assert np.array_equal(merged, x), "merge_heads must undo split_heads"

    cell, gap = 36, 12
    width, height = 1000, 610
    top = 190
    x1 = 80  # panel 1: [batch, seq, n_embd]
    x2 = x1 + n_embd * cell + 130  # panel 2: [batch, seq, heads, head_dim]
    x3 = x2 + n_embd * cell + gap + 150  # panel 3: [batch, heads, seq, head_dim]
    body: list[str] = [
        text(
            width / 2,
            24,
            "_split_heads and _merge_heads move numbers, never change them",
            size=15,
            weight="bold",
        ),
        text(
            width / 2,
            48,
            f"example: seq = {seq}, n_embd = {n_embd}, n_head = {n_head}, "
            f"head_dim = {head_dim}   (GPT-2 124M: n_embd = 768 = 12 heads \u00d7 64)",
            size=12,
            fill=MUTED,
        ),
        text(
            width / 2,
            66,
            "cells show the feature index, rows the token; the batch axis rides along",
            size=12,
            fill=MUTED,
        ),
    ]

    def caption(x: float, width_: float, shape: str, concrete: str) -> None:
        body.append(text(x + width_ / 2, top - 52, shape, size=13, font=MONO))
        body.append(text(x + width_ / 2, top - 34, concrete, size=12, fill=MUTED))

    # Panel 1: the projection output, one row per token.
    caption(x1, n_embd * cell, "[batch, seq, n_embd]", f"[{batch}, {seq}, {n_embd}]")
    body += head_grid(x1, top, x[0], cell, n_embd, head_dim)

    # Panel 2: the same rows, the feature axis cut into heads.
    panel2_width = n_embd * cell + gap
    caption(
        x2,
        panel2_width,
        "[batch, seq, heads, head_dim]",
        f"[{batch}, {seq}, {n_head}, {head_dim}]",
    )
    for h in range(n_head):
        hx = x2 + h * (head_dim * cell + gap)
        body.append(text(hx + head_dim * cell / 2, top - 12, f"head {h}", size=12))
        body += head_grid(hx, top, reshaped[0, :, h, :], cell, n_embd, head_dim, row_labels=h == 0)

    # Panel 3: heads in front of the sequence, one [seq, head_dim] matrix each.
    caption(
        x3,
        head_dim * cell,
        "[batch, heads, seq, head_dim]",
        f"[{batch}, {n_head}, {seq}, {head_dim}]",
    )
    block = seq * cell + 28
    for h in range(n_head):
        hy = top + h * block
        body.append(
            text(
                x3 + head_dim * cell + 10,
                hy + seq * cell / 2,
                f"head {h}",
                anchor="start",
            )
        )
        body += head_grid(x3, hy, split[0, h], cell, n_embd, head_dim)

    # Arrows: split along the top, merge along the bottom.
    mid = top + seq * cell / 2
    for start, end, label in (
        (x1 + n_embd * cell + 12, x2 - 34, "reshape"),
        (x2 + panel2_width + 12, x3 - 34, "transpose(1, 2)"),
    ):
        body.append(line(start, mid, end, mid, arrow=True))
        body.append(text((start + end) / 2, mid - 14, label, size=12, font=MONO))
    body += bracket(x1, x3 + head_dim * cell, top - 78, "_split_heads")

    bottom = top + n_head * block + 20
    body.append(
        polyline(
            [
                (x3 + head_dim * cell / 2, top + n_head * block - 22),
                (x3 + head_dim * cell / 2, bottom),
                (x1 + n_embd * cell / 2, bottom),
                (x1 + n_embd * cell / 2, top + seq * cell + 8),
            ],
            arrow=True,
        )
    )
    body.append(
        text(
            (x1 + x3 + head_dim * cell) / 2,
            bottom + 20,
            "_merge_heads: transpose(1, 2), then reshape to [batch, seq, n_embd]",
            size=12,
            font=MONO,
        )
    )
    return document(width, height, "Splitting hidden states into heads and back", body)


# -- entry point ----------------------------------------------------------------

FIGURES: dict[str, Callable[[], str]] = {
    "causal_mask.svg": causal_mask_svg,
    "heads_split_merge.svg": heads_split_merge_svg,
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.figures", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=FIGURES_DIR,
        help="output folder (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    for path in write_figures(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
