"""Our GPT-2 architecture with every model execution timed, for the bench.

`max serve` imports this module when the bench names it with a second
`--custom-architectures` after gpt2_serving (server.start_timed):
MAX registers the two in order, and of two architectures with one name the
later serves. Its pipeline model is gpt2_serving's, plus a log: each call of
`execute` appends its start and end (monotonic nanoseconds, a clock every
process shares) to the file EXECUTION_LOG names (executions.py reads it).
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

from devtools.serve_bench.executions import EXECUTION_LOG
from gpt2_serving import gpt2_arch
from gpt2_serving import model as served


# Named as the class it extends: MAX's log names the pipeline model, and the
# session the bench records for the book shows that log as tools.serve's.
class GPT2PipelineModel(served.GPT2PipelineModel):
    def __init__(self, *args, **kwargs) -> None:
        self.execution_log = Path(os.environ[EXECUTION_LOG])  # before MAX's set-up runs
        super().__init__(*args, **kwargs)

    def execute(self, model_inputs):
        started = time.monotonic_ns()
        outputs = super().execute(model_inputs)
        ended = time.monotonic_ns()
        with open(self.execution_log, "a") as log:
            log.write(f"{started} {ended}\n")
        return outputs


ARCHITECTURES = [dataclasses.replace(gpt2_arch, pipeline_model=GPT2PipelineModel)]
