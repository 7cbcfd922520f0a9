"""Step 03: layer normalization.

Layer normalization rescales every hidden vector to zero mean and unit variance
over its features, then applies a learned per-feature scale (``weight``) and
shift (``bias``). GPT-2 normalizes before each sublayer and once at the end, so
activations stay in a range where training is stable.
"""

from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.tensor import Tensor


class LayerNorm(Module[[Tensor], Tensor]):
    """Normalize the last axis, then scale by ``weight`` and shift by ``bias``."""

    def __init__(self, dim: int, *, eps: float = 1e-5) -> None:
        # Starting at weight=1, bias=0 makes the layer a plain normalization;
        # training (or a checkpoint) moves them from there.
        self.weight = Tensor.ones([dim])
        self.bias = Tensor.zeros([dim])
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        # (x - mean) / sqrt(var + eps) * weight + bias, over the last axis.
        return F.layer_norm(x, gamma=self.weight, beta=self.bias, epsilon=self.eps)
