"""The mistakes step 19's checks must name: plausible learner edits of
solutions/solution_19.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

SPEEDS = "speeds = F.exp(pair * (-2.0 * math.log(theta) / head_dim))"
DOUBLED = "angles = F.concat([angles, angles], axis=-1)"
QUARTER = "return F.concat([-second, first], axis=-1)"
TURN = "return x * cos + rotate_half(x) * sin"
NEW_KEY = "key = F.concat([past_key, apply_rope(key, cos, sin)], axis=2)"
NEW_VALUE = "value = F.concat([past_value, value], axis=2)"
POSITIONS = "num_cached, num_cached + seq_length, dtype=DType.float32, device=query.device"

MISTAKES = [
    # the tables
    m(
        "interleaved tables",
        DOUBLED,
        "angles = F.repeat_interleave(angles, 2, axis=-1)",
        "interleaved",
    ),
    m(
        "exponent without the factor 2",
        SPEEDS,
        "speeds = F.exp(pair * (-math.log(theta) / head_dim))",
        "exponent is -2i / head_dim",
    ),
    m(
        "exponent's sign",
        SPEEDS,
        "speeds = F.exp(pair * (2.0 * math.log(theta) / head_dim))",
        "exponent is negative",
    ),
    m(
        "theta hard-coded",
        SPEEDS,
        "speeds = F.exp(pair * (-2.0 * math.log(10000.0) / head_dim))",
        "theta is not the one passed in",
    ),
    m(
        "positions ignored",
        "angles = F.outer(positions.cast(DType.float32), speeds)",
        "angles = F.outer(Tensor.arange(0, positions.shape[0], dtype=DType.float32), speeds)",
        "start at position 0",
    ),
    m(
        "cos and sin swapped",
        "return F.cos(angles), F.sin(angles)",
        "return F.sin(angles), F.cos(angles)",
        "cos and sin are swapped",
    ),
    # the quarter turn
    m("quarter turn backwards", QUARTER, "return F.concat([second, -first], axis=-1)", "wrong way"),
    m("halves not swapped", QUARTER, "return F.concat([-first, second], axis=-1)", "not swapped"),
    m("minus sign missing", QUARTER, "return F.concat([second, first], axis=-1)", "minus sign"),
    # turning each pair
    m("sin and cos swapped in the turn", TURN, "return x * sin + rotate_half(x) * cos", "swapped"),
    m("turn subtracted", TURN, "return x * cos - rotate_half(x) * sin", "wrong way"),
    m("sine times the pair itself", TURN, "return x * cos + x * sin", "quarter turn is missing"),
    # the attention
    Mutant(
        "value rotated",
        ((NEW_VALUE, "value = F.concat([past_value, apply_rope(value, cos, sin)], axis=2)"),),
        "values are rotated too",
    ),
    m(
        "key not rotated",
        NEW_KEY,
        "key = F.concat([past_key, key], axis=2)",
        "keys are not rotated",
    ),
    m(
        "query not rotated",
        "query = apply_rope(query, cos, sin)",
        "query = query",
        "queries are not",
    ),
    m(
        "positions restart at 0",
        POSITIONS,
        "0, seq_length, dtype=DType.float32, device=query.device",
        "start at the cache's length",
    ),
    m(
        "positions one late",
        POSITIONS,
        "num_cached + 1, num_cached + seq_length + 1, dtype=DType.float32, device=query.device",
        "are not the new keys turned by their positions",
    ),
    m(
        "theta not passed on",
        "cos, sin = rope_tables(positions, head_dim, theta)",
        "cos, sin = rope_tables(positions, head_dim, 10000.0)",
        "not the theta it was given",
    ),
    m(
        "speeds on the default device",
        "dtype=DType.float32, device=positions.device)",
        "dtype=DType.float32)",
        "speeds are made on the default device",
    ),
    m(
        "positions on the default device",
        "dtype=DType.float32, device=query.device",
        "dtype=DType.float32",
        "positions are made on the default device",
    ),
]
