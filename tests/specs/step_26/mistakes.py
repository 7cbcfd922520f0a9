"""The mistakes step 26's checks must name: plausible learner edits of
solutions/solution_26.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

INNER = "inner = (grad_probs * probs).sum(axis=-1)"
DS = "return probs * (grad_probs - inner)"
SCORES = "grad_scores = softmax_backward(probs, grad_probs) * scale"
BIAS = "grad_bias = flat_grad.sum(axis=0).reshape([out_features])"

MISTAKES = [
    m("rowsum on the wrong axis", INNER, INNER.replace("-1", "-2"), "down the columns"),
    m("rowsum of dP alone", INNER, "inner = grad_probs.sum(axis=-1)", "dP alone"),
    m("the rowsum term left out", DS, "return probs * grad_probs", "rowsum term is missing"),
    m(
        "P on dP only: gradient into masked positions",
        DS,
        "return probs * grad_probs - inner",
        "masked positions",
    ),
    m("no factor P", DS, "return grad_probs - inner", "flows into the masked positions"),
    m(
        "dV missing its transpose",
        "grad_value = probs.T @ grad_output",
        "grad_value = probs @ grad_output",
        "dV = P dO",
    ),
    m("the scale forgotten on the way back", SCORES, SCORES.removesuffix(" * scale"), "forgotten"),
    m("the scale divided", SCORES, SCORES.replace("* scale", "/ scale"), "sqrt(head_dim)"),
    m(
        "the scale twice",
        "grad_query = grad_scores @ key",
        "grad_query = grad_scores @ key * scale",
        "twice",
    ),
    m(
        "dK missing a transpose",
        "grad_key = grad_scores.T @ query",
        "grad_key = grad_scores @ query",
        "dK is missing a transpose",
    ),
    m(
        "dQ transposed instead",
        "grad_query = grad_scores @ key",
        "grad_query = grad_scores.T @ key",
        "belongs to dK",
    ),
    m(
        "dQ and dK swapped",
        "return grad_query, grad_key, grad_value",
        "return grad_key, grad_query, grad_value",
        "swapped",
    ),
    Mutant(
        "the mask added on the way back",
        (
            (
                SCORES,
                SCORES + "\n    grad_scores = grad_scores + causal_mask("
                "int(query.shape[-2]), 0, dtype=query.dtype, device=query.device)",
            ),
        ),
        "mask",
    ),
    m(
        "dx through W^T",
        "grad_x = grad_y @ weight",
        "grad_x = grad_y @ weight.T",
        "already holds the transpose",
    ),
    m(
        "dW transposed",
        "grad_weight = flat_grad.T @ flat_x",
        "grad_weight = flat_x.T @ flat_grad",
        "dW is transposed",
    ),
    m("db summed over the sequence only", BIAS, "grad_bias = grad_y.sum(axis=1)", "not summed"),
    m("db not summed at all", BIAS, "grad_bias = grad_y", "not summed"),
    m("db averaged", BIAS, BIAS.replace(".sum(", ".mean("), "averaged"),
    m("db keeps the summed axis", BIAS, "grad_bias = flat_grad.sum(axis=0)", "keeps the summed"),
    m(
        "query, key and value gradients joined out of order",
        "(grad_query, grad_key, grad_value)], axis=-1)",
        "(grad_key, grad_query, grad_value)], axis=-1)",
        "joined in the order",
    ),
]
