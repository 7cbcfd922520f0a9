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
    m(
        "scale applied twice",
        SCORES,
        "scores = (q_latent @ latent.transpose(-1, -2) + q_rope @ rope_key.transpose(-1, -2))"
        " / math.sqrt(config.qk_head_dim)",
        "twice",
    ),
    Mutant(
        "only the rotary part scaled",
        (
            (SCORES, SCORES + " / math.sqrt(config.qk_head_dim)"),
            (WEIGHTS, "weights = F.softmax(scores, axis=-1)"),
        ),
        "Only the rotary part",
    ),
    Mutant(
        "only the latent part scaled",
        (
            (
                SCORES,
                "scores = q_latent @ latent.transpose(-1, -2) / math.sqrt(config.qk_head_dim)"
                " + q_rope @ rope_key.transpose(-1, -2)",
            ),
            (WEIGHTS, "weights = F.softmax(scores, axis=-1)"),
        ),
        "Only the latent part",
    ),
    m("softmax over the heads", WEIGHTS, WEIGHTS.replace("axis=-1", "axis=1"), "over the heads"),
    m(
        "key half transposed",
        "    q_latent = q_nope @ key_half\n",
        "    q_latent = q_nope @ key_half.transpose(-1, -2)\n",
        "key_half transposed",
    ),
    m(
        "value half not transposed",
        "attn_output = context @ value_half.transpose(-1, -2)",
        "attn_output = context @ value_half",
        "value_half as it is",
    ),
    Mutant(
        "values expanded before the weighted sum",
        (
            (
                "    context = weights @ latent\n",
                "    values = latent.reshape([batch, 1, -1, config.kv_lora_rank]) @ "
                "value_half.transpose(-1, -2)\n",
            ),
            (
                "    context = context.reshape([batch, heads, 1, config.kv_lora_rank])\n",
                "    weights = weights.reshape([batch, heads, 1, -1])\n",
            ),
            (
                "attn_output = context @ value_half.transpose(-1, -2)",
                "attn_output = weights @ values",
            ),
        ),
        "a value for each of the 7 tokens",
    ),
    m(
        "keys expanded with the key half",
        SCORES,
        "keys = latent.reshape([batch, 1, -1, config.kv_lora_rank]) @ "
        "key_half.transpose(-1, -2)\n"
        "    scores = (q_nope @ keys.transpose(-1, -2)).reshape([batch, heads, -1]) + "
        "q_rope @ rope_key.transpose(-1, -2)",
        "a key for each of the 7 tokens",
    ),
]
