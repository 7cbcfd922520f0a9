"""The parity tests of test_parity.py and test_fast.py, on an accelerator: the
same checkpoint gives transformers' logits and greedy tokens on the GPU, the
in-place KV cache equals a full recompute, and the compiled model equals the
eager one. Skipped when MAX sees no accelerator (accelerator_count() == 0)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from max.driver import CPU, accelerator_count
from max.dtype import DType

from common import max_runtime
from fast import devices as fast_devices
from fast import gpt2 as fast_gpt2
from solutions.solution_15 import load_pretrained
from tests.checker.compare import close
from tests.fixtures import hf_model, write_checkpoint

pytestmark = pytest.mark.skipif(
    accelerator_count() == 0, reason="MAX sees no accelerator on this machine"
)
max_runtime.prepare()
PROMPT = [5, 17, 3, 88, 41, 2, 9, 250, 77, 1]
# MAX's float32 kernels on a GPU round differently from the CPU's (its matmuls
# may use TF32 tensor cores, 10 mantissa bits): on an H100 the last logits
# differed from transformers' by 0.0037 at most, on logits of a few units, over
# the CPU's 1e-4 of the largest.
GPU_RTOL = 5e-3


def gpu_close(actual: np.ndarray, expected: np.ndarray) -> bool:
    return close(actual, expected, rtol=GPU_RTOL)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> tuple[object, Path]:
    hf = hf_model(initializer_range=0.2)
    return hf, write_checkpoint(tmp_path_factory.mktemp("gpu"), hf)


@pytest.fixture(scope="module")
def gpu():
    return fast_devices.device_from_name("gpu")


@pytest.fixture(scope="module")
def fast(checkpoint, gpu) -> fast_gpt2.FastGenerator:
    return fast_gpt2.FastGenerator(fast_gpt2.load(checkpoint[1], device=gpu))


def hf_logits(model, ids: list[int]) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits.numpy()[0]


def eager_logits(model, ids: list[int], device) -> np.ndarray:
    """The tutorial model (step 13), eager, on `device`."""
    from max.experimental.tensor import Tensor

    logits = model(Tensor(np.asarray([ids], dtype=np.int64)).to(device))
    return np.asarray(logits.to(CPU()).to_numpy())[0]


def test_logits_match_transformers_on_the_gpu(checkpoint, fast) -> None:
    hf, _ = checkpoint
    ours, theirs = fast.logits(PROMPT), hf_logits(hf, PROMPT)[-1]
    assert gpu_close(ours, theirs), np.abs(ours - theirs).max()


def test_greedy_tokens_match_transformers_on_the_gpu(checkpoint, fast) -> None:
    hf, _ = checkpoint
    with torch.no_grad():
        theirs = hf.generate(torch.tensor([PROMPT]), max_new_tokens=12, do_sample=False)
    assert list(fast.generate(PROMPT, 12)) == theirs[0, len(PROMPT) :].tolist()


def test_kv_cache_matches_full_recompute_on_the_gpu(checkpoint, fast) -> None:
    hf, _ = checkpoint
    fast.logits(PROMPT[:6])
    for position in range(6, len(PROMPT)):
        ours = fast.logits([PROMPT[position]], start=position)
        theirs = hf_logits(hf, PROMPT[: position + 1])[-1]
        assert gpu_close(ours, theirs), (position, np.abs(ours - theirs).max())


def test_compiled_matches_eager_on_the_gpu(checkpoint, fast, gpu) -> None:
    """Each eager op compiles for the GPU on first use (16 s for the first one
    on an H200 with a cold cache): minutes, once per machine."""
    from max.experimental.tensor import default_dtype

    _, directory = checkpoint
    # MAX's default dtype on an accelerator is bfloat16: the float32
    # checkpoint would not load into the parameters it makes.
    with default_dtype(DType.float32):
        eager = load_pretrained(directory).to(gpu)
        expected = eager_logits(eager, PROMPT, gpu)[-1]
    assert gpu_close(fast.logits(PROMPT), expected)


def test_bfloat16_on_the_gpu_is_close_to_float32(checkpoint, fast, gpu) -> None:
    from tests.test_fast import BF16_LOGIT_TOLERANCE

    bf16 = fast_gpt2.FastGenerator(fast_gpt2.load(checkpoint[1], dtype=DType.bfloat16, device=gpu))
    reference = fast.logits(PROMPT)
    spread = np.abs(reference - reference.mean()).max()
    assert np.abs(bf16.logits(PROMPT) - reference).max() / spread < BF16_LOGIT_TOLERANCE
