"""The mistakes step 16's checks must name: plausible learner edits of
solutions/solution_16.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import m

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
MISTAKES = [
    m("returns the eager model", "return model.compile(input_type)", "return model", "Module"),
    m(
        "an eager wrapper",
        "return model.compile(input_type)",
        "return lambda ids: model(ids)",
        "compiled graph",
    ),
    m(
        "returns forward",
        "return model.compile(input_type)",
        "return model.forward",
        "forward method",
    ),
    m(
        "compiled but not returned",
        "return model.compile(input_type)",
        "model.compile(input_type)",
        "did not return the compiled graph",
    ),
    m("float token ids", "TensorType(DType.int64,", "TensorType(DType.float32,", "int64"),
    m("int32 token ids", "TensorType(DType.int64,", "TensorType(DType.int32,", "int64"),
    m(
        "no input type",
        "return model.compile(input_type)",
        "return model.compile()",
        "no input type",
    ),
    m(
        "types in a list",
        "return model.compile(input_type)",
        "return model.compile([input_type])",
        "list of types",
    ),
    m("one axis only", '["batch", "seq"]', '["seq"]', "1 dimension(s)"),
    m("fixed length", '["batch", "seq"]', '["batch", 5]', "seq dimension is fixed at 5"),
    m("fixed batch", '["batch", "seq"]', '[1, "seq"]', "batch dimension is fixed at 1"),
    m("one name for both", '["batch", "seq"]', '["seq", "seq"]', "same name"),
]
