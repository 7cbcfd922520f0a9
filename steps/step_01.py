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
    #   The page's table "The numbers" has them: the vocabulary size (BPE merges,
    #   byte tokens and one end-of-text token), the longest sequence, the width
    #   of a hidden state, the number of blocks and of heads per block. Counts
    #   and sizes are ints.
    vocab_size: int = None
    n_positions: int = None
    n_embd: int = None
    n_layer: int = None
    n_head: int = None
    # END TODO
    n_inner: int | None = None  # MLP width; None means 4 * n_embd
    # TODO: the layer norm epsilon GPT-2 was trained with, a float.
    #   The small number every layer norm adds to the variance (the same table).
    layer_norm_epsilon: float = None
    # END TODO

    def __post_init__(self) -> None:
        # TODO: an n_inner left as None becomes four times n_embd, an int.
        #   This config's own n_embd: GPT2Config(n_embd=64).n_inner is 256, and an
        #   n_inner the caller gave stays (the page's "Defaults that depend on
        #   other fields").
        if self.n_inner is None:
            self.n_inner = None
        # END TODO
