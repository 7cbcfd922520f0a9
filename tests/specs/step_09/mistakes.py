"""The mistakes step 09's checks must name: plausible learner edits of
solutions/solution_09.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

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
    Mutant(
        "mask in a hard-coded float32",
        (
            ("import math\n", "import math\n\nfrom max.dtype import DType\n"),
            ("dtype=scores.dtype", "dtype=DType.float32"),
        ),
        "hard-coded dtype (DType.float32)",
    ),
]
