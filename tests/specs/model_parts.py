"""What several specs share about GPT-2's parts: the small config they build
(common/sizes.py says why its sizes), parameter shapes, embedding tables.
"""

from common.gpt2_shapes import (
    block_shapes,
    layer_norm_shapes,
    linear_shapes,
    lm_shapes,
    model_shapes,
)
from common.sizes import SMALL_GPT2
from solutions.solution_01 import GPT2Config

# The shape tables live in common (the local random checkpoints are written in
# them too); the specs take them from here, beside the rest.
__all__ = [
    "block_shapes",
    "layer_norm_shapes",
    "linear_shapes",
    "lm_shapes",
    "model_shapes",
]

BATCH, SEQ = 2, 7


def small_config(**overrides: float) -> GPT2Config:
    return GPT2Config(**{**SMALL_GPT2, **overrides})


def tied_lm_weights(
    ctx, config: GPT2Config, wte_scale: float = 1.0, wpe_scale: float = 1.0
) -> dict:
    """GPT-2-like weights for lm_shapes(config), the head tied to wte as in GPT-2.

    wte_scale > 1 makes the logits peaked, so greedy decoding picks varied
    tokens instead of repeating one. With the head tied, a large wte alone
    makes the model predict the token it just saw; a larger wpe on top makes
    the prediction depend on the position too, so the greedy continuation
    changes as the context grows.
    """
    weights = ctx.weights_for(lm_shapes(config))
    weights["transformer.wte.weight"] *= wte_scale
    weights["transformer.wpe.weight"] *= wpe_scale
    weights["lm_head.weight"] = weights["transformer.wte.weight"]  # one matrix
    return weights


# -- Embedding tables (steps 05 and 06) -----------------------------------------

CONFIG_SIZES = ("vocab_size", "n_positions", "n_embd", "n_inner", "n_head", "n_layer")


def config_field_of(config: GPT2Config, size: int) -> str | None:
    """The config field that holds `size` ("config.n_positions"), if one does."""
    for name in CONFIG_SIZES:
        if getattr(config, name, None) == size:
            return f"config.{name}"
    return None


def sized(config: GPT2Config, size: int, unit: str) -> str:
    """`size` `unit`, and in brackets the config field that holds the size, if
    one does: "1024 rows (config.n_positions)"."""
    field = config_field_of(config, size)
    return f"{size} {unit}" + (f" ({field})" if field else "")


def build_embeddings(ctx, name: str, config: GPT2Config):
    """ctx.build(name, config), saying why Embedding(rows, width) raises."""
    from tests.checker import Fail

    try:
        return ctx.build(name, config)
    except Fail as failure:
        if "Embedding" in failure.message and "positional argument" in failure.message:
            raise Fail(
                failure.message,
                "Embedding's width is keyword-only: the first argument is the number of "
                "rows, the width is passed as dim=...",
            ) from failure
        raise


def expect_tables(module, config: GPT2Config, tables: dict[str, tuple[str, str]]) -> None:
    """Fail, naming the config fields involved, when a table is not an Embedding
    of [rows, n_embd]. `tables`: attribute -> (the config field counting its rows,
    what one row stands for). Missing attributes and transposed tables are left
    to expect_parameters, which names them."""
    from tests.checker import Fail
    from tests.checker.engine import parameter_shapes

    objects = {attribute: getattr(module, attribute, None) for attribute in tables}
    for attribute, table in objects.items():
        kind = type(table).__name__
        if table is not None and hasattr(table, "parameters") and kind != "Embedding":
            raise Fail(
                f"{attribute} is a {kind}, not an Embedding.",
                "An id is a row number, not a vector to multiply: an Embedding holds the "
                "table and returns the rows at the ids it is called with.",
            )
    shared = [
        a
        for a in objects
        if objects[a] is not None and a != "wte" and objects[a] is objects.get("wte")
    ]
    if shared:
        raise Fail(
            f"{shared[0]} is the same Embedding object as wte: one table serves both.",
            f"{shared[0]} is a table of its own, with its own rows (one per "
            f"{tables[shared[0]][1]}): build a second Embedding.",
        )
    shapes = parameter_shapes(module)
    for attribute, (rows_field, row_of) in tables.items():
        name = f"{attribute}.weight"
        rows, width = getattr(config, rows_field), config.n_embd
        shape = shapes.get(name)
        if shape is None or len(shape) != 2 or shape in ((rows, width), (width, rows)):
            continue
        said = []
        if shape[0] != rows:
            said.append(
                f"{sized(config, shape[0], 'rows')}, it needs one per {row_of}: "
                f"config.{rows_field} = {rows}"
            )
        if shape[1] != width:
            said.append(
                f"rows {sized(config, shape[1], 'wide')}, each row is config.n_embd = {width} wide"
            )
        raise Fail(
            f"{name} has shape {list(shape)}, expected {list((rows, width))}: "
            + "; ".join(said)
            + ".",
            "Embedding(num_rows, dim=width) holds a [num_rows, width] table: the first "
            "argument counts the rows, dim is the width of each.",
        )


def lookup_failure(failure, tables: str):
    """A Fail that says why an Embedding lookup raised, or None when it is
    something else. `tables` describes the tables and their sizes, for the
    out-of-range case."""
    import re

    from tests.checker import Fail

    message = failure.message
    if "Gather" in message and "integer" in message:
        dtype = re.search(r"indices = TensorValue\(dtype=(\w+)", message)
        said = f"{dtype.group(1)} indices" if dtype else "indices that are not integers"
        return Fail(
            message,
            f"An Embedding was called with {said}: a lookup takes integer row numbers. "
            "Tensor.arange makes float32 numbers unless it is given an integer dtype "
            "(DType.int64, the dtype of the token ids).",
        )
    if "__gather" in message:
        return Fail(
            message,
            f"A lookup read past the end of its table: every index must be a row number "
            f"of the table it is looked up in. {tables}",
        )
    return None


def build_with_tables(ctx, name: str, config: GPT2Config, tables: dict, shapes: dict):
    """Build `name`, check its Embedding tables, load weights of `shapes`:
    (module, weights)."""
    module = build_embeddings(ctx, name, config)
    expect_tables(module, config, tables)
    return module, ctx.load_weights(module, shapes)


def call_with_lookups(ctx, name: str, module, ids, tables: str, other=None, lazy=False):
    """ctx.call(name, module, tensor(ids)) (ctx.run_lazily if lazy), for a module
    that looks ids up in Embedding tables: a failing lookup is explained with
    `tables` (see lookup_failure); `other(failure)` may explain any other failure."""
    from tests.checker import Fail, tensor

    try:
        return (ctx.run_lazily if lazy else ctx.call)(name, module, tensor(ids))
    except Fail as failure:
        explained = lookup_failure(failure, tables)
        if explained is None and other is not None:
            explained = other(failure)
        raise (explained or failure) from failure


# -- Shared objects (steps 11 and 12) --------------------------------------------


def shared_parameters(module) -> list[list[str]]:
    """Groups of parameter names that are one and the same tensor: a module put
    in two places (`self.ln_2 = self.ln_1`, `[block] * n`) lists its parameters
    under each name, and loading a checkpoint writes them all into one tensor."""
    groups: dict[int, list[str]] = {}
    for name, parameter in module.parameters:
        groups.setdefault(id(parameter), []).append(name)
    return [names for names in groups.values() if len(names) > 1]
