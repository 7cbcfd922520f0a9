"""SVG shapes written as text: a rectangle, a label, a line, a document.

The book's figures (devtools/figures) and the attention map (tools/attention_map)
draw with these, so both look alike and print the same bytes on every machine.
"""

from __future__ import annotations

from html import escape

SANS = "Helvetica, Arial, sans-serif"
MONO = "ui-monospace, Menlo, Consolas, monospace"

INK = "#222222"
MUTED = "#666666"
GRID = "#555555"
ALLOWED = "#cdebc5"  # a score that is kept
MASKED = "#e9e9e9"  # a score set to -inf
MASKED_INK = "#9a1b1b"
HEAD_FILLS = ["#cfe2f3", "#fde0c5", "#d9ead3", "#ead1dc"]


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
