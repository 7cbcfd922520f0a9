"""Checks for step 09: GPT2MultiHeadAttention."""

import math
import re

import numpy as np

from tests import reference as ref
from tests.checker import Check, Context, Fail, Step, expect_close, tensor, to_numpy
from tests.mistakes import Mutant, m
from tests.specs.common import BATCH, SEQ, linear_shapes, small_config
from tests.specs.step_07 import split_failure
from tests.specs.step_08 import attention_mistakes
from tests.specs.step_08 import raised as attention_raised

CONFIG = small_config()
E, H = CONFIG.n_embd, CONFIG.n_head
D = E // H
SHAPES = {**linear_shapes("c_attn", E, 3 * E), **linear_shapes("c_proj", E, E)}
# Every size differs (2, 7, 4, 16, 64), so a shape says which axis is where.
AXES = {BATCH: "batch", SEQ: "seq", H: "heads", D: "head_dim", E: "n_embd", 3 * E: "3 * n_embd"}
HEADS_LAYOUT = "[batch, heads, seq, head_dim]"
MERGED_LAYOUT = "[batch, seq, n_embd]"

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


# Hint ladders: what to look at; the API or the shapes; the line.
INIT_LINES = (
    "```python\nself.c_attn = Linear(self.embed_dim, 3 * self.embed_dim, bias=True)\n"
    "self.c_proj = Linear(self.embed_dim, self.embed_dim, bias=True)\n```"
)
SPLIT_LINES = (
    "```python\ntensor = tensor.reshape([batch, seq_length, num_heads, attn_head_size])\n"
    "return tensor.transpose(1, 2)\n```"
)
MERGE_LINES = (
    "```python\ntensor = tensor.transpose(1, 2)\n"
    "batch, seq_length = tensor.shape[0], tensor.shape[1]\n"
    "return tensor.reshape([batch, seq_length, num_heads * attn_head_size])\n```"
)
ATTN_LINES = (
    "```python\nscores = query @ key.transpose(-1, -2)\n"
    "scores = scores / math.sqrt(self.head_dim)\n"
    "seq_length = query.shape[-2]\n"
    "scores = scores + causal_mask(seq_length, 0, dtype=scores.dtype, device=scores.device)\n"
    "weights = F.softmax(scores, axis=-1)\n"
    "return weights @ value\n```"
)
FORWARD_LINES = (
    "```python\nquery, key, value = F.split(self.c_attn(hidden_states), [self.embed_dim] * 3, "
    "axis=-1)\n"
    "query = self._split_heads(query, self.num_heads, self.head_dim)\n"
    "key = self._split_heads(key, self.num_heads, self.head_dim)\n"
    "value = self._split_heads(value, self.num_heads, self.head_dim)\n"
    "attn_output = self._attn(query, key, value)\n"
    "attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)\n"
    "return self.c_proj(attn_output)\n```"
)

PARAMETERS_HINTS = {
    "has no bias": (
        "A projection was built without its bias. Both of GPT-2's attention projections add "
        "one, and the checkpoint has `c_attn.bias` and `c_proj.bias` to load.",
        "`Linear(in_dim, out_dim, bias=...)` has a `bias` of shape `[out_dim]` unless built "
        "with `bias=False`.",
        INIT_LINES,
    ),
    "swapped": (
        "A weight comes out transposed: the layer's input and output sizes are exchanged. "
        "`c_attn` goes from the hidden state to three times as wide; `c_proj` from the merged "
        "heads back to the hidden state.",
        "MAX's `Linear(in_dim, out_dim)` stores its weight as `[out_dim, in_dim]`: "
        "`c_attn.weight` is `[3 * n_embd, n_embd]`, `c_proj.weight` `[n_embd, n_embd]`.",
        INIT_LINES,
    ),
    "": (
        "Two projections, named as in the checkpoint: `c_attn` makes query, key and value at "
        "once (step 07), `c_proj` mixes the merged heads. Both have a bias.",
        "`Linear(in_dim, out_dim, bias=...)`: `c_attn` from `embed_dim` to `3 * embed_dim`, "
        "`c_proj` from `embed_dim` to `embed_dim`.",
        INIT_LINES,
    ),
}

