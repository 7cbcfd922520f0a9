"""The test suite's settings for every test and every checker it starts."""

import os

from common import max_runtime

# The checker compiles the next steps' kernels in the background after each
# check (tests/checker/prewarm.py); in the suite that would only compete with
# the tests for the CPU.
os.environ["CHECK_PREWARM"] = "0"

# pytest's workers import MAX side by side while they collect the tests; on a
# fresh install the first import builds a Mojo extension, which a second
# process must not load half-written.
max_runtime.import_mojo_extensions()
