"""Step 09's figure: splitting the features into heads and merging them back."""

from __future__ import annotations

import numpy as np

from common.svg import (
    HEAD_FILLS,
    MONO,
    MUTED,
    bracket,
    document,
    line,
    polyline,
    rect,
    text,
)
from tests import reference_gpt2 as ref


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
