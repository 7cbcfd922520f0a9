"""Test markers shared by the test modules."""

import os

import pytest

# The bfloat16 graphs took over 25 minutes to compile on a loaded 2-core CPU,
# and their tolerance is reasoned, not yet measured (issue 9): opt in with
# TEST_BFLOAT16=1 until both are settled.
bfloat16_opt_in = pytest.mark.skipif(
    not os.environ.get("TEST_BFLOAT16"), reason="bfloat16 tests: set TEST_BFLOAT16=1"
)
