"""The block types of ggml, as a GGUF file stores a weight: each row of a matrix is its
32-weight runs along the input, one block each.

- Q8_0 (34 bytes): a float16 scale d, 32 int8 values q; w = d * q.
- Q4_0 (18 bytes): a float16 scale d, 16 bytes of 4-bit levels (the low
  nibbles are weights 0-15, the high ones 16-31); w = d * (q - 8).
- Q4_1 (20 bytes): float16 d and m, the same 16 bytes; w = d * q + m.

The kernels also read plain float32 or bfloat16 rows as blocks of 32 (F32,
BF16), so that one decode kernel serves every kind of matrix.
"""

comptime BLOCK = 32  # weights a block
comptime HALF = BLOCK // 2
comptime Q8_0 = 0
comptime Q4_0 = 1
comptime Q4_1 = 2
# Plain rows of float32 or bfloat16 in the one-call decode (llama_decode.mojo),
# measured in blocks of 32 weights there: dots.mojo's dot_widening_streams reads them.
comptime F32 = 3
comptime BF16 = 4
comptime CLAIM_BYTES = 32768  # the blocks' bytes of the smallest claim


@always_inline
def block_bytes[kind: Int]() -> Int:
    comptime if kind == Q8_0:
        return 2 + BLOCK
    elif kind == Q4_0:
        return 2 + HALF
    elif kind == F32:
        return 4 * BLOCK
    elif kind == BF16:
        return 2 * BLOCK
    else:
        return 4 + HALF


@always_inline
def levels_at[kind: Int]() -> Int:
    """Where a Q8_0 or Q4 block's levels begin: after its scales (Q4_1's d and m, the others' d)."""
    return 4 if kind == Q4_1 else 2


@always_inline
def half_float[width: Int = 1](at: UnsafePointer[UInt8, _]) -> SIMD[DType.float32, width]:
    """The little-endian float16 at `at`, as float32, in each of `width`
    lanes (read straight into a register: no shuffle but the widening)."""
    return SIMD[DType.float16, width](at.bitcast[Float16]()[0]).cast[DType.float32]()


@always_inline
def block_scales[kind: Int](block: UnsafePointer[UInt8, _]) -> Tuple[Float32, Float32]:
    """(d, m): the block's scale, and what each weight has added (Q4_1's m; 0 for the others)."""
    var d = half_float(block)
    comptime if kind == Q4_1:
        return (d, half_float(block + 2))
    else:
        return (d, Float32(0))
