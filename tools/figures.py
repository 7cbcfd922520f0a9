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


# -- Steps 10 and 11: residual connections ---------------------------------------

STREAM = "#3d6fb4"  # the residual stream
NORM_FILL = "#fff2cc"
ATTN_FILL = HEAD_FILLS[0]
MLP_FILL = HEAD_FILLS[2]
BOX_HEIGHT = 46
PLUS_RADIUS = 13


def stream_defs() -> str:
    """An arrowhead in the stream's colour (the document's own is black)."""
    return (
        '<defs><marker id="stream-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="5" markerHeight="5" orient="auto-start-reverse">'
        f'<path d="M 0 0 L 10 5 L 0 10 z" fill="{STREAM}"/></marker></defs>'
    )


def stream(x1: float, x2: float, y: float, *, arrow: bool = True) -> str:
    """A piece of the residual stream: a thick horizontal line."""
    marker = ' marker-end="url(#stream-arrow)"' if arrow else ""
    return (
        f'<line x1="{num(x1)}" y1="{num(y)}" x2="{num(x2)}" y2="{num(y)}" '
        f'stroke="{STREAM}" stroke-width="3.5"{marker}/>'
    )


def box(x: float, y_mid: float, width: float, label: str, note: str, fill: str) -> list[str]:
    """A rounded box with a code name and a plain-words note under it."""
    top = y_mid - BOX_HEIGHT / 2
    return [
        f'<rect x="{num(x)}" y="{num(top)}" width="{num(width)}" height="{BOX_HEIGHT}" '
        f'rx="6" fill="{fill}" stroke="{GRID}" stroke-width="1"/>',
        text(x + width / 2, y_mid - 8, label, size=14, font=MONO, weight="bold"),
        text(x + width / 2, y_mid + 11, note, size=11, fill=MUTED),
    ]


def plus(x: float, y: float) -> list[str]:
    return [
        f'<circle cx="{num(x)}" cy="{num(y)}" r="{PLUS_RADIUS}" fill="#ffffff" '
        f'stroke="{INK}" stroke-width="1.5"/>',
        text(x, y + 1, "+", size=20, weight="bold"),
    ]


def sublayer_branch(
    x_tap: float,
    x_plus: float,
    y_stream: float,
    y_branch: float,
    boxes: list[tuple[float, float, str, str, str]],
) -> list[str]:
    """Leave the stream at x_tap, run through `boxes` (x, width, label, note,
    fill) at height y_branch, and come back down into the + at x_plus."""
    out = [
        f'<circle cx="{num(x_tap)}" cy="{num(y_stream)}" r="4" fill="{STREAM}"/>',
        polyline([(x_tap, y_stream - 4), (x_tap, y_branch), (boxes[0][0], y_branch)], arrow=True),
    ]
    for (x, width, *_), (next_x, *_) in zip(boxes, boxes[1:], strict=False):
        out.append(line(x + width, y_branch, next_x, y_branch, arrow=True))
    last_x, last_width = boxes[-1][0], boxes[-1][1]
    out.append(
        polyline(
            [
                (last_x + last_width, y_branch),
                (x_plus, y_branch),
                (x_plus, y_stream - PLUS_RADIUS - 2),
            ],
            arrow=True,
        )
    )
    for x, width, label, note, fill in boxes:
        out += box(x, y_branch, width, label, note, fill)
    return out


