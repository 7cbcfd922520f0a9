"""The mistakes step 30's checks must name: plausible learner edits of
solutions/solution_30.mojo, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate). Each one is
a Mojo file the compiler builds anew: about half a minute each."""

from tests.mistakes import m

VALUE = "return (n * blocks + b) * BLOCK + i"
SCALE = "return n * blocks + b"
X = "return m * n_in + b * BLOCK + i"
WIDEN = "var value = Float32(value_ptr[unsafe_offset=value_offset(n, b, i, blocks)])"
STORE = "out_ptr[unsafe_offset=m * n_out + n] = total"

MISTAKES = [
    m("one scale per row", SCALE, "return n * blocks", "first scale"),
    m("the scale forgotten", "total += scale * block_sum", "total += block_sum", "its scale"),
    m("every block reads x's first block", X, "return m * n_in + i", "first block's inputs"),
    m(
        "a block's offset counted in bytes of a row, not blocks",
        VALUE,
        "return n * blocks * BLOCK + b + i",
        "offsets within a row",
    ),
    m("the values' row stride forgotten", VALUE, "return (n + b) * BLOCK + i", "row's stride"),
    m("x's row stride as one block", X, "return m * BLOCK + b * BLOCK + i", "row stride"),
    m(
        "the loop over blocks stops one early",
        "for b in range(blocks):",
        "for b in range(blocks - 1):",
        "last block",
    ),
    m(
        "the loop over outputs stops one early",
        "for n in range(n_out):",
        "for n in range(n_out - 1):",
        "stops one early",
    ),
    m(
        "the loop over x's rows stops one early",
        "for m in range(rows):",
        "for m in range(rows - 1):",
        "x's rows stops one early",
    ),
    m(
        "the outputs stored transposed",
        STORE,
        "out_ptr[unsafe_offset=n * rows + m] = total",
        "transposed",
    ),
    m(
        "the int8 values not widened",
        WIDEN,
        "var value = value_ptr[unsafe_offset=value_offset(n, b, i, blocks)]",
        "compiler refused",
    ),
]
