"""Code the learner runs but does not write, run end to end here: step 17's
compile_cached and generate_cached (compiled decoding with a KV cache gives
eager greedy decoding's tokens). The learner's copies in steps/ equal these
(tests/test_skeletons.py); step 15's checker runs the learner's own
load_config and load_pretrained."""

from __future__ import annotations

import numpy as np
import pytest

from common import max_runtime
from solutions.solution_17 import CachedGPT2LMHeadModel, compile_cached, generate_cached
from tests import reference_gpt2 as ref
from tests.checker import Context
from tests.specs.model_parts import small_config, tied_lm_weights

max_runtime.prepare()
CONFIG = small_config(n_layer=2, n_positions=32)
PROMPT = [3, 14, 15, 92, 65]


@pytest.fixture(scope="module")
def cached_model():
    ctx = Context(step=None, path=None, module=None)  # type: ignore[arg-type]
    # Token and position both steer the prediction: the greedy tokens vary.
    weights = tied_lm_weights(ctx, CONFIG, wte_scale=3, wpe_scale=12)
    model = CachedGPT2LMHeadModel(CONFIG)
    model.load_state_dict(weights)
    return model, {name: array.astype(np.float64) for name, array in weights.items()}


def test_compiled_cached_greedy_matches_gpt2(cached_model) -> None:
    model, weights = cached_model
    eps = CONFIG.layer_norm_epsilon
    want = ref.greedy_generate(weights, PROMPT, 6, CONFIG.n_layer, CONFIG.n_head, eps)
    assert len(set(want)) > 2  # a loop that never moves on cannot match by luck
    forward = compile_cached(model)
    assert list(generate_cached(forward, CONFIG, PROMPT, 6)) == want
    sampling = dict(do_sample=True, temperature=2.0, top_k=20, seed=3)
    compiled = list(generate_cached(forward, CONFIG, PROMPT, 5, **sampling))
    eager = list(generate_cached(model, CONFIG, PROMPT, 5, **sampling))
    assert compiled == eager
    assert compiled != list(generate_cached(model, CONFIG, PROMPT, 5, **{**sampling, "seed": 4}))