def block_data_flow_svg() -> str:
    width, height = 940, 330
    y_stream, y_branch = 230, 130
    plus1, plus2 = 460, 840
    body: list[str] = [
        stream_defs(),
        text(
            width / 2,
            24,
            "GPT2Block: two pre-norm residual sublayers on the residual stream",
            size=15,
            weight="bold",
        ),
        text(
            width / 2,
            46,
            "every arrow carries a [batch, seq, n_embd] tensor; the sublayers only add to the stream",
            size=12,
            fill=MUTED,
        ),
        text(34, y_stream - 22, "x", size=15, font=MONO, weight="bold"),
        text(width - 36, y_stream - 22, "out", size=15, font=MONO, weight="bold"),
        stream(20, plus1 - PLUS_RADIUS - 2, y_stream),
        stream(plus1 + PLUS_RADIUS, plus2 - PLUS_RADIUS - 2, y_stream),
        stream(plus2 + PLUS_RADIUS, width - 18, y_stream),
    ]
    body += sublayer_branch(
        90,
        plus1,
        y_stream,
        y_branch,
        [
            (130, 100, "ln_1", "LayerNorm", NORM_FILL),
            (270, 140, "attn", "mixes positions", ATTN_FILL),
        ],
    )
    body += sublayer_branch(
        510,
        plus2,
        y_stream,
        y_branch,
        [
            (550, 100, "ln_2", "LayerNorm", NORM_FILL),
            (690, 100, "mlp", "each position", MLP_FILL),
        ],
    )
    body += plus(plus1, y_stream) + plus(plus2, y_stream)
    # The skip connections: the stream itself, labelled under each stretch.
    for x_mid, name, formula in (
        (plus1 / 2 + 10, "x", "h = x + attn(ln_1(x))"),
        ((plus1 + plus2) / 2 + 10, "h", "out = h + mlp(ln_2(h))"),
    ):
        body.append(
            text(x_mid, y_stream + 24, f"skip connection: {name} passes unchanged", size=12)
        )
        body.append(text(x_mid, y_stream + 46, formula, size=13, font=MONO))
    body.append(
        text(
            width / 2,
            height - 22,
            "the residual stream (blue) is never normalized inside the block; "
            "ln_f normalizes it once, after the last block",
            size=12,
            fill=MUTED,
        )
    )
    return document(width, height, "Data flow through one GPT-2 block", body)


def residual_pre_vs_post_svg() -> str:
    width, height = 820, 440
    body: list[str] = [
        stream_defs(),
        text(width / 2, 24, "Where the layer norm sits", size=15, weight="bold"),
    ]
    rows = (
        (
            180,
            "pre-norm (GPT-2):  x + sublayer(norm(x))",
            "the norm is on the branch: the stream carries x itself, untouched",
        ),
        (
            380,
            "post-norm (original Transformer):  norm(x + sublayer(x))",
            "the norm is on the stream: every block rescales everything that flows on",
        ),
    )
    for index, (y_stream, title, note) in enumerate(rows):
        y_branch = y_stream - 72
        body.append(text(40, y_branch - 48, title, size=14, anchor="start", font=MONO))
        body.append(text(34, y_stream - 20, "x", size=15, font=MONO, weight="bold"))
        body.append(text(width - 40, y_stream - 20, "out", size=15, font=MONO, weight="bold"))
        body.append(text(width / 2, y_stream + 34, note, size=12, fill=MUTED))
        if index == 0:
            x_plus = 560
            body += [
                stream(20, x_plus - PLUS_RADIUS - 2, y_stream),
                stream(x_plus + PLUS_RADIUS, width - 20, y_stream),
            ]
            body += sublayer_branch(
                110,
                x_plus,
                y_stream,
                y_branch,
                [
                    (160, 110, "norm", "LayerNorm", NORM_FILL),
                    (320, 150, "sublayer", "attn or mlp", ATTN_FILL),
                ],
            )
        else:
            x_plus, norm_x, norm_w = 440, 540, 110
            body += [
                stream(20, x_plus - PLUS_RADIUS - 2, y_stream),
                stream(x_plus + PLUS_RADIUS, norm_x - 2, y_stream),
                stream(norm_x + norm_w, width - 20, y_stream),
            ]
            body += sublayer_branch(
                110,
                x_plus,
                y_stream,
                y_branch,
                [(200, 150, "sublayer", "attn or mlp", ATTN_FILL)],
            )
            body += box(norm_x, y_stream, norm_w, "norm", "LayerNorm", NORM_FILL)
        body += plus(x_plus, y_stream)
    return document(width, height, "Pre-norm and post-norm residual sublayers", body)


# -- entry point ----------------------------------------------------------------

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
