"""Checks for step 01: GPT2Config."""

import dataclasses

from tests.checker import Check, Context, Fail, Step
from tests.mistakes import Mutant, m

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


# Hint ladders: what to look at; the API or the shapes; the line.
DATACLASS_HINTS = (
    "`GPT2Config` must be a dataclass: the decorator above the class turns its annotated "
    "names into constructor arguments with defaults. Is it still there?",
    "`from dataclasses import dataclass`, then `@dataclass` on the line above `class "
    "GPT2Config:`. `dataclasses.is_dataclass(GPT2Config)` must be True.",
    "```python\n@dataclass\nclass GPT2Config:\n    ...\n```",
)

FIELDS_HINTS = {
    "class attribute": (
        "A name assigned in the class body without a type is a plain class attribute: "
        "`GPT2Config()` still sees it, but the generated `__init__` does not take it as an "
        "argument, so a smaller model cannot set it.",
        "The dataclass makes a field only of `name: type = default`. Put the annotation "
        "back (`int` for counts and sizes, `float` for the epsilon).",
        "```python\nn_layer: int = 12\n```\n(the same form for every field: name, type, default)",
    ),
    "renamed": (
        "The value is there under another name. Other libraries say `hidden_size`, "
        "`num_layers` or `max_position_embeddings`; GPT-2's config.json says `n_embd`, "
        "`n_layer`, `n_positions`.",
        "Field names are what maps a checkpoint's config.json onto the class, key by key: "
        "use the names of the skeleton (and of the step's table).",
        "```python\nvocab_size: int = 50257\nn_positions: int = 1024\nn_embd: int = 768\n"
        "n_layer: int = 12\nn_head: int = 12\n```",
    ),
    "": (
        "A hyperparameter of the skeleton is not declared any more. Every one of the seven "
        "names is read by a later step.",
        "The fields are `vocab_size`, `n_positions`, `n_embd`, `n_layer`, `n_head`, "
        "`n_inner` and `layer_norm_epsilon`, each declared as `name: type = default`.",
        "```python\nvocab_size: int = 50257\nn_positions: int = 1024\nn_embd: int = 768\n"
        "n_layer: int = 12\nn_head: int = 12\nn_inner: int | None = None\n"
        "layer_norm_epsilon: float = 1e-5\n```",
    ),
}

DEFAULTS_HINTS = {
    "swapped": (
        "Two defaults hold each other's value. Read each field's meaning in the step's "
        "table: positions count tokens of context, n_embd counts features.",
        "`n_positions` is the longest sequence (1024 tokens); `n_embd` the width of a hidden "
        "state (768 features).",
        "```python\nn_positions: int = 1024\nn_embd: int = 768\n```",
    ),
    "vocab_size": (
        "The vocabulary is made of three parts: the byte-pair merges, the single bytes, and "
        "one special token that ends a text.",
        "50,000 merges + 256 byte tokens + 1 `<|endoftext|>`. Ids run from 0 to the size "
        "minus one.",
        "```python\nvocab_size: int = 50257\n```",
    ),
    "layer_norm_epsilon": (
        "The epsilon is a small number added to the variance in every layer norm; it has "
        "to be the one GPT-2 was trained with.",
        "One times ten to the minus five, written as a float literal; `10e-5` is ten times larger.",
        "```python\nlayer_norm_epsilon: float = 1e-5\n```",
    ),
    "": (
        "Compare the value the message names with GPT-2 124M's in the step's table, and its "
        "type: counts and sizes are ints, the epsilon a float.",
        "1024 positions, 768 features, 12 blocks, 12 heads, a vocabulary of "
        "50,000 + 256 + 1 entries, epsilon one times ten to the minus five.",
        "```python\nvocab_size: int = 50257\nn_positions: int = 1024\nn_embd: int = 768\n"
        "n_layer: int = 12\nn_head: int = 12\n...\nlayer_norm_epsilon: float = 1e-5\n```",
    ),
}

