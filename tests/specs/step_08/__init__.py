"""Checks for step 08: scaled_dot_product_attention."""

import math
import re

import numpy as np

from tests import reference_gpt2 as ref
from tests.checker import Check, Context, Fail, Step, expect_close, expect_shape, tensor, to_numpy
from tests.checker.compare import close

BATCH, HEADS, SEQ, HEAD_DIM = 2, 3, 6, 16  # all different: a wrong axis shows
EMBED = HEADS * HEAD_DIM


def transposed_scores(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Attention computed from key @ query^T: rows are keys, columns queries."""
    scores = np.swapaxes(q @ np.swapaxes(k, -1, -2), -1, -2) / math.sqrt(q.shape[-1])
    return ref.softmax(scores + ref.causal_mask(q.shape[-2]), axis=-1) @ v


def scale_mistakes(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, embed: int = EMBED
) -> dict[str, np.ndarray]:
    """What the usual scale mistakes compute, with the hint for each (`embed`:
    the model's width, heads * head_dim). They all give the right output at
    position 0, which sees only itself."""
    head_dim, seq = q.shape[-1], q.shape[-2]
    found = {
        "The scores are not scaled: divide them by sqrt(head_dim) before the softmax.": (
            ref.attention(q, k, v, scale=1.0)
        ),
        "The scale is 1/head_dim: the scores are divided by head_dim; divide by "
        "sqrt(head_dim).": ref.attention(q, k, v, scale=1.0 / head_dim),
        "The scores are scaled with n_embd; the scale is 1/sqrt(head_dim), the width of one "
        "head.": ref.attention(q, k, v, scale=1.0 / math.sqrt(embed)),
        "The scale is inverted: the scores are multiplied by sqrt(head_dim); divide "
        "instead.": ref.attention(q, k, v, scale=math.sqrt(head_dim)),
    }
    if seq > 1:
        found[
            "The scale uses the sequence length: the scores are divided by sqrt(seq_length); "
            "the scale is 1/sqrt(head_dim), head_dim being the last axis of the query."
        ] = ref.attention(q, k, v, scale=1.0 / math.sqrt(seq))
    return found


def other_mistakes(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> dict[str, np.ndarray]:
    """The mask, softmax and score mistakes, with the hint for each."""
    with np.errstate(invalid="ignore"):
        over_heads = ref.attention(q, k, v, softmax_axis=1)
    return {
        "There is no causal mask: add the mask of step 02 to the scores so position i "
        "cannot see j > i.": ref.attention(q, k, v, mask="none"),
        "The mask is inverted: each position sees the future instead of the past.": (
            ref.attention(q, k, v, mask="inverted")
        ),
        "The mask is applied after the softmax; add it to the scores before the softmax.": (
            ref.attention(q, k, v, mask="after_softmax")
        ),
        "The softmax runs over the wrong axis (the queries, axis -2): normalize over the "
        "keys, the last axis.": ref.attention(q, k, v, softmax_axis=-2),
        "The softmax runs over the wrong axis (axis 1, the heads of [batch, heads, seq, "
        "seq]): normalize over the keys, the last axis.": over_heads,
        "The scores are transposed: row i must hold query i against every key, query times "
        "key^T; key times query^T puts the keys in the rows.": transposed_scores(q, k, v),
    }


def attention_mistakes(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, embed: int = EMBED
) -> dict[str, np.ndarray]:
    """Every mistake above, with the hint for each (step 09 uses them too)."""
    return {**scale_mistakes(q, k, v, embed), **other_mistakes(q, k, v)}


def inputs(ctx: Context, seq: int = SEQ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return tuple(ctx.normal(BATCH, HEADS, seq, HEAD_DIM) for _ in range(3))  # type: ignore[return-value]


MATMUL = re.compile(r"lhs \(shape \[([\d, ]+)\]\).*rhs \(shape \[([\d, ]+)\]\)")


def raised(failure: Fail) -> Fail:
    """Why the learner's function raised, in the terms of this step."""
    message = failure.message
    if "int(dim)" in message or "Dim'" in message:
        hint = (
            "head_dim is a MAX Dim (a size that may be symbolic), not a Python number: turn "
            "it into one with int(...) before math.sqrt or **."
        )
    elif "Matrix multiplication" in message:
        shapes = MATMUL.search(message)
        lhs, rhs = ([int(s) for s in g.split(",")] for g in shapes.groups()) if shapes else ([], [])
        qkv, square = [BATCH, HEADS, SEQ, HEAD_DIM], [BATCH, HEADS, SEQ, SEQ]
        if lhs == qkv and rhs == qkv:
            said = (
                "query times key as they are: the matrix product needs key's last two axes "
                "swapped, [.., head_dim, seq], so each query meets each key."
            )
        elif lhs == qkv and rhs == square:
            said = (
                "value times weights, the wrong way round: the matrix product is the weights "
                "[.., seq, seq] times the values [.., seq, head_dim]."
            )
        elif lhs == qkv and rhs and rhs[-1] == HEAD_DIM:
            said = (
                f"key was transposed to {rhs}: for the matrix product, swap key's last two "
                "axes (seq and head_dim) and leave batch and heads where they are."
            )
        else:
            said = (
                "a matrix product got operands that do not fit: the scores are query "
                "[.., seq, head_dim] times key with its last two axes swapped "
                "[.., head_dim, seq]; the output is weights [.., seq, seq] times value "
                "[.., seq, head_dim]."
            )
        hint = said[0].upper() + said[1:]
    elif "broadcastable" in message and "Add" in message:
        hint = (
            "The mask's shape does not fit the scores': the scores are [.., seq, seq], and "
            "so is the mask when no tokens are cached (num_tokens = 0 in step 02's "
            "causal_mask)."
        )
    else:
        return failure
    return Fail(message, hint)


def run(ctx: Context, q, k, v) -> object:
    fn = ctx.get("scaled_dot_product_attention")
    try:
        return ctx.call("scaled_dot_product_attention", fn, tensor(q), tensor(k), tensor(v))
    except Fail as failure:
        raise raised(failure) from failure


def output_shape(ctx: Context) -> None:
    q, k, v = inputs(ctx)
    out = to_numpy(run(ctx, q, k, v), "scaled_dot_product_attention")
    if out.shape == (BATCH, HEADS, SEQ, SEQ):
        raise Fail(
            f"scaled_dot_product_attention(q, k, v) has shape {list(out.shape)}, "
            f"expected {[BATCH, HEADS, SEQ, HEAD_DIM]}: [.., seq, seq] are the attention "
            "weights.",
            "The weights say how much of each value to take; the output is the weighted sum "
            "of the values, [.., seq, head_dim].",
        )
    expect_shape(
        out,
        (BATCH, HEADS, SEQ, HEAD_DIM),
        "scaled_dot_product_attention(q, k, v)",
        "Scores over the last two axes are [.., seq, seq]; mixing the values with them gives "
        "[.., seq, head_dim].",
    )


def mask_multiplied(what: str, actual: np.ndarray, v: np.ndarray) -> None:
    """Fail when the mask looks multiplied into the scores: the last position,
    which masks nothing, then has all scores 0 and takes the plain mean of the
    values (positions before it get NaN from -inf times a score)."""
    if actual.shape[-2] > 1 and close(actual[..., -1, :], v.mean(axis=-2)):
        raise Fail(
            f"{what} does not match GPT-2, and the last position, which hides nothing, gets "
            "the plain mean of the values (all its scores are 0).",
            "The mask is multiplied into the scores: 0 × score wipes every visible score to "
            "0 and -inf × score gives ±inf. The mask is added: 0 keeps a score, -inf hides it.",
        )


def nan_failure(what: str, actual: np.ndarray) -> None:
    if np.isnan(actual).any():
        raise Fail(
            f"{what} contains NaN.",
            "NaN comes from an -inf where it does not belong: the mask goes into the scores "
            "(added, before the softmax), never into the weights or multiplied.",
        )


def first_position_sees_only_itself(ctx: Context) -> None:
    q, k, v = inputs(ctx)
    actual = to_numpy(run(ctx, q, k, v), "scaled_dot_product_attention")
    what = "the output at position 0"
    mistakes = {hint: wrong[..., 0, :] for hint, wrong in other_mistakes(q, k, v).items()}
    if not close(actual[..., 0, :], v[..., 0, :]):
        mask_multiplied(what, actual, v)
        for hint, wrong in mistakes.items():
            if close(actual[..., 0, :], wrong):
                raise Fail(f"{what} does not match GPT-2.", hint)
        nan_failure(what, actual)
    expect_close(
        actual[..., 0, :],
        v[..., 0, :],
        what,
        hint="The first position may see only itself: all its weight is on its own key, so its "
        "output is its own value.",
    )


def matches_reference(ctx: Context) -> None:
    for seq in (SEQ, 1):
        q, k, v = inputs(ctx, seq)
        actual = to_numpy(run(ctx, q, k, v), "scaled_dot_product_attention")
        expected = ref.attention(q, k, v)
        what = f"attention over {seq} positions"
        if not close(actual, expected):
            mask_multiplied(what, actual, v)
            for hint, wrong in attention_mistakes(q, k, v).items():
                if close(actual, wrong):
                    raise Fail(f"{what} does not match GPT-2.", hint)
            nan_failure(what, actual)
        expect_close(
            actual,
            expected,
            what,
            hint="Follow the four stages on toy numbers (the page's worked example): compare "
            "every query with every key, divide, hide the future, normalize each row over the "
            "keys, weigh the values.",
        )


def keeps_the_input_dtype(ctx: Context) -> None:
    expect_input_dtype_kept(
        ctx, "scaled_dot_product_attention", ctx.get("scaled_dot_product_attention")
    )


def expect_input_dtype_kept(ctx: Context, name: str, fn) -> None:
    """A deployed model runs in bfloat16 or float16: the mask must be made in the
    scores' dtype, or adding it promotes the scores (and all that follows) to
    float32. `fn(query, key, value)` is the learner's attention."""
    from max.dtype import DType

    for dtype in (DType.bfloat16, DType.float16):
        what = f"{name} of {str(dtype).removeprefix('DType.')} inputs"
        asked, out = masks_asked(ctx, what, dtype, fn)
        returned = getattr(out, "dtype", dtype)
        wrong = [d for d in asked if d != dtype]
        if wrong:
            raise Fail(
                f"The causal mask is made in {wrong[0]} while the scores are {dtype}: "
                f"{what} returns {returned}.",
                f"A hard-coded dtype ({wrong[0]}) makes the mask {wrong[0]} whatever the "
                "inputs, and adding it promotes the scores, the weights and the output. Make "
                "the mask in the scores' dtype.",
            )
        if returned != dtype:
            raise Fail(
                f"{what} returns {returned}: the computation does not stay in the inputs' dtype.",
                f"Something is {returned} whatever the inputs, a hard-coded dtype: every "
                "tensor added to the scores must be made in their dtype.",
            )


def masks_asked(ctx: Context, what: str, dtype, fn) -> tuple[list, object]:
    """(the dtype of every causal_mask `fn` asks for, its output) for a query,
    key and value of `dtype`. Built lazily: nothing is computed (no kernel to
    compile for these dtypes), only typed."""
    from max.experimental import functional as F

    real = getattr(ctx.module, "causal_mask", None)
    asked = []

    def causal_mask(*args, **kwargs):
        asked.append(kwargs.get("dtype", args[2] if len(args) > 2 else None))
        return real(*args, **kwargs)

    if callable(real):
        ctx.module.causal_mask = causal_mask
    try:
        with F.lazy():
            q, k, v = (tensor(x).cast(dtype) for x in inputs(ctx))
            try:
                out = ctx.call(what, fn, q, k, v)
            except Fail as failure:
                raise raised(failure) from failure
    finally:
        if callable(real):
            ctx.module.causal_mask = real
    return asked, out


STEP = Step(
    number=8,
    required={"scaled_dot_product_attention": []},
    checks=[
        Check("output is [batch, heads, seq, head_dim]", output_shape),
        Check(
            "the first position attends only to itself",
            first_position_sees_only_itself,
        ),
        Check(
            "softmax(q k^T / sqrt(head_dim) + mask) v matches GPT-2",
            matches_reference,
        ),
        Check(
            "the mask and the scores keep the inputs' dtype (bfloat16, float16)",
            keeps_the_input_dtype,
        ),
    ],
)