SPLIT_HINTS = {
    "[head_dim, heads]": (
        "The last axis was cut in the wrong order. A token's features are laid out head by "
        "head: head 0 owns the first `head_dim` of them, head 1 the next `head_dim`. Work it on "
        "the page's toy token of 6 features and 2 heads.",
        "`Tensor.reshape` reads the numbers in memory order, so cutting `n_embd` into "
        "`[heads, head_dim]` gives each head a block of neighbours; `[head_dim, heads]` deals "
        "them out one by one like cards.",
        SPLIT_LINES,
    ),
    "without the transpose": (
        "The reshape went straight to the 4-D shape. The shape is right, but reshape reads "
        "memory in order: \"head 0\" gets token 0's features, then token 1's... The split is "
        "two moves: cut the features, then move the heads axis.",
        "First `[batch, seq, n_embd] -> [batch, seq, heads, head_dim]` with `Tensor.reshape`, "
        "which only regroups the last axis; then `Tensor.transpose(dim1, dim2)` on axes 1 and "
        "2 gives `[batch, heads, seq, head_dim]`.",
        SPLIT_LINES,
    ),
    "": (
        "`_split_heads` is two moves: cut each token's features into heads, then bring the "
        "heads axis in front of the sequence, so each head is a `[seq, head_dim]` matrix. The "
        "message names the axes you ended up with.",
        "`Tensor.reshape(shape)` to `[batch, seq, heads, head_dim]` (a new shape for the same "
        "numbers, read in memory order), then `Tensor.transpose(dim1, dim2)` to swap axes 1 "
        "and 2.",
        SPLIT_LINES,
    ),
}

MERGE_HINTS = {
    "[head_dim, heads]": (
        "The heads' outputs are interleaved feature by feature. Merging puts head 0's "
        "`head_dim` outputs first, then head 1's: the exact inverse of the split.",
        "Before the reshape the tensor must be `[batch, seq, heads, head_dim]`; "
        "`Tensor.reshape` then reads each token's heads one after the other.",
        MERGE_LINES,
    ),
    "": (
        "`_merge_heads` undoes `_split_heads`, in the opposite order: first move `seq` back in "
        "front of `heads`, then flatten the heads into one feature axis.",
        "`Tensor.transpose(dim1, dim2)` on axes 1 and 2: `[batch, heads, seq, head_dim] -> "
        "[batch, seq, heads, head_dim]`; read `batch` and `seq` from *that* shape; "
        "`Tensor.reshape` to `[batch, seq, heads * head_dim]`.",
        MERGE_LINES,
    ),
}

ATTN_SCALE_HINTS = (
    "The scale is wrong or missing. Each head compares `head_dim`-wide vectors, so its "
    "scores are divided by the square root of `head_dim`, the width of one head, not of the "
    "whole model.",
    "`self.head_dim` is a plain Python int here (`n_embd // n_head`), so `math.sqrt` takes it "
    "directly; dividing a tensor by a float works elementwise.",
    ATTN_LINES,
)
ATTN_MASK_HINTS = (
    "The causal mask is missing or in the wrong place: it is *added* to the scores *before* "
    "the softmax, so the future's weights are exactly 0.",
    "`causal_mask(sequence_length, num_tokens, dtype=..., device=...)` from step 02, with no "
    "cached tokens and the scores' dtype and device; `[seq, seq]`, it broadcasts over batch "
    "and heads.",
    ATTN_LINES,
)
ATTN_AXIS_HINTS = (
    "The softmax normalizes the wrong axis: each query spreads its attention over the keys, "
    "so each row of the weights sums to 1.",
    "`F.softmax(x, axis)`: the scores are `[batch, heads, query, key]`, the keys are the last "
    "axis.",
    ATTN_LINES,
)
ATTN_HINTS = {
    "max dim": (
        "A size read from a tensor's shape is a MAX `Dim`, not a Python number, and "
        "`math.sqrt` cannot take it. The class already holds the head width as a number.",
        "`self.head_dim` is `n_embd // n_head`, a plain int computed in `__init__`: "
        "`math.sqrt` takes it as it is.",
        ATTN_LINES,
    ),
    "attention weights": (
        "`_attn` returns the attention weights: the last stage, mixing the values with them, "
        "is missing.",
        "`[.., seq, seq] @ [.., seq, head_dim] -> [.., seq, head_dim]`: row i of the output "
        "is the weighted sum of the values row i of the weights asks for.",
        ATTN_LINES,
    ),
    "transposed": (
        "The scores are the queries against the keys: entry `(i, j)` is query `i` against key "
        "`j`, so the rows are queries.",
        "`[.., seq, head_dim] @ [.., head_dim, seq] -> [.., seq, seq]`: the key with its last "
        "two axes swapped (`Tensor.transpose(dim1, dim2)`) goes on the right.",
        ATTN_LINES,
    ),
    "scale": ATTN_SCALE_HINTS,
    "mask": ATTN_MASK_HINTS,
    "axis": ATTN_AXIS_HINTS,
    "": (
        "`_attn` is step 08's attention as a method: compare, scale, mask, mix. It runs on "
        "`[batch, heads, seq, head_dim]` tensors, every head at once.",
        "Scores `[.., seq, head_dim] @ [.., head_dim, seq] -> [.., seq, seq]` (key's last two "
        "axes swapped with `Tensor.transpose`); `F.softmax(x, axis)` over the keys; weights "
        "`@` values `-> [.., seq, head_dim]`.",
        ATTN_LINES,
    ),
}

