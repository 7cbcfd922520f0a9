"""Checks for step 01: GPT2Config."""

import dataclasses

from tests.checker import Check, Context, Fail, Step
from tests.mutants import m

GPT2_124M = {
    "vocab_size": 50257,
    "n_positions": 1024,
    "n_embd": 768,
    "n_layer": 12,
    "n_head": 12,
    "layer_norm_epsilon": 1e-5,
}


def is_dataclass(ctx: Context) -> None:
    config_class = ctx.get("GPT2Config")
    if not dataclasses.is_dataclass(config_class):
        raise Fail("GPT2Config is not a dataclass.", "Decorate the class with @dataclass.")
    ctx.call("GPT2Config()", config_class)


def defaults_are_gpt2_124m(ctx: Context) -> None:
    config = ctx.build("GPT2Config")
    for field, expected in GPT2_124M.items():
        if not hasattr(config, field):
            raise Fail(
                f"GPT2Config has no field `{field}`.",
                "Use Hugging Face's field names so a config.json maps onto it.",
            )
        actual = getattr(config, field)
        if actual != expected or type(actual) is not type(expected):
            raise Fail(f"GPT2Config().{field} is {actual!r}, expected {expected!r} (GPT-2 124M).")


def n_inner_defaults_to_four_times_n_embd(ctx: Context) -> None:
    config = ctx.build("GPT2Config")
    if getattr(config, "n_inner", None) != 4 * 768:
        raise Fail(
            f"GPT2Config().n_inner is {getattr(config, 'n_inner', None)!r}, expected 3072.",
            "Set n_inner to 4 * n_embd in __post_init__ when it is None.",
        )
    small = ctx.build("GPT2Config", n_embd=64, n_head=4)
    if small.n_inner != 256:
        raise Fail(
            f"GPT2Config(n_embd=64).n_inner is {small.n_inner!r}, expected 256.",
            "Compute it from the instance's n_embd, not a hard-coded 3072.",
        )
    custom = ctx.build("GPT2Config", n_inner=100)
    if custom.n_inner != 100:
        raise Fail(
            f"GPT2Config(n_inner=100).n_inner is {custom.n_inner!r}, expected 100.",
            "Only fill in n_inner when it was left as None.",
        )


def fields_are_configurable(ctx: Context) -> None:
    config = ctx.build(
        "GPT2Config",
        vocab_size=100,
        n_positions=32,
        n_embd=64,
        n_layer=2,
        n_head=4,
        layer_norm_epsilon=1e-6,
    )
    for field, value in [
        ("vocab_size", 100),
        ("n_positions", 32),
        ("n_embd", 64),
        ("n_layer", 2),
        ("n_head", 4),
        ("layer_norm_epsilon", 1e-6),
    ]:
        if getattr(config, field) != value:
            raise Fail(
                f"GPT2Config({field}={value!r}).{field} is {getattr(config, field)!r}.",
                "Declare each value as a dataclass field with a default.",
            )


STEP = Step(
    number=1,
    title="Model configuration",
    required={"GPT2Config": []},
    checks=[
        Check("GPT2Config is a dataclass", is_dataclass),
        Check("defaults are GPT-2 124M's", defaults_are_gpt2_124m),
        Check("n_inner defaults to 4 * n_embd", n_inner_defaults_to_four_times_n_embd),
        Check("every field can be set", fields_are_configurable),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m("vocab off by one", "vocab_size: int = 50257", "vocab_size: int = 50256", "vocab_size"),
    m(
        "eps 1e-6",
        "layer_norm_epsilon: float = 1e-5",
        "layer_norm_epsilon: float = 1e-6",
        "layer_norm_epsilon",
    ),
    m("n_inner hard-coded", "self.n_inner = 4 * self.n_embd", "self.n_inner = 3072", "n_inner"),
    m("n_inner always overwritten", "if self.n_inner is None:", "if True:", "n_inner=100"),
    m("not a dataclass", "@dataclass\nclass", "class", "dataclass"),
    m("n_head 16", "n_head: int = 12", "n_head: int = 16", "n_head"),
    m(
        "eps zero",
        "layer_norm_epsilon: float = 1e-5",
        "layer_norm_epsilon: float = 0",
        "layer_norm_epsilon",
    ),
]
