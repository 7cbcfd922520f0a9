"""The mistakes step 29's checks must name: plausible learner edits of
solutions/solution_29.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import m

LENGTH = """length = reader.number("Q", f"{what}'s length")"""
COUNT = """count = reader.number("Q", f"{what}'s length")"""
SHAPE = "shape = tuple(reversed(dims))"
ALIGNED = "return -(-position // alignment) * alignment"
ALIGNMENT = 'alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)'
START = "start = aligned(reader.position, alignment)"
KNOWN = "known = BLOCK_FORMATS.get(info.kind)"
UNPERMUTE = "pairs = weight.reshape(num_heads, rows // num_heads // 2, 2, cols)"
HEADS = '"attn_k": config.num_key_value_heads'

MISTAKES = [
    m(
        "string length read as 4 bytes",
        LENGTH,
        """length = reader.number("I", f"{what}'s length")""",
        "read as 4 bytes",
    ),
    m(
        "array count read as 4 bytes",
        COUNT,
        """count = reader.number("I", f"{what}'s length")""",
        "count is read as 4 bytes",
    ),
    m("dims not reversed", SHAPE, "shape = tuple(dims)", "innermost dim"),
    m(
        "aligned rounds down",
        ALIGNED,
        "return position // alignment * alignment",
        "rounds down",
    ),
    m(
        "aligned always moves on",
        ALIGNED,
        "return (position // alignment + 1) * alignment",
        "moves on by a whole alignment",
    ),
    m("alignment ignored", START, "start = reader.position", "alignment is ignored"),
    m(
        "general.alignment ignored",
        ALIGNMENT,
        "alignment = DEFAULT_ALIGNMENT",
        "general.alignment is ignored",
    ),
    m(
        "an unknown block type read as Q4_0",
        KNOWN,
        'known = BLOCK_FORMATS.get(info.kind, BLOCK_FORMATS["Q4_0"])',
        "read as another",
    ),
    m(
        "an unknown block type is a KeyError",
        "    known = BLOCK_FORMATS.get(info.kind)\n    if known is None:\n"
        "        raise unknown_type(info, path)\n",
        "    known = BLOCK_FORMATS[info.kind]\n",
        "refused with a GGUFError",
    ),
    m(
        "q and k rows not permuted back",
        "    return pairs.swapaxes(1, 2).reshape(rows, cols)",
        "    return weight",
        "still in llama.cpp's order",
    ),
    m(
        "the converter's permutation applied again",
        UNPERMUTE,
        "pairs = weight.reshape(num_heads, 2, rows // num_heads // 2, cols)",
        "applied again",
    ),
    m(
        "q and k un-permuted as one head",
        UNPERMUTE,
        "pairs = weight.reshape(1, rows // 2, 2, cols)",
        "as if the matrix were one head",
    ),
    m(
        "k un-permuted by the query heads",
        HEADS,
        '"attn_k": config.num_attention_heads',
        "num_key_value_heads",
    ),
]
