"""Steps 10 and 11's figures: the residual stream, pre-norm against post-norm, and a block's data flow."""

from __future__ import annotations

from common.svg import (
    GRID,
    HEAD_FILLS,
    INK,
    MONO,
    MUTED,
    document,
    line,
    num,
    polyline,
    text,
)

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
    # Each sublayer leaves the stream at `start` and adds back in at its plus.
    sublayers = (
        (90, plus1, [(130, 100, "ln_1", "LayerNorm", NORM_FILL),
                     (270, 140, "attn", "mixes positions", ATTN_FILL)]),
        (510, plus2, [(550, 100, "ln_2", "LayerNorm", NORM_FILL),
                      (690, 100, "mlp", "each position", MLP_FILL)]),
    )  # fmt: skip
    for start, x_plus, boxes in sublayers:
        body += sublayer_branch(start, x_plus, y_stream, y_branch, boxes)
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
    # Per row: where it sits, its title and note, the plus where the branch
    # adds back, the branch's boxes, and a norm on the stream itself (x, width).
    rows = (
        (
            180,
            "pre-norm (GPT-2):  x + sublayer(norm(x))",
            "the norm is on the branch: the stream carries x itself, untouched",
            560,
            [(160, 110, "norm", "LayerNorm", NORM_FILL), (320, 150, "sublayer", "attn or mlp", ATTN_FILL)],
            None,
        ),
        (
            380,
            "post-norm (original Transformer):  norm(x + sublayer(x))",
            "the norm is on the stream: every block rescales everything that flows on",
            440,
            [(200, 150, "sublayer", "attn or mlp", ATTN_FILL)],
            (540, 110),
        ),
    )  # fmt: skip
    for y_stream, title, note, x_plus, boxes, stream_norm in rows:
        y_branch = y_stream - 72
        body.append(text(40, y_branch - 48, title, size=14, anchor="start", font=MONO))
        body.append(text(34, y_stream - 20, "x", size=15, font=MONO, weight="bold"))
        body.append(text(width - 40, y_stream - 20, "out", size=15, font=MONO, weight="bold"))
        body.append(text(width / 2, y_stream + 34, note, size=12, fill=MUTED))
        # The stream, broken where the plus and a norm on the stream sit.
        gaps = [(x_plus - PLUS_RADIUS - 2, x_plus + PLUS_RADIUS)]
        if stream_norm:
            gaps.append((stream_norm[0] - 2, sum(stream_norm)))
        left = 20
        for gap_start, gap_end in gaps:
            body.append(stream(left, gap_start, y_stream))
            left = gap_end
        body.append(stream(left, width - 20, y_stream))
        body += sublayer_branch(110, x_plus, y_stream, y_branch, boxes)
        if stream_norm:
            norm_x, norm_width = stream_norm
            body += box(norm_x, y_stream, norm_width, "norm", "LayerNorm", NORM_FILL)
        body += plus(x_plus, y_stream)
    return document(width, height, "Pre-norm and post-norm residual sublayers", body)
