"""The mistakes step 28's checks must name: plausible learner edits of
solutions/solution_28.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import m

PACK = "return levels[..., :HALF] | (levels[..., HALF:] << 4)"
Q4_0_SCALE = "scales = largest[..., 0] / -OFFSET"
Q4_0_LEVELS = "levels = np.minimum(np.trunc(steps + (OFFSET + 0.5)), 15)"
Q4_1_STEPS = "steps = (blocks - minimums[..., None]) * inverse_of(scales)[..., None]"
Q4_1_SCALE = "scales = (blocks.max(axis=-1) - minimums) / 15"
UNPACK = "return F.concat([wide % 16, wide // 16], axis=-1)"
Q4_0_WEIGHT = "weight = (unpack_nibbles(packed) - OFFSET) * step"
Q4_1_WEIGHT = "weight = unpack_nibbles(packed) * step + low"

MISTAKES = [
    m(
        "nibbles interleaved",
        PACK,
        "return levels[..., 0::2] | (levels[..., 1::2] << 4)",
        "interleaved",
    ),
    m(
        "low and high swapped",
        PACK,
        "return (levels[..., :HALF] << 4) | levels[..., HALF:]",
        "swapped",
    ),
    m(
        "Q4_0 scale from the magnitude",
        Q4_0_SCALE,
        "scales = np.abs(largest[..., 0]) / -OFFSET",
        "without its sign",
    ),
    m("Q4_0 scale over 8", Q4_0_SCALE, "scales = largest[..., 0] / OFFSET", "not by -8"),
    m(
        "Q4_0 offset forgotten",
        Q4_0_LEVELS,
        "levels = np.minimum(np.trunc(steps + 0.5), 15)",
        "offset of 8 is forgotten",
    ),
    m(
        "Q4_1 minimum ignored",
        Q4_1_STEPS,
        "steps = blocks * inverse_of(scales)[..., None]",
        "minimum is ignored",
    ),
    m(
        "Q4_1 over 16 levels",
        Q4_1_SCALE,
        "scales = (blocks.max(axis=-1) - minimums) / 16",
        "16 steps",
    ),
    m(
        "unpacked interleaved",
        UNPACK,
        "return F.concat([wide % 16, wide // 16], axis=-1).reshape(\n"
        "        [int(d) for d in packed.shape[:-1]] + [2, 16]\n"
        "    ).transpose(-1, -2).reshape([int(d) for d in packed.shape[:-1]] + [32])",
        "interleaved",
    ),
    m("unpacked swapped", UNPACK, "return F.concat([wide // 16, wide % 16], axis=-1)", "swapped"),
    m(
        "Q4_0 offset not subtracted",
        Q4_0_WEIGHT,
        "weight = unpack_nibbles(packed) * step",
        "offset of 8 is not subtracted",
    ),
    m(
        "Q4_1 minimum not added",
        Q4_1_WEIGHT,
        "weight = unpack_nibbles(packed) * step",
        "minimum is not added",
    ),
    m(
        "Q4_1 minimum subtracted",
        Q4_1_WEIGHT,
        "weight = unpack_nibbles(packed) * step - low",
        "subtracted",
    ),
]
