"""Step 30's kernel as MAX runs it: a .mojo file's operation "q8_0_matvec" in a graph.

The file is built by common.mojo_file (a MojoCompileError names the
learner's line where the compiler refuses it). The operation then enters a
graph like any other: `q8_0_matvec` for a graph being built (a Module's
forward), `kernel_linear` for a layer (step 27's Q8Linear with the kernel's
forward: the benchmark, the Try it), `CompiledKernel` for a graph compiled
once with symbolic shapes and run on NumPy arrays (the checker).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from common.mojo_file import library

OP = "q8_0_matvec"
BLOCK = 32  # weights per block


def q8_0_matvec(x, scales, values, kernels: Path):
    """x [rows, in] float32 times the Q8_0 weight (scales [out, in // 32]
    float16, values [out, in // 32, 32] int8) transposed: [rows, out]
    float32, through the kernel of the built package `kernels`."""
    from max.dtype import DType
    from max.experimental import functional as F
    from max.graph import TensorType

    out_type = TensorType(DType.float32, [x.shape[0], values.shape[0]], device=x.device)
    return F.custom(OP, x.device, [x, scales, values], [out_type], custom_extensions=[kernels])[0]


def kernel_linear(kernels: Path, q8_linear: type) -> type:
    """A subclass of `q8_linear` (step 27's Q8Linear: the same two tensors,
    `scales` and `values`) whose forward is the kernel of the built package
    `kernels`, which never builds the float32 weight."""

    class Q8KernelLinear(q8_linear):
        def forward(self, x):
            rows = x.reshape([-1, int(x.shape[-1])])
            out = q8_0_matvec(rows, self.scales, self.values, kernels)
            return out.reshape([*x.shape[:-1], int(self.values.shape[0])])

    return Q8KernelLinear


class CompiledKernel:
    """The kernel alone in a graph compiled once, its shapes symbolic (rows,
    out, blocks): every shape runs without compiling again. Call it with
    NumPy arrays x [rows, in] float32, scales and values; it returns the
    output [rows, out] as a NumPy array."""

    def __init__(self, mojo_file: Path) -> None:
        from max.driver import CPU
        from max.dtype import DType
        from max.engine import InferenceSession
        from max.graph import DeviceRef, Graph, TensorType

        kernels = library(mojo_file)
        cpu = DeviceRef.CPU()
        types = [
            TensorType(DType.float32, ["rows", "in"], device=cpu),
            TensorType(DType.float16, ["out", "blocks"], device=cpu),
            TensorType(DType.int8, ["out", "blocks", BLOCK], device=cpu),
        ]
        with Graph(
            "mojo_kernel_q8_0_matvec", input_types=types, custom_extensions=[kernels]
        ) as graph:
            from max.graph import ops

            x, scales, values = graph.inputs
            out_type = TensorType(DType.float32, [x.shape[0], values.shape[0]], device=cpu)
            graph.output(ops.custom(OP, cpu, [x, scales, values], [out_type])[0])
        self.model = InferenceSession(devices=[CPU()]).load(graph)

    def __call__(self, x: np.ndarray, scales: np.ndarray, values: np.ndarray) -> np.ndarray:
        arrays = [np.ascontiguousarray(a) for a in (x, scales, values)]
        return self.model.execute(*arrays)[0].to_numpy()
