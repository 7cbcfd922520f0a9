"""The mistakes step 04's checks must name: plausible learner edits of
solutions/solution_04.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
C_FC = "Linear(embed_dim, intermediate_size, bias=True)"
C_PROJ = "Linear(intermediate_size, embed_dim, bias=True)"
GELU = 'hidden_states = F.gelu(hidden_states, approximate="tanh")'
RETURN = "return self.c_proj(hidden_states)"
MISTAKES = [
    m("exact GELU", 'approximate="tanh"', 'approximate="none"', "tanh approximation"),
    m("GELU's default (exact)", ', approximate="tanh")', ")", "exact (erf) GELU"),
    m("quick GELU", 'approximate="tanh"', 'approximate="quick"', "quick"),
    m("ReLU", 'F.gelu(hidden_states, approximate="tanh")', "F.relu(hidden_states)", "ReLU"),
    m("SiLU", 'F.gelu(hidden_states, approximate="tanh")', "F.silu(hidden_states)", "SiLU"),
    m("no bias on c_fc", C_FC, "Linear(embed_dim, intermediate_size, bias=False)", "has no bias"),
    m(
        "no bias on c_proj",
        C_PROJ,
        "Linear(intermediate_size, embed_dim, bias=False)",
        "bias=False",
    ),
    m("no c_proj in forward", RETURN, "return hidden_states", "c_proj is not applied"),
    m("c_fc dims swapped", C_FC, "Linear(intermediate_size, embed_dim, bias=True)", "swapped"),
    m("c_proj dims swapped", C_PROJ, "Linear(embed_dim, intermediate_size, bias=True)", "swapped"),
    Mutant(
        "c_fc and c_proj exchanged",
        (
            ("self.c_fc = " + C_FC, "self.c_fc = " + C_PROJ),
            ("self.c_proj = " + C_PROJ, "self.c_proj = " + C_FC),
        ),
        "swapped",
    ),
    m("no activation", GELU, "pass", "activation is missing"),
    m("GELU after c_proj too", RETURN, "return F.gelu(self.c_proj(hidden_states))", "after c_proj"),
    Mutant(
        "GELU after c_proj instead",
        ((GELU, "pass"), (RETURN, 'return F.gelu(self.c_proj(hidden_states), approximate="tanh")')),
        "after c_proj",
    ),
    Mutant(
        "GELU before c_fc",
        (
            ("hidden_states = self.c_fc(hidden_states)", "pass"),
            (GELU, GELU + "\n        hidden_states = self.c_fc(hidden_states)"),
        ),
        "before c_fc",
    ),
    m(
        "c_proj before c_fc",
        "hidden_states = self.c_fc(hidden_states)",
        "hidden_states = self.c_proj(hidden_states)",
        "is the order right",
    ),
    Mutant(
        "width read from config.n_inner",
        (
            (C_FC, "Linear(embed_dim, config.n_inner, bias=True)"),
            (C_PROJ, "Linear(config.n_inner, embed_dim, bias=True)"),
        ),
        "not the intermediate_size argument",
    ),
    m(
        "fixed 4x width",
        "Linear(embed_dim, intermediate_size, bias=True)\n",
        "Linear(embed_dim, 4 * embed_dim, bias=True)\n",
        "not the intermediate_size argument",
    ),
]
