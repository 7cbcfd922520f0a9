"""Which device a learner's code makes its new tensors on, told apart on a
machine with only a CPU.

Such a machine has one device, which MAX hands out as one object, so a
tensor made with `device=CPU()` or with no device at all lands on the same
CPU as the input. `arange_devices` has one input tensor report a CPU object
of its own as its `.device` and records, with a spy on F.arange (which
Tensor.arange calls), the device each new range is asked for; `expect_on`
fails naming where the range was made instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.checker import Fail


def arange_devices(run: Callable[[], Any], tensor: Any) -> tuple[list, Any, Any]:
    """(the devices F.arange was asked for while `run()` ran lazily, the device
    `tensor` reported, its real device)."""
    from max.driver import CPU
    from max.experimental import functional as F
    from max.experimental.tensor import Tensor

    class InputCPU(CPU):
        """The CPU, as an object of its own: the device the input reports."""

    real = tensor.device
    # On an accelerator a second device object would be a second context:
    # there the input's own device, compared by equality, has to do.
    given = InputCPU() if isinstance(real, CPU) else real
    asked: list = []
    real_arange, real_device = F.arange, Tensor.device

    def arange(*args, device=None, **kwargs):
        asked.append(device)
        return real_arange(*args, device=device, **kwargs)

    F.arange = F.range = arange
    Tensor.device = property(lambda t: given if t is tensor else real_device.fget(t))
    try:
        with F.lazy():  # nothing is computed: only what was asked matters
            run()
    finally:
        F.arange = F.range = real_arange
        Tensor.device = real_device
    return asked, given, real


def expect_on(asked: list, given: Any, real: Any, made: str, source: str, why: str) -> None:
    """Fail unless every range in `asked` was made on the input's device.

    made: what the ranges are ("The positions"); source: the input they
    follow ("input_ids"); why: what goes wrong on a GPU otherwise."""
    from max.driver import CPU

    for device in asked:
        if device is given or (given is real and device == real):
            continue
        if device is None:
            made_on = "the default device (Tensor.arange without device=)"
        else:
            made_on = "CPU()" if isinstance(device, CPU) else repr(device)
        raise Fail(
            f"{made} are made on {made_on}, not on the device of {source} ({source}.device).",
            f"{why} Make them on the device of {source}.",
        )
