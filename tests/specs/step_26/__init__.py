"""Checks for step 26: attention's backward pass.

Every gradient is measured against finite differences of the NumPy forward in
float64 (tests/reference_backward.py): nudge one input entry by +-eps, see how
L = sum(out * grad_output) moves. The analytic NumPy backward, with its mistake
options, only names what a wrong gradient is. The sizes are small so that the
differences take milliseconds; seq (5) differs from head_dim (4) and from
batch * seq (10), so no missing transpose fits a shape by luck."""

import numpy as np

from tests import reference_backward as ref
from tests import reference_gpt2 as base
from tests.checker import Check, Context, Fail, Step, expect_close, expect_shape, tensor, to_numpy
from tests.checker.compare import close

BATCH, HEADS, SEQ, HEAD_DIM = 2, 2, 5, 4
ROW = 2  # the one output position given a gradient in the masked check
FEATURES = 6  # linear_backward's in and out features: square, so a transpose only shows in values
EMBED, N_HEAD = 8, 2
SHAPE = (BATCH, HEADS, SEQ, HEAD_DIM)
FD = "the finite differences"  # what every gradient is measured against

ROWSUM = "dS = P * (dP - rowsum(dP * P))"
SOFTMAX_MISTAKES = {
    "The rowsum runs down the columns (axis -2): each softmax is over one row of the "
    f"scores, so the sum of dP * P is over that row, the last axis. {ROWSUM}.": {"axis": -2},
    "The rowsum is of dP alone: it is of dP * P, each entry weighted by its "
    f"probability. {ROWSUM}.": {"weighted": False},
    "The rowsum term is missing: P * dP is only the Jacobian's diagonal. Raising one "
    "score also lowers every other weight of its row, which gives the term - P * "
    f"rowsum(dP * P). {ROWSUM}.": {"rowsum": False},
    "dS is not multiplied by P: gradient flows into the masked positions, where P is 0, "
    f"and everywhere else it is too large. {ROWSUM}.": {"times_probs": "none"},
    "Only dP is multiplied by P, not the rowsum: every masked position (P = 0) gets "
    f"- rowsum(dP * P), gradient flowing into masked positions. {ROWSUM}.": {"times_probs": "grad"},
}
SCALE = 1 / np.sqrt(HEAD_DIM)
ATTENTION_MISTAKES = {
    "dV = P dO: the transpose is missing. out = P V, so value j collects the gradient "
    "of every output that read it, weighted by how much it read it: column j of P, "
    "dV = P^T dO.": {"value_transpose": False},
    "dK = dS Q: dK is missing a transpose. S[i, j] = Q[i] . K[j] * scale, so key j "
    "collects from column j of dS: dK = dS^T Q * scale.": {"key_transpose": False},
    "dQ = dS^T K: the transpose belongs to dK. Query i collects from row i of dS: "
    "dQ = dS K * scale.": {"query_transpose": True},
    "dQ and dK are swapped: return (grad_query, grad_key, grad_value) in this order.": {
        "swapped": True
    },
    "The scale is forgotten on the way back: S = Q K^T * scale, so dQ and dK carry "
    "the factor scale = 1 / sqrt(head_dim) too.": {"scale": 1.0},
    "dS is multiplied by sqrt(head_dim), the scale upside down: the forward multiplied "
    "the scores by 1 / sqrt(head_dim), and the chain rule multiplies by the same "
    "factor.": {"scale": float(np.sqrt(HEAD_DIM))},
    "The scale is applied twice: dQ and dK carry one factor 1 / sqrt(head_dim), "
    "once in dS or once in each of them.": {"scale": float(SCALE**2)},
    **SOFTMAX_MISTAKES,
}
MASK_ADDED = (
    "Is the mask added on the way back? The mask is a constant added to the scores: "
    "nothing flows into it, and P = 0 already gives the masked positions no gradient."
)


def wrong(variants: dict, index: int | str) -> dict[str, np.ndarray]:
    """{explanation: that mistake's result `index`}: a gradient by position or by name."""
    return {why: result[index] for why, result in variants.items()}


