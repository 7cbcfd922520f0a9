"""The mistakes step 17's checks must name: plausible learner edits of
solutions/solution_17.py, each with a phrase the failing check's message
or hint must contain (tests/test_checkers.py, devtools/mutate)."""

from tests.mistakes import Mutant, m

# Plausible learner mistakes: each must fail a check whose message or hint
# contains `expect` (tests/test_checkers.py; the edits apply to the solution).
KEY_LINE = (
    "key = F.concat([past_key, self._split_heads(key, self.num_heads, self.head_dim)], axis=2)"
)
VALUE_LINE = "[past_value, self._split_heads(value, self.num_heads, self.head_dim)], axis=2"
VALUE_STATEMENT = f"value = F.concat(\n            {VALUE_LINE}\n        )"
NEW_KEY = "self._split_heads(key, self.num_heads, self.head_dim)"
NEW_VALUE = "self._split_heads(value, self.num_heads, self.head_dim)"
MISTAKES = [
    m(
        "positions restart at 0",
        "num_cached, num_cached + input_ids.shape[-1],",
        "0, input_ids.shape[-1],",
        "got positions [0]",
    ),
    m(
        "positions stop at seq",
        "num_cached, num_cached + input_ids.shape[-1],",
        "num_cached, input_ids.shape[-1],",
        "positions",
    ),
    m("cache not appended", KEY_LINE, f"key = {NEW_KEY}", "different lengths"),
    Mutant(
        "cache replaced, not appended",
        ((KEY_LINE, f"key = {NEW_KEY}"), (VALUE_STATEMENT, f"value = {NEW_VALUE}")),
        "replaced, not appended",
    ),
    Mutant(
        "new keys before the cached ones",
        (
            (KEY_LINE, f"key = F.concat([{NEW_KEY}, past_key], axis=2)"),
            (VALUE_LINE, f"[{NEW_VALUE}, past_value], axis=2"),
        ),
        "new keys before the cached ones",
    ),
    m(
        "only the keys before the cached ones",
        KEY_LINE,
        f"key = F.concat([{NEW_KEY}, past_key], axis=2)",
        "new keys before the cached ones",
    ),
    Mutant(
        "cache grown along the heads axis",
        ((KEY_LINE, KEY_LINE.replace("axis=2", "axis=1")), (VALUE_LINE, VALUE_LINE[:-1] + "1")),
        "sequence axis, 2",
    ),
    m(
        "mask ignores the cache",
        "seq_length, int(num_cached), dtype=",
        "seq_length, 0, dtype=",
        "cover the cached tokens",
    ),
    m(
        "no causal mask",
        "scores = scores + causal_mask(\n"
        "                seq_length, int(num_cached), dtype=scores.dtype, device=scores.device\n"
        "            )",
        "scores = scores",
        "causal mask is missing",
    ),
    m(
        "returns the old cache",
        "return logits, F.stack(keys, axis=0), F.stack(values, axis=0)",
        "return logits, past_keys, past_values",
        "did not grow",
    ),
    m(
        "the block returns the cache it was given",
        "return hidden_states, key, value",
        "return hidden_states, past_key, past_value",
        "did not grow",
    ),
    m(
        "layers stacked along axis 1",
        "return logits, F.stack(keys, axis=0), F.stack(values, axis=0)",
        "return logits, F.stack(keys, axis=1), F.stack(values, axis=1)",
        "stacked along axis 1",
    ),
    m(
        "keys and values swapped",
        "return logits, F.stack(keys, axis=0), F.stack(values, axis=0)",
        "return logits, F.stack(values, axis=0), F.stack(keys, axis=0)",
        "keys and values are swapped",
    ),
    m(
        "whole sequence fed again",
        "input_ids = np.asarray([[next_id]], dtype=np.int64)  # only the new token",
        "input_ids = np.concatenate([input_ids, [[next_id]]], axis=1)",
        "Feed the prompt once",
    ),
    m(
        "cache not passed on",
        "logits, past_keys, past_values = forward(Tensor(input_ids), past_keys, past_values)",
        "logits, _, _ = forward(Tensor(input_ids), past_keys, past_values)",
        "returned by the previous call",
    ),
    m(
        "every layer reads layer 0's cache",
        "block(hidden_states, past_keys[index], past_values[index])",
        "block(hidden_states, past_keys[0], past_values[0])",
        "layer 0's cache",
    ),
]
