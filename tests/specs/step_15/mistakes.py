"""The mistakes step 15's checks must name: plausible learner edits of
solutions/solution_15.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from __future__ import annotations

from tests.mistakes import Mutant, m

MISTAKES = [
    m(
        "lm_head tied with `or`",
        '"lm_head.weight" not in state and "transformer.wte.weight" in state',
        '"lm_head.weight" not in state or "transformer.wte.weight" in state',
        "(`and`)",
    ),
    m(
        "given load_config drops a field",
        "if k in known}",
        'if k in known and k != "n_layer"}',
        "given code",
    ),
    m(
        "no transpose",
        "array = np.ascontiguousarray(array.T)",
        "array = np.ascontiguousarray(array)",
        "[in, out]",
    ),
    m(
        "every 2-D weight transposed",
        'if name.endswith(".weight") and any(f".{layer}." in name for layer in CONV1D_LAYERS):',
        "if array.ndim == 2:",
        "only the Conv1D weights",
    ),
    m(
        "attn.c_proj left out",
        'CONV1D_LAYERS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")',
        'CONV1D_LAYERS = ("attn.c_attn", "mlp.c_fc", "mlp.c_proj")',
        "square",
    ),
    m(
        "transposed view, not contiguous",
        "array = np.ascontiguousarray(array.T)",
        "array = array.T",
        "contiguous",
    ),
    m(
        "no prefix",
        'name = "transformer." + name',
        "pass",
        "prefix",
    ),
    m(
        "prefix on lm_head too",
        'if not name.startswith(("transformer.", "lm_head.")):',
        'if not name.startswith("transformer."):',
        "lm_head",
    ),
    m(
        "buffers kept",
        "continue  # a mask buffer",
        "pass  # a mask buffer",
        "buffer",
    ),
    m(
        "head not tied",
        'state["lm_head.weight"] = state["transformer.wte.weight"]',
        "pass",
        "tied",
    ),
    m(
        "float64",
        "np.asarray(array, dtype=np.float32)",
        "np.asarray(array, dtype=np.float64)",
        "float32",
    ),
    m(
        "dtype kept",
        "np.asarray(array, dtype=np.float32)",
        "np.asarray(array)",
        "float16",
    ),
    m("shapes not compared", "if found != tuple(shape):", "if False:", "shape"),
    m(
        "missing tensor not caught",
        "if name not in state:",
        "if False:",
        "name not in state",
    ),
    m("extra tensors ignored", "if extra:", "if False:", "set(state) - set(expected)"),
    m(
        "message without the name",
        'f"the checkpoint has no tensor {name} (shape {list(shape)})."',
        '"a tensor is missing."',
        "does not name",
    ),
    m(
        "shape message without the shapes",
        'f"tensor {name} has shape {list(found)} in the checkpoint, but the "\n'
        '                f"model (from config.json) expects {list(shape)}."',
        'f"tensor {name} has the wrong shape."',
        "leaves out the shape the checkpoint has ([64, 256]) and the shape the model expects",
    ),
    m(
        "shape message without the checkpoint's shape",
        "has shape {list(found)} in the checkpoint, but the",
        "does not fit: the",
        "leaves out the shape the checkpoint has",
    ),
    m(
        "own head replaced by wte",
        '"lm_head.weight" not in state and "transformer.wte.weight" in state',
        '"transformer.wte.weight" in state',
        "replaced it by the token embedding table",
    ),
    m(
        "every bias skipped",
        "if name.endswith(NOT_PARAMETERS):",
        'if name.endswith("bias"):',
        "dropped",
    ),
    m(
        "buffers matched with `in`",
        "if name.endswith(NOT_PARAMETERS):",
        'if "attn.bias" in name or "masked_bias" in name:',
        "dropped transformer.h.0.attn.c_attn.bias",
    ),
    m(
        "reshaped, not transposed",
        "array = np.ascontiguousarray(array.T)",
        "array = array.reshape(array.shape[::-1])",
        "reshaped, not transposed",
    ),
    Mutant(
        "float32 only for the Conv1D weights",
        (
            ("np.asarray(array, dtype=np.float32)", "np.asarray(array)"),
            ("np.ascontiguousarray(array.T)", "np.ascontiguousarray(array.T, dtype=np.float32)"),
        ),
        "from a float16 checkpoint",
    ),
    m(
        "shapes compared by size",
        "if found != tuple(shape):",
        "if np.prod(found) != np.prod(shape):",
        "accepted transformer.h.0.mlp.c_fc.weight",
    ),
]
