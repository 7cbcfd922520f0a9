"""`python -m devtools.figures`: write the book's figures."""

from __future__ import annotations

import argparse
from pathlib import Path

from devtools.figures import FIGURES_DIR, write_figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.figures", description="Write the book's figures as SVG."
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