def triple(what: str, result) -> tuple[np.ndarray, ...]:
    if not isinstance(result, tuple) or len(result) != 3:
        raise Fail(
            f"{what} returned {type(result).__name__}, expected a tuple of three tensors.",
            "Return the three gradients in the order the docstring gives.",
        )
    return tuple(to_numpy(t, f"{what}[{i}]") for i, t in enumerate(result))


# --------------------------------------------------------------------------
# the softmax


def softmax_backward_is_the_jacobian(ctx: Context) -> None:
    scores = ctx.normal(BATCH, HEADS, SEQ, SEQ) + base.causal_mask(SEQ)
    probs = base.softmax(scores).astype(np.float32)
    grad_probs = ctx.normal(BATCH, HEADS, SEQ, SEQ)
    got = ctx.call(
        "softmax_backward", ctx.get("softmax_backward"), tensor(probs), tensor(grad_probs)
    )
    want = ref.gradients(lambda scores: base.softmax(scores), {"scores": scores}, grad_probs)
    mistakes = {
        why: ref.softmax_backward(probs, grad_probs, **options)
        for why, options in SOFTMAX_MISTAKES.items()
    }
    expect_close(got, want["scores"], "softmax_backward(P, dP)", mistakes, model=FD)


# --------------------------------------------------------------------------
# attention


def attention_case(ctx: Context, grad_output: np.ndarray):
    """The learner's (dQ, dK, dV) for random inputs, the inputs, and each
    mistake's (dQ, dK, dV)."""
    q, k, v = (ctx.normal(*SHAPE) for _ in range(3))
    probs = ref.attention_forward(q, k, v)[1].astype(np.float32)
    args = [tensor(t) for t in (q, k, v, probs, grad_output)]
    got = triple(
        "attention_backward", ctx.call("attention_backward", ctx.get("attention_backward"), *args)
    )
    variants = {
        why: ref.attention_backward(q, k, v, probs, grad_output, **options)
        for why, options in ATTENTION_MISTAKES.items()
    }
    return got, (q, k, v), variants


NAMES = ("grad_query", "grad_key", "grad_value")


def no_gradient_reaches_a_masked_position(ctx: Context) -> None:
    grad_output = np.zeros(SHAPE, dtype=np.float32)
    grad_output[..., ROW, :] = ctx.normal(BATCH, HEADS, HEAD_DIM)
    got, _, variants = attention_case(ctx, grad_output)
    positions = np.arange(SEQ)
    reached = {  # the positions the output at ROW depends on
        "grad_query": positions == ROW,
        "grad_key": positions <= ROW,
        "grad_value": positions <= ROW,
    }
    for index, name in enumerate(NAMES):
        array = expect_shape(got[index], SHAPE, f"attention_backward's {name}")
        if not np.isfinite(array).all():
            raise Fail(f"attention_backward's {name} contains inf or NaN.", MASK_ADDED)
        outside = np.abs(array[..., ~reached[name], :]).max(axis=(0, 1, 3))
        leaked = [int(p) for p in positions[~reached[name]][outside > 1e-6]]
        if not leaked:
            continue
        unnamed = (
            f"Only query {ROW} made the output at position {ROW}: no other query gets its gradient."
            if name == "grad_query"
            else f"The keys and values after position {ROW} were masked for it: P is 0 "
            "there, so dS is 0 there and nothing reaches them."
        )
        explanation = next(
            (why for why, result in variants.items() if close(array, result[index])), unnamed
        )
        raise Fail(
            f"Only the output at position {ROW} has a gradient, and it reads the keys and "
            f"values at positions 0..{ROW}; yet {name} at position(s) {leaked} is not 0: "
            "gradient reached a masked position.",
            explanation,
        )


def attention_output(query: np.ndarray, key: np.ndarray, value: np.ndarray) -> np.ndarray:
    return ref.attention_forward(query, key, value)[0]


