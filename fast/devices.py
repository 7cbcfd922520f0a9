"""The devices the command lines name: `--device cpu` or `--device gpu`."""

from __future__ import annotations

from max.driver import CPU, Accelerator, Device, accelerator_count


def default_device_name() -> str:
    """'gpu' when MAX sees an accelerator, else 'cpu'."""
    return "gpu" if accelerator_count() > 0 else "cpu"


def device_from_name(name: str) -> Device:
    """'cpu' or 'gpu' -> a MAX device; a clear ValueError without an accelerator."""
    if name == "cpu":
        return CPU()
    if name == "gpu":
        if accelerator_count() == 0:
            raise ValueError("--device gpu: MAX sees no accelerator on this machine.")
        return Accelerator()
    raise ValueError(f"unknown device {name!r}: use cpu or gpu.")
