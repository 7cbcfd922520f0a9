"""Checks for step 08: scaled_dot_product_attention."""

import math

import numpy as np

from tests import reference as ref
from tests.checker import Check, Context, Step, expect_close, tensor
from tests.mutants import Mutant, m

BATCH, HEADS, SEQ, HEAD_DIM = 2, 3, 6, 16  # all different: a wrong axis shows
EMBED = HEADS * HEAD_DIM


def attention_mistakes(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, embed: int
) -> dict[str, np.ndarray]:
    """What the usual attention mistakes compute, with the hint for each."""
    head_dim = q.shape[-1]
    return {
        "The scores are not scaled: divide them by sqrt(head_dim) before the softmax.": ref.attention(
            q, k, v, scale=1.0
        ),
        "The scores are divided by head_dim; divide by sqrt(head_dim).": ref.attention(
            q, k, v, scale=1.0 / head_dim
        ),
        "The scores are scaled with n_embd; the scale is 1/sqrt(head_dim), the width of one head.": ref.attention(
            q, k, v, scale=1.0 / math.sqrt(embed)
        ),
        "The scores are multiplied by sqrt(head_dim); divide instead.": ref.attention(
            q, k, v, scale=math.sqrt(head_dim)
        ),
        "There is no causal mask: add causal_mask(...) to the scores so position i cannot see j > i.": ref.attention(
            q, k, v, mask="none"
        ),
        "The mask is inverted: each position sees the future instead of the past.": ref.attention(
            q, k, v, mask="inverted"
        ),
        "The mask is applied after the softmax; add it to the scores before the softmax.": ref.attention(
            q, k, v, mask="after_softmax"
        ),
        "The softmax runs over the wrong axis: normalize over the keys, axis=-1.": ref.attention(
            q, k, v, softmax_axis=-2
        ),
    }


def inputs(ctx: Context, seq: int = SEQ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return tuple(ctx.normal(BATCH, HEADS, seq, HEAD_DIM) for _ in range(3))  # type: ignore[return-value]


def run(ctx: Context, q, k, v) -> object:
    fn = ctx.get("scaled_dot_product_attention")
    return ctx.call("scaled_dot_product_attention", fn, tensor(q), tensor(k), tensor(v))


def output_shape(ctx: Context) -> None:
    from tests.checker import expect_shape

    q, k, v = inputs(ctx)
    expect_shape(
        run(ctx, q, k, v),
        (BATCH, HEADS, SEQ, HEAD_DIM),
        "scaled_dot_product_attention(q, k, v)",
        "scores are q @ k^T over the last two axes ([.., seq, seq]); weights @ v gives [.., seq, head_dim].",
    )


def first_position_sees_only_itself(ctx: Context) -> None:
    q, k, v = inputs(ctx)
    out = run(ctx, q, k, v)
    from tests.checker import to_numpy

    actual = to_numpy(out, "scaled_dot_product_attention")[..., 0, :]
    mistakes = {
        hint: wrong[..., 0, :] for hint, wrong in attention_mistakes(q, k, v, EMBED).items()
    }
    expect_close(
        actual,
        v[..., 0, :],
        "the output at position 0",
        mistakes,
        hint="With the causal mask, the first token can only attend to itself, so its output is its own value.",
    )


def matches_reference(ctx: Context) -> None:
    for seq in (SEQ, 1):
        q, k, v = inputs(ctx, seq)
        expect_close(
            run(ctx, q, k, v),
            ref.attention(q, k, v),
            f"attention over {seq} positions",
            attention_mistakes(q, k, v, EMBED),
            hint="softmax(q @ k^T / sqrt(head_dim) + mask, axis=-1) @ v",
        )


STEP = Step(
    number=8,
    title="Attention with causal masking",
    required={"scaled_dot_product_attention": []},
    checks=[
        Check("output is [batch, heads, seq, head_dim]", output_shape),
        Check("the first position attends only to itself", first_position_sees_only_itself),
        Check("softmax(q k^T / sqrt(head_dim) + mask) v matches GPT-2", matches_reference),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m(
        "no scale",
        "scores = scores / math.sqrt(int(head_dim))",
        "scores = scores",
        "not scaled",
    ),
    m("scale by head_dim", "math.sqrt(int(head_dim))", "int(head_dim)", "divided by head_dim"),
    m("no mask", "scores = scores + mask", "scores = scores", "causal mask"),
    m(
        "softmax over queries",
        "F.softmax(scores, axis=-1)",
        "F.softmax(scores, axis=-2)",
        "wrong axis",
    ),
    Mutant(
        "mask after softmax",
        (
            ("scores = scores + mask\n", ""),
            (
                "weights = F.softmax(scores, axis=-1)\n",
                "weights = F.softmax(scores, axis=-1) + mask\n",
            ),
        ),
        "after the softmax",
    ),
    m("no key transpose", "query @ key.transpose(-1, -2)", "query @ key", "raised"),
    m(
        "multiplied by sqrt",
        "scores = scores / math.sqrt",
        "scores = scores * math.sqrt",
        "multiplied",
    ),
]
