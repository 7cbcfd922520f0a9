"""An independent NumPy implementation of Part IV's block formats: ggml's
Q8_0, written from ggml-quants.c's reference quantizer and checked byte for
byte against the `gguf` package's in ``tests/test_reference_quant.py``.

A weight is a Linear's, [out, in]; blocks of 32 run along the input axis, as
in a GGUF file, whose innermost dimension is a row's inputs. As in the other
references, keyword arguments with defaults reproduce a learner's likely
mistake so that a checker can name it; the defaults are ggml's behaviour.
"""

from __future__ import annotations

import numpy as np

BLOCK = 32
Q8_LEVELS = 127
Q8_BLOCK_BYTES = 2 + BLOCK  # a float16 scale, then 32 int8 values


def blocks_of(weight: np.ndarray) -> np.ndarray:
    """[out, in] as [out, in // 32, 32]: each row cut into runs of 32 inputs."""
    out_dim, in_dim = weight.shape
    return weight.reshape(out_dim, in_dim // BLOCK, BLOCK)


def round_half_away(x: np.ndarray) -> np.ndarray:
    """C's roundf, which ggml uses: a tie goes away from zero (NumPy's round
    sends it to the even neighbour). Only an exact tie tells them apart.
    Exact in floating point: the fraction and its double are computed exactly."""
    magnitude = np.abs(x)
    whole = np.floor(magnitude)
    return np.sign(x) * (whole + np.floor(2 * (magnitude - whole)))


def q8_0_scales(
    weight: np.ndarray, *, statistic: str = "max", levels: int = Q8_LEVELS
) -> np.ndarray:
    """The float32 step of each block, [out, in // 32]: its largest magnitude
    over 127. statistic "mean" (the mean magnitude) and "signed max" (the
    largest value, not magnitude), and levels 128, are mistakes."""
    blocks = blocks_of(weight.astype(np.float32))
    if statistic == "mean":
        return np.abs(blocks).mean(axis=-1) / levels
    if statistic == "signed max":
        return blocks.max(axis=-1) / levels
    return np.abs(blocks).max(axis=-1) / levels


def q8_0_values(weight: np.ndarray, scales: np.ndarray, *, rounding: str = "nearest") -> np.ndarray:
    """Each weight in steps of its block's scale, [out, in // 32, 32] int8.
    An all-zero block (scale 0) gives zeros. rounding "truncate", "floor" and
    "half to even" (NumPy's round), and float16 scales, are mistakes."""
    blocks = blocks_of(weight.astype(np.float32))
    # A float16 scale gives a float16 inverse, as it would in NumPy (a mistake).
    inverse = np.divide(1.0, scales, out=np.zeros_like(scales), where=scales != 0)
    steps = blocks * inverse.astype(np.float32)[..., None]
    whole = {
        "nearest": round_half_away,
        "half to even": np.round,
        "truncate": np.trunc,
        "floor": np.floor,
    }[rounding]
    return whole(steps).astype(np.int8)


def quantize_q8_0(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ggml's Q8_0: float16 scales [out, in // 32] and int8 values
    [out, in // 32, 32]; the values come from the float32 step, which is
    rounded to float16 only to be stored."""
    scales = q8_0_scales(weight)
    return scales.astype(np.float16), q8_0_values(weight, scales)


def dequantize_q8_0(scales: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Blocks back to [out, in] float32: each value times its block's scale."""
    out_dim, num_blocks, block = values.shape
    weight = values.astype(np.float32) * scales.astype(np.float32)[..., None]
    return weight.reshape(out_dim, num_blocks * block)


def q8_0_bytes(scales: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The blocks as a GGUF file stores them: per block, the scale's 2 bytes
    (little-endian float16) then the 32 values, [out, in // 32 * 34] uint8."""
    out_dim, num_blocks, _ = values.shape
    scale_bytes = scales.astype("<f2").reshape(out_dim, num_blocks, 1).view(np.uint8)
    blocks = np.concatenate([scale_bytes, values.view(np.uint8)], axis=-1)
    return blocks.reshape(out_dim, num_blocks * Q8_BLOCK_BYTES)


def q8_0_from_bytes(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A GGUF Q8_0 tensor's bytes [out, in // 32 * 34] as (scales, values)."""
    out_dim = data.shape[0]
    blocks = np.ascontiguousarray(data).reshape(out_dim, -1, Q8_BLOCK_BYTES)
    scales = blocks[..., :2].copy().view("<f2")[..., 0].astype(np.float16)
    values = blocks[..., 2:].copy().view(np.int8)
    return scales, values
