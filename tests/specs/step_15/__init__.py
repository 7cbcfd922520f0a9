"""Checks for step 15: loading a Hugging Face checkpoint.

No torch or transformers here (learners do not have them): the checkpoints are
written with safetensors' NumPy API, in Hugging Face's layout. Conv1D weights
are [in, out]. The hub's gpt2 names its tensors without the `transformer.`
prefix and carries `h.N.attn.bias` mask buffers; save_pretrained writes the
prefix and no buffers. Neither stores the tied lm_head.weight, but some
converted checkpoints do."""

from tests.checker import Check, Step

from .layout import (
    accepts_a_fit_and_names_a_missing_tensor,
    buffers_are_skipped,
    conv1d_weights_are_transposed,
    everything_is_float32,
    head_is_tied,
    names_a_tensor_of_the_wrong_shape,
    names_an_extra_tensor,
    names_get_the_prefix,
)
from .loading import load_pretrained_works, logits_match, mismatch_is_reported

STEP = Step(
    number=15,
    typical=3,  # seconds, slowest check: writing and loading three checkpoints
    required={
        "CheckpointError": [],
        "to_max_layout": [],
        "check_against": [],
        "load_into": [],
    },
    checks=[
        Check("mask buffers (h.N.attn.bias) are not loaded", buffers_are_skipped),
        Check(
            "names get the transformer. prefix where it is missing",
            names_get_the_prefix,
        ),
        Check(
            "lm_head.weight is tied to wte.weight when absent, kept when stored",
            head_is_tied,
        ),
        Check(
            "Conv1D weights are transposed to [out, in], nothing else",
            conv1d_weights_are_transposed,
        ),
        Check(
            "every tensor comes out float32 (also from float16)",
            everything_is_float32,
        ),
        Check(
            "check_against accepts a fit and names a missing tensor",
            accepts_a_fit_and_names_a_missing_tensor,
        ),
        Check(
            "check_against names a tensor of the wrong shape, with both shapes",
            names_a_tensor_of_the_wrong_shape,
        ),
        Check("check_against names an extra tensor", names_an_extra_tensor),
        Check("logits after load_into match GPT-2's, for each layout", logits_match),
        Check(
            "a checkpoint that does not fit its config.json is refused",
            mismatch_is_reported,
        ),
        Check(
            "load_pretrained builds a model from a checkpoint's config.json",
            load_pretrained_works,
        ),
    ],
)
