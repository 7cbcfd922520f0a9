"""Checks for step 09: GPT2MultiHeadAttention."""

import math

from tests import reference as ref
from tests.checker import Check, Context, Step, expect_close, tensor
from tests.mutants import m
from tests.specs.common import BATCH, SEQ, linear_shapes, small_config
from tests.specs.step_08 import attention_mistakes

CONFIG = small_config()
E, H = CONFIG.n_embd, CONFIG.n_head
D = E // H
SHAPES = {**linear_shapes("c_attn", E, 3 * E), **linear_shapes("c_proj", E, E)}

SPLIT_WITHOUT_TRANSPOSE = (
    "The heads are cut without the transpose: reshape to [batch, seq, heads, head_dim] first, "
    "then swap the seq and heads axes."
)
MERGE_WITHOUT_TRANSPOSE = (
    "The heads are merged without the transpose: move seq back before heads "
    "([batch, seq, heads, head_dim]), then reshape to [batch, seq, n_embd]."
)


def build(ctx: Context):
    module = ctx.build("GPT2MultiHeadAttention", CONFIG)
    return module, ctx.load_weights(module, SHAPES)


def parameters(ctx: Context) -> None:
    build(ctx)


def split_heads(ctx: Context) -> None:
    module, _ = build(ctx)
    x = ctx.normal(BATCH, SEQ, E)
    out = ctx.call("_split_heads", module._split_heads, tensor(x), H, D)
    expect_close(
        out,
        ref.split_heads(x, H),
        "_split_heads(x, num_heads, head_dim)",
        {SPLIT_WITHOUT_TRANSPOSE: ref.split_heads(x, H, transpose=False)},
        hint="[batch, seq, n_embd] -> [batch, seq, heads, head_dim] -> [batch, heads, seq, head_dim]",
    )


def merge_heads(ctx: Context) -> None:
    module, _ = build(ctx)
    x = ctx.normal(BATCH, H, SEQ, D)
    out = ctx.call("_merge_heads", module._merge_heads, tensor(x), H, D)
    expect_close(
        out,
        ref.merge_heads(x),
        "_merge_heads(x, num_heads, head_dim)",
        {MERGE_WITHOUT_TRANSPOSE: ref.merge_heads(x, transpose=False)},
        hint="[batch, heads, seq, head_dim] -> [batch, seq, heads, head_dim] -> [batch, seq, n_embd]",
    )


def attn(ctx: Context) -> None:
    module, _ = build(ctx)
    q, k, v = (ctx.normal(BATCH, H, SEQ, D) for _ in range(3))
    out = ctx.call("_attn", module._attn, tensor(q), tensor(k), tensor(v))
    expect_close(
        out,
        ref.attention(q, k, v),
        "_attn(query, key, value)",
        attention_mistakes(q, k, v, E),
        hint="softmax(q @ k^T / sqrt(head_dim) + causal mask, axis=-1) @ v",
    )


def forward(ctx: Context) -> None:
    module, w = build(ctx)
    x = ctx.normal(BATCH, SEQ, E)

    def variant(**options):
        return ref.multi_head_attention(w, x, H, **options)

    mistakes = {
        SPLIT_WITHOUT_TRANSPOSE: variant(split_transpose=False),
        MERGE_WITHOUT_TRANSPOSE: variant(merge_transpose=False),
        "c_proj is not applied to the merged heads.": variant(output_projection=False),
        "The attention scores are not scaled by 1/sqrt(head_dim).": variant(scale=1.0),
        "The scores are scaled with n_embd, not head_dim.": variant(scale=1 / math.sqrt(E)),
        "The causal mask is missing.": variant(mask="none"),
        "The mask is added after the softmax.": variant(mask="after_softmax"),
        "The softmax runs over the wrong axis (use axis=-1).": variant(softmax_axis=-2),
    }
    out = ctx.call("GPT2MultiHeadAttention.forward", module, tensor(x))
    expect_close(
        out,
        variant(),
        "GPT2MultiHeadAttention(x)",
        mistakes,
        hint="c_attn -> split q, k, v -> _split_heads -> _attn -> _merge_heads -> c_proj",
    )


STEP = Step(
    number=9,
    title="Multi-head attention",
    required={
        "GPT2MultiHeadAttention": ["__init__", "_split_heads", "_merge_heads", "_attn", "forward"]
    },
    checks=[
        Check("c_attn [3*n_embd, n_embd] and c_proj [n_embd, n_embd], with biases", parameters),
        Check("_split_heads: [batch, seq, n_embd] -> [batch, heads, seq, head_dim]", split_heads),
        Check("_merge_heads: [batch, heads, seq, head_dim] -> [batch, seq, n_embd]", merge_heads),
        Check("_attn: causal scaled dot-product attention per head", attn),
        Check("forward matches GPT-2's attention", forward),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m(
        "split without transpose",
        "tensor = tensor.reshape([batch, seq_length, num_heads, attn_head_size])\n        return tensor.transpose(1, 2)",
        "return tensor.reshape([batch, num_heads, seq_length, attn_head_size])",
        "without the transpose",
    ),
    m(
        "merge without transpose",
        "tensor = tensor.transpose(1, 2)\n        batch, seq_length = tensor.shape[0], tensor.shape[1]",
        "batch, seq_length = tensor.shape[0], tensor.shape[2]",
        "without the transpose",
    ),
    m("no c_proj", "return self.c_proj(attn_output)", "return attn_output", "c_proj"),
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
]
