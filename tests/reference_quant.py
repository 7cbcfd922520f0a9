"""An independent NumPy implementation of Part IV's block formats: ggml's
Q8_0, Q4_0 and Q4_1, written from ggml-quants.c's reference quantizers and
checked byte for byte against the `gguf` package's in
``tests/test_reference_quant.py``.

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


# --------------------------------------------------------------------------
# four bits: Q4_0 and Q4_1 (step 28)

Q4_0_BLOCK_BYTES = 2 + BLOCK // 2  # a float16 scale, then 16 bytes of two values each
Q4_1_BLOCK_BYTES = 2 + 2 + BLOCK // 2  # a float16 scale and minimum, then 16 bytes
NIBBLE_SHIFTS = np.array([0, 4], dtype=np.uint8)  # low nibbles first, then high


def pack_nibbles(levels: np.ndarray) -> np.ndarray:
    """Levels 0 ... 15, [..., 32], two to a byte as ggml packs them, [..., 16]:
    byte j holds value j in its low nibble and value j + 16 in its high one."""
    low, high = levels[..., : BLOCK // 2], levels[..., BLOCK // 2 :]
    return (low.astype(np.uint8) | (high.astype(np.uint8) << np.uint8(4))).astype(np.uint8)


def unpack_nibbles(packed: np.ndarray) -> np.ndarray:
    """[..., 16] bytes back to the block's 32 levels, [..., 32] uint8: the 16
    low nibbles (values 0 ... 15), then the 16 high ones (values 16 ... 31)."""
    halves = (packed[..., None, :] >> NIBBLE_SHIFTS[:, None]) & np.uint8(0x0F)
    return halves.reshape(*packed.shape[:-1], BLOCK)


def quantize_q4_0(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ggml's Q4_0: float16 scales [out, in // 32] and packed levels
    [out, in // 32, 16] uint8. The scale is the block's value of largest
    magnitude over -8 (signed: that value becomes level 0, i.e. -8); a weight
    is level round(w / d) + 8, clipped to 0 ... 15."""
    blocks = blocks_of(weight.astype(np.float32))
    largest = np.take_along_axis(blocks, np.abs(blocks).argmax(axis=-1)[..., None], axis=-1)
    scales = largest[..., 0] / -8
    inverse = np.divide(1.0, scales, out=np.zeros_like(scales), where=scales != 0)
    # ggml truncates after adding 8.5: rounding to the nearest, a tie upward.
    levels = np.trunc(blocks * inverse[..., None] + np.float32(8.5)).astype(np.uint8)
    return scales.astype(np.float16), pack_nibbles(np.minimum(levels, 15))


def dequantize_q4_0(scales: np.ndarray, packed: np.ndarray) -> np.ndarray:
    """Q4_0 blocks back to [out, in] float32: (level - 8) times the scale."""
    levels = unpack_nibbles(packed).astype(np.float32) - 8
    weight = levels * scales.astype(np.float32)[..., None]
    return weight.reshape(weight.shape[0], -1)


def quantize_q4_1(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ggml's Q4_1: float16 scales and minimums [out, in // 32] and packed
    levels [out, in // 32, 16] uint8. The block's 16 levels span its minimum
    to its maximum: scale (max - min) / 15, a weight is level
    round((w - min) / scale), and comes back as level * scale + min."""
    blocks = blocks_of(weight.astype(np.float32))
    minimums, maximums = blocks.min(axis=-1), blocks.max(axis=-1)
    scales = (maximums - minimums) / 15
    inverse = np.divide(1.0, scales, out=np.zeros_like(scales), where=scales != 0)
    shifted = (blocks - minimums[..., None]) * inverse[..., None]
    levels = np.trunc(shifted + np.float32(0.5)).astype(np.uint8)
    return scales.astype(np.float16), minimums.astype(np.float16), pack_nibbles(levels)


def dequantize_q4_1(scales: np.ndarray, minimums: np.ndarray, packed: np.ndarray) -> np.ndarray:
    """Q4_1 blocks back to [out, in] float32: level times scale, plus the minimum."""
    levels = unpack_nibbles(packed).astype(np.float32)
    weight = levels * scales.astype(np.float32)[..., None] + minimums.astype(np.float32)[..., None]
    return weight.reshape(weight.shape[0], -1)


def halves(data: np.ndarray, sizes: list[int], block_bytes: int) -> list[np.ndarray]:
    """A GGUF tensor's bytes [out, blocks * block_bytes] cut, block by block,
    into fields of `sizes` bytes (the rest is the packed levels)."""
    blocks = np.ascontiguousarray(data).reshape(data.shape[0], -1, block_bytes)
    cuts = np.cumsum(sizes)
    return [part.copy() for part in np.split(blocks, cuts, axis=-1)]


def q4_0_bytes(scales: np.ndarray, packed: np.ndarray) -> np.ndarray:
    """Q4_0 blocks as a GGUF file stores them: 2 bytes of scale, 16 of levels."""
    scale_bytes = scales.astype("<f2")[..., None].view(np.uint8)
    return np.concatenate([scale_bytes, packed], axis=-1).reshape(packed.shape[0], -1)


def q4_0_from_bytes(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scale_bytes, packed = halves(data, [2], Q4_0_BLOCK_BYTES)
    return scale_bytes.view("<f2")[..., 0].astype(np.float16), packed


def q4_1_bytes(scales: np.ndarray, minimums: np.ndarray, packed: np.ndarray) -> np.ndarray:
    """Q4_1 blocks as a GGUF file stores them: scale, minimum (2 bytes each), 16 of levels."""
    fields = [x.astype("<f2")[..., None].view(np.uint8) for x in (scales, minimums)]
    return np.concatenate([*fields, packed], axis=-1).reshape(packed.shape[0], -1)


def q4_1_from_bytes(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scale_bytes, minimum_bytes, packed = halves(data, [2, 2], Q4_1_BLOCK_BYTES)
    as_half = [x.view("<f2")[..., 0].astype(np.float16) for x in (scale_bytes, minimum_bytes)]
    return as_half[0], as_half[1], packed
