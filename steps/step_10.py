"""Step 10: residual connections and pre-norm.

Goal: pre_norm_residual(x, norm, sublayer) returns x + sublayer(norm(x)): the
sublayer reads a normalized copy and adds its result to the untouched stream.

Run: pixi run s10    (or: python -m tests.check 10)
Stuck? Read docs/src/step_10.md (pixi run book).
"""

from collections.abc import Callable

from max.experimental.tensor import Tensor


def pre_norm_residual(
    x: Tensor,
    norm: Callable[[Tensor], Tensor],
    sublayer: Callable[[Tensor], Tensor],
) -> Tensor:
    """x + sublayer(norm(x)): the sublayer sees a normalized copy, the
    residual stream x is passed on untouched."""
    # TODO: the sublayer reads a normalized copy of x; what it returns is added
    #   to x itself. x, the copy, the sublayer's output and the result are all
    #   [batch, seq, n_embd]; nothing normalizes the result (the page's
    #   "Pre-norm and post-norm" draws the wiring).
    return None
    # END TODO
