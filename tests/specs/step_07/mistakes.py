"""The mistakes step 07's checks must name: plausible learner edits of
solutions/solution_07.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
C_ATTN = "Linear(self.embed_dim, 3 * self.embed_dim, bias=True)"
SPLIT_CALL = "F.split(qkv, [self.embed_dim] * 3, axis=-1)"
MISTAKES = [
    m("k, q, v order", "return query, key, value", "return key, query, value", "This is the key"),
    m("no bias", C_ATTN, "Linear(self.embed_dim, 3 * self.embed_dim, bias=False)", "c_attn.bias"),
    m(
        "split the wrong axis",
        "[self.embed_dim] * 3, axis=-1",
        "[self.embed_dim] * 3, axis=1",
        "sequence axis",
    ),
    m(
        "two-way projection",
        "3 * self.embed_dim, bias=True",
        "2 * self.embed_dim, bias=True",
        "c_attn.weight has shape [128, 64], expected [192, 64]: c_attn is 2 * n_embd wide",
    ),
    m(
        "q, v, k unpacked",
        "query, key, value = F.split",
        "query, value, key = F.split",
        "This is the",
    ),
    m("returns a list", "return query, key, value", "return [query, key]", "tuple"),
    m("split without an axis", SPLIT_CALL, "F.split(qkv, [self.embed_dim] * 3)", "batch axis"),
    m("split into pieces of 3", SPLIT_CALL, "F.split(qkv, 3, axis=-1)", "pieces of n features"),
    m(
        "sizes a third of n_embd",
        SPLIT_CALL,
        "F.split(qkv, [self.embed_dim // 3] * 3, axis=-1)",
        "add up to 63",
    ),
    m(
        "v, k, q unpacked",
        "query, key, value = F.split",
        "value, key, query = F.split",
        "forward returns (value, key, query)",
    ),
    m(
        "c_attn sizes swapped",
        C_ATTN,
        "Linear(3 * self.embed_dim, self.embed_dim, bias=True)",
        "swapped",
    ),
    m("returns qkv whole", "return query, key, value", "return qkv", "one piece"),
    Mutant(
        "three separate projections",
        (
            (
                "self.c_attn = " + C_ATTN,
                "self.q_proj = Linear(self.embed_dim, self.embed_dim, bias=True)\n"
                "        self.k_proj = Linear(self.embed_dim, self.embed_dim, bias=True)\n"
                "        self.v_proj = Linear(self.embed_dim, self.embed_dim, bias=True)",
            ),
            ("qkv = self.c_attn(hidden_states)", "pass"),
            (
                "query, key, value = " + SPLIT_CALL,
                "query = self.q_proj(hidden_states)\n"
                "        key = self.k_proj(hidden_states)\n"
                "        value = self.v_proj(hidden_states)",
            ),
        ),
        "one Linear three times as wide",
    ),
]