def attention_gradients(ctx: Context):
    """The learner's gradients for a random dO, and the finite differences'."""

    def build():
        grad_output = ctx.normal(*SHAPE)
        got, (q, k, v), variants = attention_case(ctx, grad_output)
        want = ref.gradients(attention_output, {"query": q, "key": k, "value": v}, grad_output)
        return got, want, variants

    return ctx.once("attention", build)


def grad_value_is_probs_transposed_times_grad_output(ctx: Context) -> None:
    got, want, variants = attention_gradients(ctx)
    expect_close(
        got[2], want["value"], "attention_backward's grad_value", wrong(variants, 2), model=FD
    )


def grad_query_and_key_go_back_through_the_scale(ctx: Context) -> None:
    got, want, variants = attention_gradients(ctx)
    for index, name in ((0, "query"), (1, "key")):
        expect_close(
            got[index],
            want[name],
            f"attention_backward's grad_{name}",
            wrong(variants, index),
            model=FD,
        )


# --------------------------------------------------------------------------
# a Linear, and the whole attention block


BIAS_SUMMED = (
    "A bias is added at every position of every sequence, so its gradient is dy summed "
    "over batch and sequence: one number per output feature."
)
WEIGHT_TRANSPOSED = (
    "dW is transposed: MAX keeps a Linear's weight as [out_features, in_features], and a "
    "gradient has the layout of what it is the gradient of: dW = dy^T x."
)
LINEAR_MISTAKES = {
    "dx = dy W^T: the forward's y = x W^T already holds the transpose, so dx = dy W, "
    "[batch, seq, out] @ [out, in].": {"through_transposed": True},
    WEIGHT_TRANSPOSED: {"weight_transposed": True},
    f"db is averaged over batch and sequence, not summed. {BIAS_SUMMED}": {"bias_mean": True},
}


def expect_bias_shape(value, size: int, what: str) -> np.ndarray:
    array = to_numpy(value, what)
    if array.shape != (size,) and array.size == size:
        raise Fail(
            f"{what} has shape {list(array.shape)}, expected [{size}].",
            "The sum is right, but MAX's sum keeps the summed axis (size 1): reshape to "
            "[out_features].",
        )
    return expect_shape(
        array, (size,), what, f"It is not summed over batch and sequence. {BIAS_SUMMED}"
    )


def expect_weight_shape(value, shape: tuple[int, int], what: str) -> np.ndarray:
    array = to_numpy(value, what)
    if array.shape == shape[::-1] and shape[0] != shape[1]:
        raise Fail(
            f"{what} has shape {list(array.shape)}, expected {list(shape)}: it is transposed.",
            WEIGHT_TRANSPOSED,
        )
    return expect_shape(array, shape, what)


def linear_backward_sums_over_positions(ctx: Context) -> None:
    x = ctx.normal(BATCH, SEQ, FEATURES)
    weight, bias = ctx.normal(FEATURES, FEATURES), ctx.normal(FEATURES)
    grad_y = ctx.normal(BATCH, SEQ, FEATURES)
    result = ctx.call(
        "linear_backward", ctx.get("linear_backward"), tensor(x), tensor(weight), tensor(grad_y)
    )
    got = triple("linear_backward", result)
    want = ref.gradients(base.linear, {"x": x, "weight": weight, "bias": bias}, grad_y)
    variants = {
        why: ref.linear_backward(x, weight, grad_y, **options)
        for why, options in LINEAR_MISTAKES.items()
    }
    expect_shape(got[0], x.shape, "linear_backward's dx", "dx has the shape of x.")
    expect_weight_shape(got[1], weight.shape, "linear_backward's dW")
    expect_bias_shape(got[2], FEATURES, "linear_backward's db")
    for index, name in enumerate(("x", "weight", "bias")):
        what = f"linear_backward's gradient of {name}"
        expect_close(got[index], want[name], what, wrong(variants, index), model=FD)


