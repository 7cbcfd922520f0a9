"""The mistakes step 11's checks must name: plausible learner edits of
solutions/solution_11.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
ATTN_HALF = "hidden_states = pre_norm_residual(hidden_states, self.ln_1, self.attn)"
MLP_HALF = "return pre_norm_residual(hidden_states, self.ln_2, self.mlp)"
LN_2 = "self.ln_2 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)"
MISTAKES = [
    m("no MLP half", MLP_HALF, "return hidden_states", "Only the attention half"),
    m(
        "ln_2 for both halves",
        "pre_norm_residual(hidden_states, self.ln_1, self.attn)",
        "pre_norm_residual(hidden_states, self.ln_2, self.attn)",
        "ln_2 normalizes both halves",
    ),
    Mutant(
        "norms swapped",
        (
            (ATTN_HALF, "hidden_states = pre_norm_residual(hidden_states, self.ln_2, self.attn)"),
            (MLP_HALF, "return pre_norm_residual(hidden_states, self.ln_1, self.mlp)"),
        ),
        "ln_1 and ln_2 are swapped",
    ),
    m(
        "default eps",
        "self.ln_1 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)",
        "self.ln_1 = LayerNorm(config.n_embd)",
        "layer_norm_epsilon",
    ),
    m("ln_2 default eps", LN_2, "self.ln_2 = LayerNorm(config.n_embd)", "ln_2 ignores"),
    m(
        "MLP width n_embd",
        "GPT2MLP(config.n_inner, config)",
        "GPT2MLP(config.n_embd, config)",
        "the MLP is 64 wide (config.n_embd) inside",
    ),
    Mutant(
        "MLP first",
        (
            ("        " + ATTN_HALF + "\n", ""),
            (
                MLP_HALF,
                "hidden_states = pre_norm_residual(hidden_states, self.ln_2, self.mlp)\n"
                "        return pre_norm_residual(hidden_states, self.ln_1, self.attn)",
            ),
        ),
        "MLP comes before attention",
    ),
    m(
        "MLP width written as 4 * n_embd",
        "GPT2MLP(config.n_inner, config)",
        "GPT2MLP(4 * config.n_embd, config)",
        "its width is config.n_inner",
    ),
    m("renamed attention", "self.attn = ", "self.attention = ", "parameter names"),
    m("one shared layer norm", LN_2, "self.ln_2 = self.ln_1", "same LayerNorm object"),
    Mutant(
        "post-norm",
        (
            (ATTN_HALF, "hidden_states = self.ln_1(hidden_states + self.attn(hidden_states))"),
            (MLP_HALF, "return self.ln_2(hidden_states + self.mlp(hidden_states))"),
        ),
        "post-norm",
    ),
    m(
        "no residual around attention",
        ATTN_HALF,
        "hidden_states = self.attn(self.ln_1(hidden_states))",
        "attention half has no residual",
    ),
    m(
        "no residual around the MLP",
        MLP_HALF,
        "return self.mlp(self.ln_2(hidden_states))",
        "MLP half has no residual",
    ),
    Mutant(
        "halves in parallel",
        (
            ("        " + ATTN_HALF + "\n", ""),
            (
                MLP_HALF,
                "return (\n            hidden_states\n"
                "            + self.attn(self.ln_1(hidden_states))\n"
                "            + self.mlp(self.ln_2(hidden_states))\n        )",
            ),
        ),
        "instead of the output of the attention half",
    ),
]