FORWARD_HINTS = {
    "c_proj is not applied": (
        "The heads are merged but never mixed: `c_proj` is the last stage of `forward`. "
        "After the merge, each head's output sits in its own `head_dim` features; `c_proj` lets "
        "every output feature draw on every head.",
        "`c_proj` is a `Linear(n_embd, n_embd)`: call it on the merged `[batch, seq, n_embd]` "
        "tensor and return what it gives.",
        FORWARD_LINES,
    ),
    "still split into heads": (
        "`c_proj` got the attention's output as it comes out of `_attn`, one `[seq, head_dim]` "
        "matrix per head. The heads go back side by side before the projection.",
        "`_merge_heads(tensor, num_heads, attn_head_size)` turns `[batch, heads, seq, "
        "head_dim]` into `[batch, seq, n_embd]`, the input `c_proj` expects.",
        FORWARD_LINES,
    ),
    "wrong way round": (
        "The split and merge methods take `(tensor, num_heads, attn_head_size)`, in that "
        "order. With the two sizes exchanged you get 16 heads of 4 features instead of 4 "
        "of 16.",
        "`self.num_heads` is `config.n_head`, `self.head_dim` is `n_embd // n_head`: pass them "
        "in the order of the signature, in every call.",
        FORWARD_LINES,
    ),
    "[head_dim, heads]": SPLIT_HINTS["[head_dim, heads]"],
    "heads are cut": SPLIT_HINTS["without the transpose"],
    "heads are merged": MERGE_HINTS[""],
    "f.split": (
        "`F.split` cut `c_attn`'s output along the wrong axis or with the wrong sizes: query, "
        "key and value sit side by side along the features (step 07).",
        "`F.split(x, split_sizes, axis)`: three pieces of `embed_dim` along the last axis.",
        FORWARD_LINES,
    ),
    "query and key": (
        "Query, key and value come out of `c_attn` in that order (step 07): the first "
        "`n_embd` features are the query.",
        "`F.split` returns the pieces in the order they sit along the axis: unpack them in "
        "that order.",
        FORWARD_LINES,
    ),
    "scale": ATTN_SCALE_HINTS,
    "mask": ATTN_MASK_HINTS,
    "axis": ATTN_AXIS_HINTS,
    "": (
        "`forward` chains what you wrote: project with `c_attn`, cut into query, key and "
        "value, split each into heads, attend, merge, project with `c_proj`. The shape table "
        "on the page gives every stage.",
        "`[batch, seq, n_embd]` -> `c_attn` -> `[batch, seq, 3 * n_embd]` -> `F.split(x, "
        "split_sizes, axis)` -> three `[batch, seq, n_embd]` -> `_split_heads` each -> "
        "`_attn` -> `_merge_heads` -> `c_proj` -> `[batch, seq, n_embd]`.",
        FORWARD_LINES,
    ),
}