MHA_SHAPES = {
    "c_attn.weight": (3 * EMBED, EMBED),
    "c_attn.bias": (3 * EMBED,),
    "c_proj.weight": (EMBED, EMBED),
    "c_proj.bias": (EMBED,),
}
MHA_MISTAKES = {
    **{
        f"dQ, dK and dV are joined in the order {', '.join(order)}: c_attn's output was split "
        "into query, key, value, so their gradients join in that order.": {"qkv_order": order}
        for order in ("qvk", "kqv", "kvq", "vqk", "vkq")
    },
    **ATTENTION_MISTAKES,
}


# Where the walk back went wrong, when the gradients before one in this order are
# right: each hint names the pieces between the last right gradient and this one.
WALK_BACK = {
    "c_proj.weight": "c_proj's backward comes first, with merged, c_proj's input, as its x, "
    "and the block's dout as its dy.",
    "c_proj.bias": "c_proj's backward comes first, with the block's dout as its dy.",
    "c_attn.weight": "c_proj's gradients are right, so its dx is too: what goes wrong comes "
    "after it, cutting that dx into heads, attention_backward, or joining dQ, dK and dV back "
    "in the layout of c_attn's output.",
    "c_attn.bias": "c_attn's weight gradient is right, so its dy is: its bias gradient is "
    "that dy summed over batch and sequence.",
    "x": "c_attn's gradients are right, so its dy is: dx is c_attn's backward with the "
    "block's x as its input.",
}


def mha_output(x: np.ndarray, **weights: np.ndarray) -> np.ndarray:
    return base.multi_head_attention(weights, x, N_HEAD)


def mha_backward_matches_finite_differences(ctx: Context) -> None:
    weights = {name: ctx.normal(*shape, std=0.3) for name, shape in MHA_SHAPES.items()}
    x, grad_output = ctx.normal(BATCH, SEQ, EMBED), ctx.normal(BATCH, SEQ, EMBED)
    got = ctx.call(
        "mha_backward",
        ctx.get("mha_backward"),
        tensor(x),
        {name: tensor(w) for name, w in weights.items()},
        tensor(grad_output),
        N_HEAD,
    )
    names = ["c_proj.weight", "c_proj.bias", "c_attn.weight", "c_attn.bias", "x"]
    if not isinstance(got, dict) or set(got) != set(names):
        keys = sorted(got) if isinstance(got, dict) else type(got).__name__
        raise Fail(
            f"mha_backward returned {keys}, expected a dict with the keys {sorted(names)}.",
            "One gradient per input of the forward, named as the weights are, and x.",
        )
    want = ref.gradients(mha_output, {"x": x, **weights}, grad_output)
    variants = {
        why: ref.mha_backward(weights, x, grad_output, N_HEAD, **options)
        for why, options in MHA_MISTAKES.items()
    }
    for name in names:
        what = f"mha_backward's gradient of {name}"
        if name.endswith("bias"):
            expect_bias_shape(got[name], MHA_SHAPES[name][0], what)
        elif name.endswith("weight"):
            expect_weight_shape(got[name], MHA_SHAPES[name], what)
        expect_close(got[name], want[name], what, wrong(variants, name), WALK_BACK[name], model=FD)


STEP = Step(
    number=26,
    required={
        "attention_forward": [],
        "softmax_backward": [],
        "attention_backward": [],
        "linear_backward": [],
        "mha_forward": [],
        "mha_backward": [],
    },
    checks=[
        Check("the softmax's backward is its Jacobian times dP", softmax_backward_is_the_jacobian),
        Check("no gradient reaches a masked position", no_gradient_reaches_a_masked_position),
        Check(
            "each value collects the outputs that read it",
            grad_value_is_probs_transposed_times_grad_output,
        ),
        Check("dQ and dK go back through the scale", grad_query_and_key_go_back_through_the_scale),
        Check(
            "a Linear's dW and db sum over batch and sequence",
            linear_backward_sums_over_positions,
        ),
        Check(
            "the projections' gradients match finite differences",
            mha_backward_matches_finite_differences,
        ),
    ],
)
