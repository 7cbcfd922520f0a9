"""Step 02's figure: the causal mask, as a grid of kept and masked scores."""

from __future__ import annotations

import numpy as np

from common.svg import (
    ALLOWED,
    INK,
    MASKED,
    MASKED_INK,
    MONO,
    MUTED,
    bracket,
    document,
    rect,
    text,
)
from tests import reference_gpt2 as ref


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
