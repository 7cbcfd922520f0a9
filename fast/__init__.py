"""A second, faster GPT-2: the tutorial's model with what makes decoding fast.

`gpt2.py` runs the same weights as solutions/ with a KV cache written in
place, bfloat16 weights on request, and on the CPU our own Mojo kernels
(`kernels/`) for one token's products; `kernel_ops.py` calls those kernels
from a graph; `bfloat16.py` rounds the weights to bfloat16 in NumPy;
`devices.py` turns `--device cpu` or `gpu` into a MAX device. It is not an
exercise: the learner meets it through `python -m tools.generate` and the
book's performance page; tests/test_fast.py holds it to the tutorial
model's logits.

It imports `solutions` and `common` only.
"""
