"""Test markers shared by the test modules."""

import os

import pytest

# The bfloat16 graphs of the fast model took 13+ minutes to compile on a quiet
# 2-core CPU (float32: 1-3 minutes), too long for CI: opt in with
# TEST_BFLOAT16=1 (issue 9).
bfloat16_opt_in = pytest.mark.skipif(
    not os.environ.get("TEST_BFLOAT16"), reason="bfloat16 tests: set TEST_BFLOAT16=1"
)
