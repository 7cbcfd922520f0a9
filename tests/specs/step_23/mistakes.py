"""The mistakes step 23's checks must name: plausible learner edits of
solutions/solution_23.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

ATTENTION_ADD = "hidden_states = hidden_states + attn_output"
MLP_ADD = "hidden_states = hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))"
TIE = "if config.tie_word_embeddings:\n            self.lm_head.weight"

MISTAKES = [
    m(
        "one norm for both halves",
        MLP_ADD,
        "hidden_states = hidden_states + self.mlp(self.input_layernorm(hidden_states))",
        "its own norm",
    ),
    Mutant(
        "the MLP reads the layer's input",
        (
            (
                "attn_output, key, value = self.self_attn(",
                "residual = hidden_states\n        attn_output, key, value = self.self_attn(",
            ),
            (
                MLP_ADD,
                "hidden_states = hidden_states + self.mlp(self.post_attention_layernorm(residual))",
            ),
        ),
        "one after the other",
    ),
    m(
        "attention replaces the stream",
        ATTENTION_ADD,
        "hidden_states = attn_output",
        "replaces the stream",
    ),
    m(
        "MLP replaces the stream",
        MLP_ADD,
        "hidden_states = self.mlp(self.post_attention_layernorm(hidden_states))",
        "replaces the stream",
    ),
    m(
        "attention on the raw stream",
        "self.input_layernorm(hidden_states), past_key, past_value",
        "hidden_states, past_key, past_value",
        "reads the raw stream",
    ),
    m("always tied", TIE, "if True:\n            self.lm_head.weight", "has a head of its own"),
    m("never tied", TIE, "if False:\n            self.lm_head.weight", "tensor of its own"),
    m(
        "every layer reads the first layer's cache",
        "layer(hidden_states, past_keys[index], past_values[index])",
        "layer(hidden_states, past_keys[0], past_values[0])",
        "its own layer of the cache",
    ),
    m(
        "every layer reads the embeddings",
        "hidden_states, key, value = layer(hidden_states, past_keys[index], past_values[index])",
        "_, key, value = layer(hidden_states, past_keys[index], past_values[index])",
        "It read the embeddings",
    ),
    m(
        "the keys' cache given as the values'",
        "layer(hidden_states, past_keys[index], past_values[index])",
        "layer(hidden_states, past_keys[index], past_keys[index])",
        "read layer 0's key cache as its value cache",
    ),
    m(
        "the tied head not filled",
        'state.setdefault("lm_head.weight", state["model.embed_tokens.weight"])',
        "pass",
        "has none either",
    ),
    m(
        "an untied checkpoint without a head accepted",
        'elif not config.tie_word_embeddings and "lm_head.weight" not in state:',
        "elif False:",
        "was accepted",
    ),
    m(
        "a vague error",
        '"the checkpoint has no lm_head.weight, and config.json says the head is not tied "\n'
        '            "to the embeddings (tie_word_embeddings: false)."',
        '"the checkpoint is incomplete"',
        "should name the missing tensor",
    ),
    m(
        "an untied head refused even when stored",
        'elif not config.tie_word_embeddings and "lm_head.weight" not in state:',
        'elif not config.tie_word_embeddings or "lm_head.weight" not in state:',
        "raised CheckpointError",
    ),
    m(
        "post-attention norm without the config's eps",
        "self.post_attention_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)",
        "self.post_attention_layernorm = RMSNorm(config.hidden_size)",
        "post_attention_layernorm uses RMSNorm's default eps",
    ),
]
