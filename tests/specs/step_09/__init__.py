"""Checks for step 09: GPT2MultiHeadAttention."""

import math
import re

import numpy as np

from tests import reference_gpt2 as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor, to_numpy
from tests.specs.model_parts import BATCH, SEQ, linear_shapes, small_config
from tests.specs.step_07 import split_failure
from tests.specs.step_08 import attention_mistakes, expect_input_dtype_kept
from tests.specs.step_08 import raised as attention_raised

CONFIG = small_config()
E, H = CONFIG.n_embd, CONFIG.n_head
D = E // H
SHAPES = {**linear_shapes("c_attn", E, 3 * E), **linear_shapes("c_proj", E, E)}
# Every size differs (2, 7, 4, 16, 64), so a shape says which axis is where.
AXES = {BATCH: "batch", SEQ: "seq", H: "heads", D: "head_dim", E: "n_embd", 3 * E: "3 * n_embd"}
HEADS_LAYOUT = "[batch, heads, seq, head_dim]"

SPLIT_WITHOUT_TRANSPOSE = (
    "The heads are cut without the transpose: reshape to [batch, seq, heads, head_dim] first, "
    "then swap the seq and heads axes."
)
MERGE_WITHOUT_TRANSPOSE = (
    "The heads are merged without the transpose: move seq back before heads "
    "([batch, seq, heads, head_dim]), then reshape to [batch, seq, n_embd]."
)
SPLIT_INTERLEAVED = (
    "The features are cut as [head_dim, heads] instead of [heads, head_dim]: each head got "
    "every n_head-th feature instead of a block of head_dim neighbours. Head 0 owns the first "
    "head_dim features of each token, head 1 the next head_dim: the reshape's last two sizes "
    "are heads, then head_dim."
)
MERGE_INTERLEAVED = (
    "The heads are merged as [head_dim, heads] instead of [heads, head_dim]: the features of "
    "the heads are interleaved. Head 0's head_dim outputs come first, then head 1's: before "
    "the reshape the tensor is [batch, seq, heads, head_dim]."
)
SPLIT_SHAPE_HINTS = {
    "[batch, seq, heads, head_dim]": (
        "The features are cut into heads, but the heads axis still comes after seq: swap "
        "axes 1 and 2 so that each head is a [seq, head_dim] matrix."
    ),
    "[batch, head_dim, seq, heads]": (
        "The features were cut as [head_dim, heads] (then axes 1 and 2 swapped): head 0 owns "
        "the first head_dim features of each token, so the reshape's last two sizes are "
        "heads, then head_dim."
    ),
    "[batch, seq, head_dim, heads]": (
        "The features were cut as [head_dim, heads] and the heads were not moved: cut as "
        "[batch, seq, heads, head_dim], then swap axes 1 and 2."
    ),
    "[batch, heads, head_dim, seq]": (
        "head_dim and seq are exchanged: the transpose swapped the wrong axes. After the "
        "reshape to [batch, seq, heads, head_dim], swap axes 1 and 2 (seq and heads)."
    ),
    "[batch, head_dim, heads, seq]": (
        "The transpose swapped the wrong axes: after the reshape to [batch, seq, heads, "
        "head_dim], swap axes 1 and 2 (seq and heads)."
    ),
}
MERGE_RESHAPE_HINTS = {
    "[batch, heads, seq, head_dim]": (
        "The tensor reached the reshape still split into heads, [batch, heads, seq, head_dim]: "
        "the heads are merged without the transpose. Move seq back before heads first, so "
        "axis 1 is seq."
    ),
    "[batch, heads, head_dim, seq]": (
        "The transpose swapped seq and head_dim (axes 2 and 3), so the reshape got [batch, "
        "heads, head_dim, seq]. Merging needs seq back in front of heads: swap axes 1 and 2."
    ),
}


def layout(shape) -> str | None:
    """[2, 4, 7, 16] -> "[batch, heads, seq, head_dim]"; None if a size is unknown."""
    names = [AXES.get(int(size)) for size in shape]
    return None if None in names else "[" + ", ".join(names) + "]"  # type: ignore[arg-type]


def expect_layout(out, expected: tuple[int, ...], what: str, hints: dict[str, str]) -> None:
    """Fail naming the axes, in words, when `out` has another shape than `expected`."""
    shape = tuple(int(d) for d in getattr(out, "shape", ()))
    if out is None or not shape or shape == expected:
        return
    said = layout(shape)
    raise Fail(
        f"{what} has shape {list(shape)}"
        + (f", that is {said}" if said else "")
        + f"; expected {layout(expected)} = {list(expected)}.",
        hints.get(said or "", f"Follow the axes through each move: {layout(expected)} at the end."),
    )


