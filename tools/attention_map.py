"""Draw what every attention head of one layer looks at, as an SVG of heat maps:
`python -m tools.attention_map --weights DIR --prompt "..." --layer N --out FILE.svg`.

The weights come from a GPT-2 checkpoint directory (config.json,
model.safetensors and tokenizer.json or vocab.json + merges.txt, as
`save_pretrained` writes them; common/checkpoint.py checks and reads it), loaded
into the model of step 13 (solutions/). The embeddings and the blocks below
layer N run as they do in the model; in block N the attention is recomputed
step by step with MAX operations (ln_1, c_attn, split heads, softmax of
q k^T / sqrt(d) plus the causal mask) so that the weights themselves, which the
model never returns, can be read out. Each panel is one head: row i is the
query token, column j the key token, and every row sums to 1.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from html import escape
from pathlib import Path

import numpy as np

from common import checkpoint, max_runtime
from common.cli import ArgumentParser, Failure, UsageError, exit_status
from common.svg import INK, MASKED, MONO, MUTED, SANS, document, num, text

# A sequential white-to-blue scale: weight 0 is white, weight 1 dark blue.
SCALE = [
    (0.0, (255, 255, 255)),
    (0.35, (158, 202, 225)),
    (0.7, (49, 130, 189)),
    (1.0, (8, 48, 107)),
]
LABEL_CHARS = 12  # longer token labels are cut with an ellipsis


# -- loading -------------------------------------------------------------------


def load_model(directory: Path):
    """The step 13 model with the checkpoint's weights."""
    from solutions.solution_15 import CheckpointError, load_pretrained

    try:
        model = load_pretrained(directory)
    except CheckpointError as error:
        raise Failure(f"cannot use the checkpoint in {directory}: {error}") from None
    return model


# -- the attention weights ------------------------------------------------------


def attention_weights(model, token_ids: Sequence[int], layer: int) -> np.ndarray:
    """The attention weights of every head of block `layer`: [n_head, seq, seq].

    Row i of head h holds the softmax over the key positions 0..i that query
    position i computes; entries above the diagonal are exactly 0.
    """
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import Tensor

    from solutions.solution_02 import causal_mask

    transformer = model.transformer
    if not 0 <= layer < len(transformer.h):
        raise ValueError(f"layer {layer} is not in 0..{len(transformer.h) - 1}")
    seq = len(token_ids)
    input_ids = Tensor(np.asarray([list(token_ids)], dtype=np.int64))
    positions = Tensor.arange(seq, dtype=DType.int64, device=input_ids.device)
    hidden_states = transformer.wte(input_ids) + transformer.wpe(positions)
    for index in range(layer):  # the residual stream as block `layer` reads it
        hidden_states = transformer.h[index](hidden_states)

    block = transformer.h[layer]
    attn = block.attn
    heads, head_dim = attn.num_heads, attn.head_dim
    query, key, _ = F.split(attn.c_attn(block.ln_1(hidden_states)), [attn.embed_dim] * 3, axis=-1)
    # [1, seq, n_embd] -> [1, seq, heads, head_dim] -> [1, heads, seq, head_dim]
    query = query.reshape([1, seq, heads, head_dim]).transpose(1, 2)
    key = key.reshape([1, seq, heads, head_dim]).transpose(1, 2)
    scores = query @ key.transpose(-1, -2) / math.sqrt(head_dim)
    scores = scores + causal_mask(seq, 0, dtype=scores.dtype, device=scores.device)
    weights = F.softmax(scores, axis=-1)
    return np.asarray(weights.to_numpy(), dtype=np.float64)[0]


# -- drawing --------------------------------------------------------------------


def token_label(piece: str) -> str:
    """A token's text made visible: spaces as ␣, line breaks as ⏎."""
    shown = piece.replace(" ", "\u2423").replace("\n", "\u23ce").replace("\t", "\u21e5")
    shown = shown or "\u2205"
    return shown if len(shown) <= LABEL_CHARS else shown[: LABEL_CHARS - 1] + "\u2026"


def color(weight: float) -> str:
    weight = min(max(float(weight), 0.0), 1.0)
    for (low, low_rgb), (high, high_rgb) in zip(SCALE, SCALE[1:], strict=False):
        if weight <= high:
            t = (weight - low) / (high - low)
            rgb = [round(a + (b - a) * t) for a, b in zip(low_rgb, high_rgb, strict=True)]
            return "#{:02x}{:02x}{:02x}".format(*rgb)
    return "#{:02x}{:02x}{:02x}".format(*SCALE[-1][1])


def cell(x: float, y: float, size: float, fill: str, tooltip: str) -> str:
    return (
        f'<rect x="{num(x)}" y="{num(y)}" width="{num(size)}" height="{num(size)}" '
        f'fill="{fill}"><title>{escape(tooltip)}</title></rect>'
    )


def rotated_label(x: float, y: float, content: str, size: float) -> str:
    """A column label reading upwards from (x, y)."""
    return (
        f'<text x="{num(x)}" y="{num(y)}" font-family="{MONO}" font-size="{num(size)}" '
        f'text-anchor="start" fill="{INK}" dominant-baseline="central" '
        f'transform="rotate(-90 {num(x)} {num(y)})">{escape(content)}</text>'
    )