STEP = Step(
    number=9,
    required={
        "GPT2MultiHeadAttention": ["__init__", "_split_heads", "_merge_heads", "_attn", "forward"]
    },
    checks=[
        Check(
            "c_attn [3*n_embd, n_embd] and c_proj [n_embd, n_embd], with biases",
            parameters,
            PARAMETERS_HINTS,
        ),
        Check(
            "_split_heads: [batch, seq, n_embd] -> [batch, heads, seq, head_dim]",
            split_heads,
            SPLIT_HINTS,
        ),
        Check(
            "_merge_heads: [batch, heads, seq, head_dim] -> [batch, seq, n_embd]",
            merge_heads,
            MERGE_HINTS,
        ),
        Check("_attn: causal scaled dot-product attention per head", attn, ATTN_HINTS),
        Check("forward matches GPT-2's attention", forward, FORWARD_HINTS),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
SPLIT_RESHAPE = "tensor = tensor.reshape([batch, seq_length, num_heads, attn_head_size])"
SPLIT_BODY = SPLIT_RESHAPE + "\n        return tensor.transpose(1, 2)"
MERGE_TRANSPOSE = "tensor = tensor.transpose(1, 2)\n        batch, seq_length"
SPLIT_CALLS = tuple(
    (
        f"{name} = self._split_heads({name}, self.num_heads, self.head_dim)",
        f"{name} = self._split_heads({name}, self.head_dim, self.num_heads)",
    )
    for name in ("query", "key", "value")
)
MISTAKES = [
    m(
        "split without transpose",
        SPLIT_BODY,
        "return tensor.reshape([batch, num_heads, seq_length, attn_head_size])",
        "without the transpose",
    ),
    m(
        "merge without transpose",
        "tensor = tensor.transpose(1, 2)\n        batch, seq_length = tensor.shape[0], tensor.shape[1]",
        "batch, seq_length = tensor.shape[0], tensor.shape[2]",
        "without the transpose",
    ),
    m(
        "no c_proj",
        "return self.c_proj(attn_output)",
        "return attn_output",
        "c_proj is not applied",
    ),
    m(
        "no scale",
        "scores = scores / math.sqrt(self.head_dim)",
        "scores = scores",
        "not scaled",
    ),
    m("scale by n_embd", "math.sqrt(self.head_dim)", "math.sqrt(self.embed_dim)", "n_embd"),
    m(
        "no mask",
        "scores = scores + causal_mask(",
        "_unused = scores + causal_mask(",
        "causal mask",
    ),
    m(
        "softmax over queries",
        "F.softmax(scores, axis=-1)",
        "F.softmax(scores, axis=-2)",
        "wrong axis",
    ),
    m(
        "c_proj without bias",
        "self.c_proj = Linear(self.embed_dim, self.embed_dim, bias=True)",
        "self.c_proj = Linear(self.embed_dim, self.embed_dim, bias=False)",
        "c_proj.bias",
    ),
    m(
        "c_attn without bias",
        "Linear(self.embed_dim, 3 * self.embed_dim, bias=True)",
        "Linear(self.embed_dim, 3 * self.embed_dim, bias=False)",
        "c_attn has no bias",
    ),
    m(
        "split as [head_dim, heads]",
        SPLIT_BODY,
        "tensor = tensor.reshape([batch, seq_length, attn_head_size, num_heads])\n"
        "        return tensor.permute([0, 3, 1, 2])",
        "[head_dim, heads] instead of [heads, head_dim]",
    ),
    m(
        "split as [head_dim, heads], then transposed",
        SPLIT_RESHAPE,
        "tensor = tensor.reshape([batch, seq_length, attn_head_size, num_heads])",
        "that is [batch, head_dim, seq, heads]",
    ),
    m(
        "split forgets the transpose",
        "return tensor.transpose(1, 2)",
        "return tensor",
        "that is [batch, seq, heads, head_dim]",
    ),
    m(
        "split transposes seq and head_dim",
        "return tensor.transpose(1, 2)",
        "return tensor.transpose(1, 3)",
        "the transpose swapped the wrong axes",
    ),
    m(
        "merge transposes seq and head_dim",
        MERGE_TRANSPOSE,
        "tensor = tensor.transpose(2, 3)\n        batch, seq_length",
        "transpose swapped seq and head_dim",
    ),
    m(
        "merge as [head_dim, heads]",
        MERGE_TRANSPOSE,
        "tensor = tensor.permute([0, 2, 3, 1])\n        batch, seq_length",
        "merged as [head_dim, heads]",
    ),
    m(
        "merge forgotten",
        "        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)\n",
        "",
        "still split into heads",
    ),
    Mutant(
        "num_heads and head_dim swapped",
        (
            *SPLIT_CALLS,
            (
                "self._merge_heads(attn_output, self.num_heads, self.head_dim)",
                "self._merge_heads(attn_output, self.head_dim, self.num_heads)",
            ),
        ),
        "wrong way round",
    ),
    m(
        "query and key swapped",
        "query, key, value = F.split(",
        "key, query, value = F.split(",
        "query and key are swapped",
    ),
    m(
        "split q, k, v along the sequence",
        "[self.embed_dim] * 3, axis=-1)",
        "[self.embed_dim] * 3, axis=1)",
        "sequence axis",
    ),
]
