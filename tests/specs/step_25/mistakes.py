"""The mistakes step 25's checks must name: plausible learner edits of
solutions/solution_25.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

SPLIT = (
    "key_half, value_half = F.split(per_head, [config.qk_nope_head_dim, config.v_head_dim], axis=1)"
)
SCORES = "scores = q_latent @ latent.transpose(-1, -2) + q_rope @ rope_key.transpose(-1, -2)"
WEIGHTS = "weights = F.softmax(scores / math.sqrt(config.qk_head_dim), axis=-1)"

MISTAKES = [
    m(
        "halves swapped",
        SPLIT,
        "value_half, key_half = F.split(per_head, [config.v_head_dim, config.qk_nope_head_dim], "
        "axis=1)",
        "swapped",
    ),
    Mutant(
        "rows read feature-major",
        (
            (
                "            config.num_attention_heads,\n"
                "            config.qk_nope_head_dim + config.v_head_dim,\n",
                "            config.qk_nope_head_dim + config.v_head_dim,\n"
                "            config.num_attention_heads,\n",
            ),
            ("    # Row block h", "    per_head = per_head.transpose(0, 1)\n    # Row block h"),
        ),
        "feature-major",
    ),
    m(
        "halves transposed",
        "    return key_half, value_half",
        "    return key_half.transpose(1, 2), value_half.transpose(1, 2)",
        "transposed",
    ),
    m(
        "scale from the latent's width",
        WEIGHTS,
        WEIGHTS.replace("qk_head_dim", "kv_lora_rank"),
        "kv_lora_rank",
    ),
    m(
        "scale from the part without position",
        WEIGHTS,
        WEIGHTS.replace("qk_head_dim", "qk_nope_head_dim"),
        "qk_nope_head_dim",
    ),
    m(
        "scores not scaled",
        WEIGHTS,
        "weights = F.softmax(scores, axis=-1)",
        "not scaled",
    ),
    m(
        "rotary scores left out",
        SCORES,
        "scores = q_latent @ latent.transpose(-1, -2)",
        "rotary part",
    ),
    m(
        "latent scores left out",
        SCORES,
        "scores = q_rope @ rope_key.transpose(-1, -2)",
        "latent part",
    ),
    Mutant(
        "keys and values expanded",
        (
            (
                "    q_latent = q_nope @ key_half\n",
                "    k_nope, values = attention.expand(latent)\n"
                "    q_latent = q_nope @ k_nope.transpose(-1, -2)\n",
            ),
            (
                "    q_latent = q_latent.reshape([batch, heads, config.kv_lora_rank])\n",
                "    q_latent = q_latent.reshape([batch, heads, latent.shape[1]])\n",
            ),
            ("scores = q_latent @ latent.transpose(-1, -2) +", "scores = q_latent +"),
            ("    context = weights @ latent\n", ""),
            (
                "    context = context.reshape([batch, heads, 1, config.kv_lora_rank])\n",
                "    weights = weights.reshape([batch, heads, 1, latent.shape[1]])\n",
            ),
            (
                "    attn_output = context @ value_half.transpose(-1, -2)",
                "    attn_output = weights @ values",
            ),
        ),
        "kv_b_proj",
    ),
    Mutant(
        "the new token missing from its own scores",
        (
            (
                SCORES,
                "scores = q_latent @ past_latent.transpose(-1, -2) + "
                "q_rope @ past_rope_key.transpose(-1, -2)",
            ),
            ("    context = weights @ latent\n", "    context = weights @ past_latent\n"),
        ),
        "missing from its own scores",
    ),
    m(
        "new token before the cached ones",
        "latent = F.concat([past_latent, latent], axis=1)",
        "latent = F.concat([latent, past_latent], axis=1)",
        "before the cached ones",
    ),
]