def heatmap_svg(weights: np.ndarray, labels: Sequence[str], *, title: str, subtitle: str) -> str:
    """A grid of heat maps, one panel per head, tokens on both axes."""
    heads, seq, _ = weights.shape
    size = min(24.0, max(4.0, 240.0 / seq))  # one cell
    font = min(11.0, size * 0.75)
    show_labels = size >= 8
    label_space = (max(len(label) for label in labels) * font * 0.62 + 8) if show_labels else 0
    side = seq * size
    cols = min(heads, 4)
    rows = math.ceil(heads / cols)
    panel_w, panel_h = label_space + side, label_space + 22 + side
    gap, margin, header = 28, 24, 70
    width = max(2 * margin + cols * panel_w + (cols - 1) * gap, 560)
    height = header + rows * panel_h + (rows - 1) * gap + 80

    body = [
        text(width / 2, 24, title, size=15, weight="bold"),
        text(width / 2, 46, subtitle, size=12, fill=MUTED),
    ]
    for head in range(heads):
        x0 = margin + (head % cols) * (panel_w + gap) + label_space
        y0 = header + (head // cols) * (panel_h + gap) + 22 + label_space
        panel = [f'<g class="head" data-head="{head}" shape-rendering="crispEdges">']
        panel.append(text(x0 + side / 2, y0 - label_space - 12, f"head {head}", size=13))
        for i in range(seq):
            if show_labels:
                panel.append(
                    text(
                        x0 - 4, y0 + (i + 0.5) * size, labels[i], size=font, anchor="end", font=MONO
                    )
                )
                panel.append(rotated_label(x0 + (i + 0.5) * size, y0 - 4, labels[i], font))
            for j in range(seq):
                if j > i:
                    fill, tip = MASKED, f"{labels[i]} \u2192 {labels[j]}: masked (future)"
                else:
                    w = weights[head, i, j]
                    fill, tip = color(w), f"{labels[i]} \u2192 {labels[j]}: {w:.3f}"
                panel.append(cell(x0 + j * size, y0 + i * size, size, fill, tip))
        panel.append(
            f'<rect x="{num(x0)}" y="{num(y0)}" width="{num(side)}" height="{num(side)}" '
            f'fill="none" stroke="{MUTED}" stroke-width="1"/>'
        )
        panel.append("</g>")
        body += panel

    # Legend: the color scale from 0 to 1, and the masked cells.
    legend_y = height - 40
    steps, bar_w = 50, 200
    for k in range(steps):
        body.append(
            f'<rect x="{num(margin + k * bar_w / steps)}" y="{num(legend_y - 8)}" '
            f'width="{num(bar_w / steps + 0.5)}" height="16" fill="{color((k + 0.5) / steps)}"/>'
        )
    body.append(text(margin, legend_y + 20, "0", size=11, fill=MUTED))
    body.append(text(margin + bar_w, legend_y + 20, "1", size=11, fill=MUTED))
    body.append(text(margin + bar_w + 12, legend_y, "attention weight", size=12, anchor="start"))
    masked_x = margin + bar_w + 150
    body.append(
        f'<rect x="{num(masked_x)}" y="{num(legend_y - 8)}" width="16" height="16" '
        f'fill="{MASKED}" stroke="{MUTED}" stroke-width="1"/>'
    )
    body.append(
        text(masked_x + 24, legend_y, "masked: a future token", size=12, anchor="start", font=SANS)
    )
    return document(width, height, title, body)


# -- command line ----------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(
        prog="python -m tools.attention_map", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--weights",
        type=Path,
        required=True,
        help="checkpoint directory with config.json, model.safetensors and tokenizer.json "
        "(or vocab.json and merges.txt)",
    )
    parser.add_argument("--prompt", required=True, help="the text whose attention to draw")
    parser.add_argument("--layer", type=int, default=0, help="block to draw, from 0 (default 0)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("attention_map.svg"),
        help="SVG file to write (default %(default)s)",
    )
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> Path:
    if not args.prompt.strip():
        raise UsageError("--prompt is empty: give some text to look at.")
    with max_runtime.on_the_cpu():  # step 13's model, on the CPU also beside a GPU
        return draw(args, checkpoint.resolve(args.weights))


def draw(args: argparse.Namespace, directory: Path) -> Path:
    """The heat maps of `directory`'s model for args.prompt, written to args.out."""
    tokenizer = checkpoint.Tokenizer(directory)
    model = load_model(directory)
    config = model.config
    if not 0 <= args.layer < config.n_layer:
        raise UsageError(
            f"--layer {args.layer} does not exist: the model has {config.n_layer} layers, "
            f"0 to {config.n_layer - 1}."
        )
    token_ids = tokenizer.encode(args.prompt)
    if len(token_ids) > config.n_positions:
        raise UsageError(
            f"the prompt is {len(token_ids)} tokens; the model's context window is "
            f"{config.n_positions}."
        )
    if max(token_ids) >= config.vocab_size:
        raise Failure(
            f"the tokenizer produced id {max(token_ids)}, but the model's vocabulary has "
            f"{config.vocab_size} entries: the tokenizer does not belong to this model."
        )
    weights = attention_weights(model, token_ids, args.layer)
    labels = [token_label(tokenizer.decode([token_id])) for token_id in token_ids]
    svg = heatmap_svg(
        weights,
        labels,
        title=f"Attention weights of layer {args.layer}, {config.n_head} heads",
        subtitle=(
            f"{directory.resolve().name}: row = query token, column = key token; each row sums to 1"
        ),
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(svg, encoding="utf-8", newline="\n")
    return args.out


def main(argv: Sequence[str] | None = None) -> int:
    max_runtime.prepare()
    return exit_status(lambda: print(f"wrote {run(parse_args(argv))}"))


if __name__ == "__main__":
    sys.exit(main())
