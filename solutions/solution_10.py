"""Step 10: residual connections and pre-norm.

Deep stacks train well when every sublayer only adds a correction to its input
instead of replacing it: out = x + sublayer(x). The input then flows through
the whole stack unchanged along the "residual stream", and each block reads
from it and writes back into it. GPT-2 normalizes what the sublayer reads
(pre-norm), but never the stream itself: out = x + sublayer(layer_norm(x)).
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
    return x + sublayer(norm(x))
