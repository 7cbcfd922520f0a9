# %% [markdown]
# # Step 23, try it: bfloat16 is the top half of a float32
#
# A few float32 numbers, their 32 bits, and the 16 bits bfloat16 keeps of
# them, rounded to the nearest; those 16 bits widened back to float32 with a
# 16-bit shift, as `read_safetensors` does, and what was lost; float16 beside
# it, which keeps more digits and far less range. Then a safetensors file
# written by hand, byte by byte, with one BF16 tensor, read back by
# `read_safetensors`.

# %%
import json
import struct
import tempfile
from pathlib import Path

import numpy as np

from steps.try_it.learner import learner_or_reference

code = learner_or_reference(23)  # yours once it passes its check, else the reference
read_safetensors = code.read_safetensors


# %%
def to_bfloat16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> the 16 bits of the nearest bfloat16 (ties to even), as uint16."""
    bits = x.astype(np.float32).view(np.uint32)
    rounding = 0x7FFF + ((bits >> 16) & 1)  # half of the dropped part, ties to an even result
    return ((bits + rounding) >> 16).astype(np.uint16)


def widen(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bits -> float32: the 16 bits on top, 16 zero bits below."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


# %%
values = np.array([1.0, -2.5, np.pi, 0.1, 1 / 3, 300.7, 1e-30, 1e30], np.float32)
bits = to_bfloat16_bits(values)
back = widen(bits)
print(
    f"{'float32':>13} {'its 32 bits':>11} {'bfloat16':>8} {'widened back':>14} {'error':>8}  float16"
)
for value, kept, wide in zip(values, bits, back, strict=True):
    error = abs(float(wide) - float(value)) / abs(float(value))
    with np.errstate(over="ignore"):
        half = np.float16(value)  # inf beyond 65504; 0 below about 6e-8
    print(
        f"{value:13.7g}   {int(value.view(np.uint32)):09_x}     {int(kept):04x} {wide:14.7g}"
        f" {error:8.2%}  {half:.7g}"
    )
print(
    f"widening is exact: narrowing again gives the same bits: {(to_bfloat16_bits(back) == bits).all()}"
)

# %% [markdown]
# The bits: 1 for the sign, 8 for the exponent (float32's own 8, so the
# same range), and 7 of float32's 23 for the digits. Every step of 2^-7
# between 1 and 2 is a bfloat16; nothing between them is.

# %%
near_one = widen(np.arange(0x3F80, 0x3F80 + 4, dtype=np.uint16))
print("the first bfloat16 numbers from 1.0:", near_one.tolist())
gap = near_one[1] - near_one[0]
print(f"bfloat16's precision near 1: {gap} = 2^{np.log2(gap):.0f}")
print(f"float32's, for comparison:    {np.spacing(np.float32(1.0))} = 2^-23")

# %% [markdown]
# A safetensors file by hand: the header's length as 8 bytes, little-endian;
# the header, JSON that names the tensor, its dtype, shape and the range of
# its bytes; then the bytes, two per bfloat16 number.

# %%
weights = np.array([[1.0, -2.5, np.pi], [0.1, 1 / 3, 300.7]], np.float32)
raw = to_bfloat16_bits(weights).tobytes()  # little-endian uint16s
header = json.dumps({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, len(raw)]}})
blob = struct.pack("<Q", len(header)) + header.encode() + raw
print(f"{len(blob)} bytes: 8 + {len(header)} of header + {len(raw)} of numbers")
print(f"header: {header}")
print(f"numbers: {raw.hex(' ', 2)}   (each pair of bytes is one bfloat16, low byte first)")
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "model.safetensors"
    path.write_bytes(blob)
    loaded = read_safetensors(path)
print(f"read_safetensors: w {loaded['w'].dtype} {list(loaded['w'].shape)}")
print(loaded["w"].tolist())
print(
    f"the widened numbers, exactly: {np.array_equal(loaded['w'], widen(to_bfloat16_bits(weights)))}"
)