N_INNER_HINTS = {
    "n_inner=100": (
        "An `n_inner` passed by the caller is overwritten. `__post_init__` fills it in only "
        "when it was left unset.",
        "Keep the `if` of the skeleton: only a `None` is replaced.",
        "```python\nif self.n_inner is None:\n    self.n_inner = 4 * self.n_embd\n```",
    ),
    "n_embd=64": (
        "The MLP width follows the hidden width of *this* config: a toy config with "
        "`n_embd=64` gets 256, not GPT-2's 3072.",
        "Inside `__post_init__`, `self` is the new config: read its `n_embd` and multiply by four.",
        "```python\nself.n_inner = 4 * self.n_embd\n```",
    ),
    "": (
        "`n_inner` defaults to `None` (as in GPT-2's config.json); `__post_init__` turns that "
        "into the real width, four times the hidden width, as an int.",
        "The dataclass calls `__post_init__(self)` right after `__init__`; assign the "
        "attribute on `self`, computed from `self.n_embd`, with ints only.",
        "```python\nif self.n_inner is None:\n    self.n_inner = 4 * self.n_embd\n```",
    ),
}

CONFIGURABLE_HINTS = (
    "A value passed to `GPT2Config(...)` does not come back from the field: something "
    "overwrites it after `__init__`, or it is not a field.",
    "Only `n_inner` may be changed in `__post_init__`, and only when it is `None`; every "
    "other field keeps what the caller gave.",
    "```python\ndef __post_init__(self) -> None:\n    if self.n_inner is None:\n"
    "        self.n_inner = 4 * self.n_embd\n```",
)

STEP = Step(
    number=1,
    required={"GPT2Config": []},
    runs_max=False,
    checks=[
        Check("GPT2Config is a dataclass", is_dataclass, hints=DATACLASS_HINTS),
        Check("every field is declared under GPT-2's name", declared_fields, hints=FIELDS_HINTS),
        Check("defaults are GPT-2 124M's", defaults_are_gpt2_124m, hints=DEFAULTS_HINTS),
        Check(
            "n_inner defaults to 4 * n_embd",
            n_inner_defaults_to_four_times_n_embd,
            hints=N_INNER_HINTS,
        ),
        Check("every field can be set", fields_are_configurable, hints=CONFIGURABLE_HINTS),
    ],
)

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m("vocab off by one", "vocab_size: int = 50257", "vocab_size: int = 50256", "<|endoftext|>"),
    m("vocab merges only", "vocab_size: int = 50257", "vocab_size: int = 50000", "256 byte"),
    m(
        "eps 1e-6",
        "layer_norm_epsilon: float = 1e-5",
        "layer_norm_epsilon: float = 1e-6",
        "layer_norm_epsilon",
    ),
    m(
        "eps written 10e-5",
        "layer_norm_epsilon: float = 1e-5",
        "layer_norm_epsilon: float = 10e-5",
        "10e-5",
    ),
    m("n_inner hard-coded", "self.n_inner = 4 * self.n_embd", "self.n_inner = 3072", "n_embd=64"),
    m("n_inner always overwritten", "if self.n_inner is None:", "if True:", "n_inner=100"),
    m(
        "n_inner a float",
        "self.n_inner = 4 * self.n_embd",
        "self.n_inner = self.n_embd / 0.25",
        "keep it an int",
    ),
    m("not a dataclass", "@dataclass\nclass", "class", "dataclass"),
    m("n_head 16", "n_head: int = 12", "n_head: int = 16", "n_head"),
    m(
        "eps zero",
        "layer_norm_epsilon: float = 1e-5",
        "layer_norm_epsilon: float = 0",
        "layer_norm_epsilon",
    ),
    m("n_embd a float", "n_embd: int = 768", "n_embd: int = 768.0", "the float 768.0"),
    Mutant(
        "n_positions and n_embd swapped",
        (
            ("n_positions: int = 1024", "n_positions: int = 768"),
            ("n_embd: int = 768", "n_embd: int = 1024"),
        ),
        "swapped",
    ),
    m("n_layer not annotated", "n_layer: int = 12", "n_layer = 12", "not a dataclass field"),
    m(
        "n_positions forgotten",
        "    n_positions: int = 1024  # longest sequence the position table covers\n",
        "",
        "no field `n_positions`",
    ),
    Mutant(
        "n_embd renamed hidden_size",
        (
            ("n_embd: int = 768", "hidden_size: int = 768"),
            ("4 * self.n_embd", "4 * self.hidden_size"),
        ),
        "renamed",
    ),
]
