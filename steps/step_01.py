"""Step 01: the model configuration.

Goal: fill in GPT2Config with GPT-2 124M's hyperparameters, using Hugging
Face's field names so a checkpoint's config.json maps onto it.

Run: pixi run s01    (or: python -m tests.check 01)
Stuck? Read docs/src/step_01.md (pixi run book).
"""

from dataclasses import dataclass


@dataclass
class GPT2Config:
    """Hyperparameters of GPT-2; the defaults are the 124M model's."""

    # TODO: give each field GPT-2 124M's value as its default.
    #   vocab_size: 50,000 BPE merges + 256 byte tokens + 1 end-of-text token
    #   n_positions: the longest sequence, 1024 tokens
    #   n_embd: 768 features per hidden state; n_layer: 12 blocks; n_head: 12 heads
    #   layer_norm_epsilon: 1e-5 (a float, not an int)
    vocab_size: int = None
    n_positions: int = None
    n_embd: int = None
    n_layer: int = None
    n_head: int = None
    # END TODO
    n_inner: int | None = None  # MLP width; None means 4 * n_embd
    # TODO: the layer norm epsilon.
    layer_norm_epsilon: float = None
    # END TODO

    def __post_init__(self) -> None:
        # TODO: when n_inner was left as None, set it to four times n_embd.
        #   Hint: use self.n_embd, so GPT2Config(n_embd=64) gets 256.
        if self.n_inner is None:
            self.n_inner = None
        # END TODO
