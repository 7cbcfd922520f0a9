"""Checks for step 01: GPT2Config."""

import dataclasses

from tests.checker import Check, Context, Fail, Step

GPT2_124M = {
    "vocab_size": 50257,
    "n_positions": 1024,
    "n_embd": 768,
    "n_layer": 12,
    "n_head": 12,
    "layer_norm_epsilon": 1e-5,
}
FIELDS = [*GPT2_124M, "n_inner"]

# Why a default may be off, for the values people really write.
WHY = {
    ("vocab_size", 50256): "50256 is the id of <|endoftext|>, the last token; the vocabulary "
    "counts one more entry (ids 0 to 50256).",
    ("vocab_size", 50000): "50,000 is only the BPE merges: add the 256 byte tokens and "
    "<|endoftext|>.",
    ("layer_norm_epsilon", 1e-4): "`10e-5` means 10 × 10⁻⁵ = 1e-4: one in front of the "
    "exponent, 1e-5, is 10⁻⁵.",
    ("layer_norm_epsilon", 1e-6): "1e-6 is the epsilon of other models; GPT-2 was trained "
    "with 1e-5.",
}


def config_class(ctx: Context):
    return ctx.get("GPT2Config")


def is_dataclass(ctx: Context) -> None:
    cls = config_class(ctx)
    if not dataclasses.is_dataclass(cls):
        raise Fail("GPT2Config is not a dataclass.", "Decorate the class with @dataclass.")
    ctx.call("GPT2Config()", cls)


def declared_fields(ctx: Context) -> None:
    """Every hyperparameter is a dataclass field under Hugging Face's name."""
    cls = config_class(ctx)
    declared = {f.name: f for f in dataclasses.fields(cls)}
    for name in FIELDS:
        if name in declared:
            continue
        if name in vars(cls):
            raise Fail(
                f"`{name}` is a class attribute, not a dataclass field: it has no type "
                f"annotation, so GPT2Config({name}=...) is refused.",
                "The dataclass makes a field only of a name declared with a type: "
                "`name: type = default`. Keep the annotation of the skeleton.",
            )
        expected = GPT2_124M.get(name)
        renamed = [
            other
            for other, f in declared.items()
            if other not in FIELDS and expected is not None and f.default == expected
        ]
        if renamed:
            raise Fail(
                f"GPT2Config has no field `{name}`, but `{renamed[0]}` holds its value "
                f"{expected!r}: the field is renamed.",
                f"Hugging Face's config.json calls it `{name}`: keep that name so a "
                "checkpoint's config maps onto GPT2Config.",
            )
        raise Fail(
            f"GPT2Config has no field `{name}`: the line declaring it is missing.",
            "Declare every hyperparameter of the skeleton, with Hugging Face's field names, "
            "so a config.json maps onto it.",
        )


def swapped_with(config, field: str, actual) -> str | None:
    """The field whose GPT-2 value `field` holds while that field holds `field`'s."""
    for other, value in GPT2_124M.items():
        if (
            other != field
            and actual == value
            and getattr(config, other, None) == GPT2_124M[field]
            and value != GPT2_124M[field]
        ):
            return other
    return None


def defaults_are_gpt2_124m(ctx: Context) -> None:
    config = ctx.build("GPT2Config")
    for field, expected in GPT2_124M.items():
        actual = getattr(config, field)
        if actual == expected and type(actual) is not type(expected):
            raise Fail(
                f"GPT2Config().{field} is the {type(actual).__name__} {actual!r}; GPT-2's "
                f"value is the {type(expected).__name__} {expected!r}.",
                "Counts and sizes are ints (768, not 768.0): they become tensor shapes and "
                "range() bounds. The epsilon is a float.",
            )
        if actual != expected:
            other = swapped_with(config, field, actual)
            if other:
                raise Fail(
                    f"GPT2Config().{field} is {actual!r} and .{other} is "
                    f"{getattr(config, other)!r}: the two values are swapped.",
                    f"GPT-2 124M has {field} = {expected!r} and {other} = {GPT2_124M[other]!r}.",
                )
            why = WHY.get((field, actual)) or f"Look up {field} in the step's table."
            raise Fail(
                f"GPT2Config().{field} is {actual!r}, expected {expected!r} (GPT-2 124M).", why
            )


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
    if type(config.n_inner) is not int:
        raise Fail(
            f"GPT2Config().n_inner is the {type(config.n_inner).__name__} {config.n_inner!r}, "
            "expected the int 3072.",
            "It becomes a layer's width: keep it an int (a / division makes a float).",
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
    required={"GPT2Config": []},
    checks=[
        Check("GPT2Config is a dataclass", is_dataclass),
        Check("every field is declared under GPT-2's name", declared_fields),
        Check("defaults are GPT-2 124M's", defaults_are_gpt2_124m),
        Check(
            "n_inner defaults to 4 * n_embd",
            n_inner_defaults_to_four_times_n_embd,
        ),
        Check("every field can be set", fields_are_configurable),
    ],
)