SIZES = re.compile(r"Dim\((\d+)\)")
RESHAPE = re.compile(
    r"input = TensorValue\([^\n]*?shape=\[([^\]]*)\].*?new_shape = \[([^\]]*)\]", re.S
)


def reshape_failure(failure: Fail) -> Fail | None:
    """Why a reshape raised, in words: which layout reached it, which was asked for."""
    cause = str(failure.__cause__ or "")
    found = RESHAPE.search(cause) if "ReshapeOp" in cause else None
    if not found:
        return None
    given, asked = ([int(n) for n in SIZES.findall(g)] for g in found.groups())
    said_given, said_asked = layout(given), layout(asked)
    specific = MERGE_RESHAPE_HINTS.get(said_given or "")
    hint = (
        f"A reshape got a tensor of shape {given}"
        + (f" ({said_given})" if said_given else "")
        + f" and was asked for {asked}"
        + (f" ({said_asked})" if said_asked else "")
        + f": {math.prod(given)} numbers cannot fill {math.prod(asked)} places. "
        + (
            specific
            or "A reshape keeps the numbers in memory order: before it, the axes must "
            "already be in the order the new shape reads them."
        )
    )
    return Fail(failure.message, hint)


UNMERGED = re.compile(r"lhs \(shape \[([\d, ]+)\]\)")


def projection_failure(failure: Fail) -> Fail | None:
    """A Linear that got the heads still split."""
    found = UNMERGED.search(failure.message)
    if "Matrix multiplication" not in failure.message or not found:
        return None
    lhs = [int(s) for s in found.group(1).split(",")]
    if layout(lhs) != HEADS_LAYOUT:
        return None
    return Fail(
        failure.message,
        f"c_proj got the attention output still split into heads, {lhs} = {HEADS_LAYOUT}: "
        "merge the heads back to [batch, seq, n_embd] first; c_proj mixes n_embd features.",
    )


def call(ctx: Context, what: str, fn, *args):
    try:
        return ctx.call(what, fn, *args)
    except Fail as failure:
        explained = (
            reshape_failure(failure)
            or split_failure(failure)
            or projection_failure(failure)
            or attention_raised(failure)
        )
        raise explained from failure


