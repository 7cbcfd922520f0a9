"""Our GPT-2 as a `max serve` architecture.

    max serve --custom-architectures gpt2_serving --model <checkpoint dir or hub id>

(run from the repository root; `python -m tools.serve` does it for you). MAX
imports this package and reads ARCHITECTURES: the architecture whose name is
the checkpoint's config.json `architectures[0]` (GPT2LMHeadModel) serves it.
"""

from .arch import gpt2_arch

ARCHITECTURES = [gpt2_arch]

__all__ = ["ARCHITECTURES", "gpt2_arch"]
