"""Checks for step 11: GPT2Block."""

from tests import reference_gpt2 as ref
from tests.checker import Check, Context, Fail, Step, expect_close, parameter_shapes, tensor
from tests.specs.model_parts import (
    BATCH,
    SEQ,
    block_shapes,
    shared_parameters,
    sized,
    small_config,
)

CONFIG = small_config()


def expect_own_parts(block, config) -> None:
    """Fail, in the block's terms, when two parts are one object or the MLP's
    width is not config.n_inner (before the name-by-name comparison)."""
    for names in shared_parameters(block):
        owners = sorted({name.split(".")[0] for name in names})
        if len(owners) > 1:
            kind = type(getattr(block, owners[0], None)).__name__
            raise Fail(
                f"{' and '.join(owners)} are the same {kind} object: {', '.join(names)} are "
                "one tensor.",
                f"Each of {', '.join(owners)} has its own weights in the checkpoint: build "
                f"each with its own {kind}(...) call instead of assigning one to the other.",
            )
    shape = parameter_shapes(block).get("mlp.c_fc.weight")
    if not shape or len(shape) != 2 or shape[1] != config.n_embd or shape[0] == config.n_inner:
        return
    if shape[0] == 4 * config.n_embd:
        raise Fail(
            f"mlp.c_fc.weight has shape {list(shape)} for a config with n_inner="
            f"{config.n_inner}: the MLP is 4 * n_embd = {shape[0]} wide inside, whatever "
            "the config says; its width is config.n_inner.",
            "4 * n_embd is only what step 01 fills in when a config leaves n_inner unset; "
            "a config that sets n_inner gets an MLP that wide.",
        )
    raise Fail(
        f"mlp.c_fc.weight has shape {list(shape)}: the MLP is "
        f"{sized(config, shape[0], 'wide')} inside; GPT-2's MLP is config.n_inner = "
        f"{config.n_inner} wide.",
        "GPT2MLP(intermediate_size, config) takes its inner width first: the width "
        "c_fc expands to, which the config holds as n_inner (4 * n_embd for GPT-2).",
    )


def build(ctx: Context, config=CONFIG):
    block = ctx.build("GPT2Block", config)
    expect_own_parts(block, config)
    return block, ctx.load_weights(block, block_shapes(config))


def parameters(ctx: Context) -> None:
    build(ctx)


def mlp_width_is_n_inner(ctx: Context) -> None:
    # GPT-2's configs leave n_inner unset (4 * n_embd); one that sets another
    # width tells config.n_inner apart from a hard-coded 4 * n_embd.
    build(ctx, small_config(n_inner=3 * CONFIG.n_embd // 2))


def forward(ctx: Context) -> None:
    block, w = build(ctx)
    x = ctx.normal(BATCH, SEQ, CONFIG.n_embd)
    eps, heads = CONFIG.layer_norm_epsilon, CONFIG.n_head

    def ln(name, h):
        return ref.layer_norm(h, w[f"{name}.weight"], w[f"{name}.bias"], eps)

    def attn(h):
        return ref.multi_head_attention(w, h, heads, "attn.")

    def mlp(h):
        return ref.mlp(w, h, "mlp.")

    def halves(first, second):
        """x through `first`, then `second`: each maps the stream to the next."""
        return second(first(x))

    after_attn = x + attn(ln("ln_1", x))
    mistakes = {
        "Only the attention half runs: add the MLP sublayer, x + mlp(ln_2(x)).": after_attn,
        "Only the MLP half runs: the attention sublayer comes first.": x + mlp(ln("ln_2", x)),
        "The MLP comes before attention; GPT-2 attends first.": halves(
            lambda h: h + mlp(ln("ln_2", h)), lambda h: h + attn(ln("ln_1", h))
        ),
        "ln_1 and ln_2 are swapped: ln_1 feeds attention, ln_2 feeds the MLP.": halves(
            lambda h: h + attn(ln("ln_2", h)), lambda h: h + mlp(ln("ln_1", h))
        ),
        "ln_2 normalizes both halves: the attention half reads ln_1(x).": halves(
            lambda h: h + attn(ln("ln_2", h)), lambda h: h + mlp(ln("ln_2", h))
        ),
        "ln_1 normalizes both halves: the MLP half reads ln_2(h).": halves(
            lambda h: h + attn(ln("ln_1", h)), lambda h: h + mlp(ln("ln_1", h))
        ),
        "The MLP reads the block's input x instead of the output of the attention half "
        "(the two halves run in parallel); GPT-2 chains them.": after_attn + mlp(ln("ln_2", x)),
        "The norms are applied after the additions (post-norm); GPT-2 is pre-norm.": halves(
            lambda h: ln("ln_1", h + attn(h)), lambda h: ln("ln_2", h + mlp(h))
        ),
        "The attention half has no residual: its output replaces x instead of being added "
        "to it.": halves(lambda h: attn(ln("ln_1", h)), lambda h: h + mlp(ln("ln_2", h))),
        "The MLP half has no residual: its output replaces h instead of being added to it.": mlp(
            ln("ln_2", after_attn)
        ),
    }
    out = ctx.run_lazily("GPT2Block.forward", block, tensor(x))
    expect_close(
        out,
        ref.block(w, x, heads, eps),
        "GPT2Block(x)",
        mistakes,
        hint="Two pre-norm residual halves in a row: attention with ln_1, then the MLP with "
        "ln_2, the second reading what the first returns.",
    )


def uses_config_eps(ctx: Context) -> None:
    config = small_config(layer_norm_epsilon=0.5)  # huge, so using the default shows
    block, w = build(ctx, config)
    x = ctx.normal(1, 3, config.n_embd, std=0.1)
    expected = ref.block(w, x, config.n_head, 0.5)

    def block_with(eps_1: float, eps_2: float):
        def ln(name, h, eps):
            return ref.layer_norm(h, w[f"{name}.weight"], w[f"{name}.bias"], eps)

        h = x + ref.multi_head_attention(w, ln("ln_1", x, eps_1), config.n_head, "attn.")
        return h + ref.mlp(w, ln("ln_2", h, eps_2), "mlp.")

    mistakes = {
        "The layer norms ignore config.layer_norm_epsilon: pass eps=... to LayerNorm.": (
            block_with(1e-5, 1e-5)
        ),
        "ln_1 ignores config.layer_norm_epsilon (ln_2 uses it): pass eps=... to both "
        "LayerNorms.": block_with(1e-5, 0.5),
        "ln_2 ignores config.layer_norm_epsilon (ln_1 uses it): pass eps=... to both "
        "LayerNorms.": block_with(0.5, 1e-5),
    }
    out = ctx.run_lazily("GPT2Block.forward", block, tensor(x))
    expect_close(out, expected, "GPT2Block(x) with layer_norm_epsilon=0.5", mistakes)


STEP = Step(
    number=11,
    required={"GPT2Block": ["__init__", "forward"]},
    checks=[
        Check("ln_1, attn, ln_2, mlp named and shaped like GPT-2's", parameters),
        Check(
            "the MLP is config.n_inner wide, also when n_inner is not 4 * n_embd",
            mlp_width_is_n_inner,
        ),
        Check("forward: x + attn(ln_1(x)), then + mlp(ln_2(.))", forward),
        Check("the layer norms use config.layer_norm_epsilon", uses_config_eps),
    ],
)