def interleaved_split(x: np.ndarray) -> np.ndarray:
    """_split_heads with the features cut as [head_dim, heads]: head h gets h, h + H, ..."""
    batch, seq, embed = x.shape
    return x.reshape(batch, seq, embed // H, H).transpose(0, 3, 1, 2)


def interleaved_merge(x: np.ndarray) -> np.ndarray:
    batch, heads, seq, head_dim = x.shape
    return x.transpose(0, 2, 3, 1).reshape(batch, seq, heads * head_dim)


def build(ctx: Context):
    module = ctx.build("GPT2MultiHeadAttention", CONFIG)
    return module, ctx.load_weights(module, SHAPES)


def parameters(ctx: Context) -> None:
    build(ctx)


def split_heads(ctx: Context) -> None:
    module, _ = build(ctx)
    x = ctx.normal(BATCH, SEQ, E)
    what = "_split_heads(x, num_heads, head_dim)"
    out = call(ctx, what, module._split_heads, tensor(x), H, D)
    expect_layout(out, (BATCH, H, SEQ, D), what, SPLIT_SHAPE_HINTS)
    expect_close(
        out,
        ref.split_heads(x, H),
        what,
        {
            SPLIT_WITHOUT_TRANSPOSE: ref.split_heads(x, H, transpose=False),
            SPLIT_INTERLEAVED: interleaved_split(x),
        },
        hint="[batch, seq, n_embd] -> [batch, seq, heads, head_dim] -> [batch, heads, seq, head_dim]",
    )


def merge_heads(ctx: Context) -> None:
    module, _ = build(ctx)
    x = ctx.normal(BATCH, H, SEQ, D)
    what = "_merge_heads(x, num_heads, head_dim)"
    out = call(ctx, what, module._merge_heads, tensor(x), H, D)
    expect_layout(out, (BATCH, SEQ, E), what, {})
    expect_close(
        out,
        ref.merge_heads(x),
        what,
        {
            MERGE_WITHOUT_TRANSPOSE: ref.merge_heads(x, transpose=False),
            MERGE_INTERLEAVED: interleaved_merge(x),
            "_merge_heads swapped seq and head_dim (axes 2 and 3) before the reshape: move seq "
            "back in front of heads instead (axes 1 and 2).": x.transpose(0, 1, 3, 2).reshape(
                BATCH, SEQ, E
            ),
        },
        hint="[batch, heads, seq, head_dim] -> [batch, seq, heads, head_dim] -> [batch, seq, n_embd]",
    )


def attn(ctx: Context) -> None:
    module, _ = build(ctx)
    q, k, v = (ctx.normal(BATCH, H, SEQ, D) for _ in range(3))
    what = "_attn(query, key, value)"
    out = call(ctx, what, module._attn, tensor(q), tensor(k), tensor(v))
    if tuple(to_numpy(out, what).shape) == (BATCH, H, SEQ, SEQ):
        raise Fail(
            f"{what} has shape {[BATCH, H, SEQ, SEQ]}, [batch, heads, seq, seq]: these are the "
            "attention weights.",
            "The output is the weighted sum of the values: the weights [.., seq, seq] times "
            "the values [.., seq, head_dim].",
        )
    expect_close(
        out,
        ref.attention(q, k, v),
        what,
        attention_mistakes(q, k, v, E),
        hint="Step 08's stages, for every head at once: compare each query with every key, "
        "divide, hide the future, normalize each row, weigh the values.",
    )


def attn_keeps_the_input_dtype(ctx: Context) -> None:
    module, _ = build(ctx)
    expect_input_dtype_kept(ctx, "_attn", module._attn)


def forward(ctx: Context) -> None:
    module, w = build(ctx)
    x = ctx.normal(BATCH, SEQ, E)

    def variant(**options):
        return ref.multi_head_attention(w, x, H, **options)

    def interleaved() -> np.ndarray:
        heads = [interleaved_split(t) for t in ref.qkv(w, x)]
        out = interleaved_merge(ref.attention(*heads))
        return ref.linear(out, w["c_proj.weight"], w["c_proj.bias"])

    def query_key_swapped() -> np.ndarray:
        query, key, value = ref.qkv(w, x)
        heads = [ref.split_heads(t, H) for t in (key, query, value)]
        out = ref.merge_heads(ref.attention(*heads))
        return ref.linear(out, w["c_proj.weight"], w["c_proj.bias"])

    mistakes = {
        SPLIT_WITHOUT_TRANSPOSE: variant(split_transpose=False),
        MERGE_WITHOUT_TRANSPOSE: variant(merge_transpose=False),
        SPLIT_INTERLEAVED: interleaved(),
        "c_proj is not applied to the merged heads: its output mixes the heads and goes back "
        "to the residual stream.": variant(output_projection=False),
        "The attention scores are not scaled by 1/sqrt(head_dim).": variant(scale=1.0),
        "The scores are scaled with n_embd, not head_dim.": variant(scale=1 / math.sqrt(E)),
        "The causal mask is missing.": variant(mask="none"),
        "The mask is added after the softmax.": variant(mask="after_softmax"),
        "The softmax runs over the wrong axis (use axis=-1).": variant(softmax_axis=-2),
        f"The heads are split as head_dim = {D} heads of n_head = {H} features: num_heads and "
        "attn_head_size are passed the wrong way round (num_heads comes first).": (
            ref.multi_head_attention(w, x, D, scale=1 / math.sqrt(D))
        ),
        "query and key are swapped: c_attn's output holds query, key, value in that order.": (
            query_key_swapped()
        ),
    }
    out = call(ctx, "GPT2MultiHeadAttention.forward", module, tensor(x))
    expect_layout(out, (BATCH, SEQ, E), "GPT2MultiHeadAttention(x)", {})
    expect_close(
        out,
        variant(),
        "GPT2MultiHeadAttention(x)",
        mistakes,
        hint="c_attn -> split q, k, v -> _split_heads -> _attn -> _merge_heads -> c_proj",
    )


STEP = Step(
    number=9,
    required={
        "GPT2MultiHeadAttention": ["__init__", "_split_heads", "_merge_heads", "_attn", "forward"]
    },
    checks=[
        Check(
            "c_attn [3*n_embd, n_embd] and c_proj [n_embd, n_embd], with biases",
            parameters,
        ),
        Check(
            "_split_heads: [batch, seq, n_embd] -> [batch, heads, seq, head_dim]",
            split_heads,
        ),
        Check(
            "_merge_heads: [batch, heads, seq, head_dim] -> [batch, seq, n_embd]",
            merge_heads,
        ),
        Check("_attn: causal scaled dot-product attention per head", attn),
        Check(
            "_attn keeps the inputs' dtype, the mask's included (bfloat16, float16)",
            attn_keeps_the_input_dtype,
        ),
        Check("forward matches GPT-2's attention", forward),
    ],
)
