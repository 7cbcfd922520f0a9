"""Step 01: the model configuration.

GPT-2 124M is described by a handful of numbers. We keep them in one dataclass
whose field names match Hugging Face's ``GPT2Config``, so that the published
``config.json`` of any GPT-2 checkpoint maps onto it field by field.
"""

from dataclasses import dataclass


@dataclass
class GPT2Config:
    """Hyperparameters of GPT-2; the defaults are the 124M model's."""

    vocab_size: int = 50257  # 50,000 BPE merges + 256 byte tokens + <|endoftext|>
    n_positions: int = 1024  # longest sequence the position table covers
    n_embd: int = 768  # width of every hidden state
    n_layer: int = 12  # transformer blocks stacked on top of each other
    n_head: int = 12  # attention heads per block; each is n_embd // n_head wide
    n_inner: int | None = None  # MLP width; None means 4 * n_embd
    layer_norm_epsilon: float = 1e-5  # added to the variance before the sqrt

    def __post_init__(self) -> None:
        # GPT-2 leaves n_inner unset and uses four times the hidden width.
        if self.n_inner is None:
            self.n_inner = 4 * self.n_embd
