"""The mistakes step 21's checks must name: plausible learner edits of
solutions/solution_21.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

K_PROJ = "self.k_proj = Linear(hidden, self.num_kv_heads * head_dim, bias=False)"
V_PROJ = "self.v_proj = Linear(hidden, self.num_kv_heads * head_dim, bias=False)"
NEW_KEY = "key = self._split_heads(self.k_proj(hidden_states), self.num_kv_heads)"
NEW_VALUE = "value = self._split_heads(self.v_proj(hidden_states), self.num_kv_heads)"
SCORES = "scores = query @ keys.transpose(-1, -2) / math.sqrt(self.head_dim)"

MISTAKES = [
    Mutant(
        "key and value as wide as the query",
        (
            (K_PROJ, "self.k_proj = Linear(hidden, self.num_heads * head_dim, bias=False)"),
            (V_PROJ, "self.v_proj = Linear(hidden, self.num_heads * head_dim, bias=False)"),
            (NEW_KEY, "key = self._split_heads(self.k_proj(hidden_states), self.num_heads)"),
            (NEW_VALUE, "value = self._split_heads(self.v_proj(hidden_states), self.num_heads)"),
            ("group = self.num_heads // self.num_kv_heads", "group = 1"),
        ),
        "key/value heads",
    ),
    m(
        "biases",
        "self.q_proj = Linear(hidden, self.num_heads * head_dim, bias=False)",
        "self.q_proj = Linear(hidden, self.num_heads * head_dim)",
        "have none",
    ),
    m(
        "heads tiled",
        "x = x.reshape([batch, kv_heads, 1, seq, head_dim])\n"
        "    x = x.broadcast_to([batch, kv_heads, group, seq, head_dim])",
        "x = x.reshape([batch, 1, kv_heads, seq, head_dim])\n"
        "    x = x.broadcast_to([batch, group, kv_heads, seq, head_dim])",
        "tiled",
    ),
    m(
        "heads tiled with F.tile",
        "x = x.reshape([batch, kv_heads, 1, seq, head_dim])\n"
        "    x = x.broadcast_to([batch, kv_heads, group, seq, head_dim])\n"
        "    return x.reshape([batch, kv_heads * group, seq, head_dim])",
        "return F.tile(x, [1, group, 1, 1])",
        "tiled",
    ),
    Mutant(
        "the cache stores the repeated heads",
        (
            ("keys = repeat_kv(key, group)", "key = keys = repeat_kv(key, group)"),
            ("values = repeat_kv(value, group)", "value = values = repeat_kv(value, group)"),
        ),
        "the repeated ones",
    ),
    m(
        "values rotated",
        "value = F.concat([past_value, value], axis=2)",
        "value = F.concat([past_value, apply_rope(value, cos, sin)], axis=2)",
        "values are rotated",
    ),
    m(
        "scale from the hidden size",
        SCORES,
        "scores = query @ keys.transpose(-1, -2) / math.sqrt(int(hidden_states.shape[-1]))",
        "sqrt(hidden_size)",
    ),
    m(
        "scale from the key/value width",
        SCORES,
        "scores = query @ keys.transpose(-1, -2) / math.sqrt(self.num_kv_heads * self.head_dim)",
        "num_key_value_heads * head_dim",
    ),
    m(
        "new keys before the cached ones",
        "key = F.concat([past_key, apply_rope(key, cos, sin)], axis=2)",
        "key = F.concat([apply_rope(key, cos, sin), past_key], axis=2)",
        "before the cached ones",
    ),
    m(
        "q_proj's sizes swapped",
        "self.q_proj = Linear(hidden, self.num_heads * head_dim, bias=False)",
        "self.q_proj = Linear(self.num_heads * head_dim, hidden, bias=False)",
        "in_dim and out_dim swapped",
    ),
    # held out from the checks' named mistakes: found by comparing the pieces
    m(
        "values repeated from the keys",
        "values = repeat_kv(value, group)",
        "values = repeat_kv(key, group)",
        "the heads read are the keys",
    ),
    m(
        "group axis among the positions",
        "x = x.reshape([batch, kv_heads, 1, seq, head_dim])\n"
        "    x = x.broadcast_to([batch, kv_heads, group, seq, head_dim])",
        "x = x.reshape([batch, kv_heads, seq, 1, head_dim])\n"
        "    x = x.broadcast_to([batch, kv_heads, seq, group, head_dim])",
        "none of the input heads",
    ),
    m(
        "query reshaped straight to heads first",
        "query = self._split_heads(self.q_proj(hidden_states), self.num_heads)",
        "query = self.q_proj(hidden_states).reshape(\n"
        "            [hidden_states.shape[0], self.num_heads, hidden_states.shape[1], self.head_dim]\n"
        "        )",
        "query head 0's output",
    ),
]
