"""The test suite's settings for every test and every checker it starts."""

import os

# The checker compiles the next steps' kernels in the background after each
# check (tests/checker/prewarm.py); in the suite that would only compete with
# the tests for the CPU.
os.environ["CHECK_PREWARM"] = "0"
