"""The mistakes step 24's checks must name: plausible learner edits of
solutions/solution_24.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

KV_A = """self.kv_a_proj_with_mqa = Linear(
            hidden, config.kv_lora_rank + config.qk_rope_head_dim, bias=False
        )"""
QUERY_PATH = "query = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))"
Q_SPLIT = """q_nope, q_rope = F.split(
            query.transpose(1, 2), [config.qk_nope_head_dim, config.qk_rope_head_dim], axis=-1
        )"""
KV_SPLIT = """k_nope, value = F.split(
            expanded.transpose(1, 2), [config.qk_nope_head_dim, config.v_head_dim], axis=-1
        )"""
SCORES = "scores = query @ key.transpose(-1, -2) / math.sqrt(config.qk_head_dim)"

MISTAKES = [
    m(
        "biases",
        "self.q_a_proj = Linear(hidden, config.q_lora_rank, bias=False)",
        "self.q_a_proj = Linear(hidden, config.q_lora_rank)",
        "have none",
    ),
    m(
        "a rotary key per head",
        KV_A,
        "self.kv_a_proj_with_mqa = Linear(\n"
        "            hidden, config.kv_lora_rank + heads * config.qk_rope_head_dim, bias=False\n"
        "        )",
        "shared by every head",
    ),
    m(
        "the rotary key normalised with the latent",
        "self.kv_a_layernorm = RMSNorm(config.kv_lora_rank)",
        "self.kv_a_layernorm = RMSNorm(config.kv_lora_rank + config.qk_rope_head_dim)",
        "normalises the rotary key",
    ),
    m(
        "kv_b_proj makes rotary features too",
        "heads * (config.qk_nope_head_dim + config.v_head_dim),\n            bias=False,",
        "heads * (config.qk_head_dim + config.v_head_dim),\n            bias=False,",
        "carries no position",
    ),
    m(
        "q_a_layernorm skipped",
        QUERY_PATH,
        "query = self.q_b_proj(self.q_a_proj(hidden_states))",
        "q_a_layernorm is not applied",
    ),
    m(
        "latent not normalised",
        "        latent = self.kv_a_layernorm(latent)\n",
        "",
        "not normalised",
    ),
    m(
        "rotary part taken from the front",
        Q_SPLIT,
        "q_rope, q_nope = F.split(\n"
        "            query.transpose(1, 2), [config.qk_rope_head_dim, config.qk_nope_head_dim], "
        "axis=-1\n        )",
        "front of each head's query",
    ),
    m(
        "value before key in kv_b_proj's block",
        KV_SPLIT,
        "value, k_nope = F.split(\n"
        "            expanded.transpose(1, 2), [config.v_head_dim, config.qk_nope_head_dim], "
        "axis=-1\n        )",
        "value then key",
    ),
    m(
        "rope_interleave ignored",
        "        if self.config.rope_interleave:\n            x = deinterleave(x)\n",
        "",
        "rope_interleave",
    ),
    m("scale from v_head_dim", SCORES, SCORES.replace("qk_head_dim", "v_head_dim"), "sqrt(16)"),
    m(
        "scale from the part without position",
        SCORES,
        SCORES.replace("qk_head_dim", "qk_nope_head_dim"),
        "sqrt(16)",
    ),
    m(
        "the key's halves swapped",
        "key = F.concat([k_nope, k_rope], axis=-1)",
        "key = F.concat([k_rope, k_nope], axis=-1)",
        "other order",
    ),
    Mutant(
        "the cache holds the expanded keys and values",
        (
            (
                "return self.o_proj(attn_output), latent, rope_key",
                "return self.o_proj(attn_output), key, value",
            ),
        ),
        "head axis",
    ),
    Mutant(
        "the raw latent cached, normalised when read",
        (
            ("        latent = self.kv_a_layernorm(latent)\n", ""),
            (
                "k_nope, value = self.expand(latent)",
                "k_nope, value = self.expand(self.kv_a_layernorm(latent))",
            ),
        ),
        "before kv_a_layernorm",
    ),
    m(
        "the rotary key never turned",
        "        rope_key = self.rotate(rope_key, positions)\n",
        "",
        "never turned",
    ),
    m(
        "the query's rotary part never turned",
        "        q_rope = self.rotate(q_rope, positions)\n",
        "",
        "never turned",
    ),
    m(
        "kv_b_proj's output cut into heads feature-major",
        "[batch, total, self.num_heads, config.qk_nope_head_dim + config.v_head_dim]\n        )",
        "[batch, total, config.qk_nope_head_dim + config.v_head_dim, self.num_heads]\n"
        "        ).transpose(2, 3)",
        "expand's k_nope differs",
    ),
    m(
        "positions restart after a cache",
        "num_cached,\n            num_cached + seq_length,",
        "0,\n            seq_length,",
        "positions 0, 1",
    ),
    m(
        "new tokens before the cached ones",
        "latent = F.concat([past_latent, latent], axis=1)",
        "latent = F.concat([latent, past_latent], axis=1)",
        "before the cached ones",
    ),
]
