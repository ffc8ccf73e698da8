"""Activation workloads: softmax over the last dimension and gelu(x + b).

Both are memory-bound: the roofline is one read of the input (and bias) and one write
of the output. The softmax sweep (N rows of 32768, N = 1k..256k) shows how each system
scales from launch-bound to bandwidth-bound sizes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.workloads import Dims, Shape, Workload, element_size, generator, randn

SOFTMAX_SWEEP_ROWS = (1024, 4096, 16384, 65536, 262144)


class Softmax(nn.Module):
    """`torch.softmax` over the last dimension (eager computes it in float32 internally)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Softmax of `x` over its last dimension."""
        return torch.softmax(x, dim=-1)


class GeluBias(nn.Module):
    """``gelu(x + b)`` with the exact (erf) GELU and a learned bias over the last dimension."""

    def __init__(self, hidden: int, dtype: torch.dtype, device: torch.device, seed: int):
        super().__init__()
        gen = generator(device, seed)
        self.bias = nn.Parameter(0.5 * randn((hidden,), dtype, device, gen))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Add the bias, then apply GELU."""
        return F.gelu(x + self.bias)


def _matrix_inputs(d: Dims, dt: torch.dtype, dev: torch.device, s: int) -> tuple[torch.Tensor]:
    return (randn((d["rows"], d["cols"]), dt, dev, generator(dev, s)),)


def _sweep_label(rows: int) -> str:
    return f"{rows // 1024}kx32768"


SOFTMAX = Workload(
    name="softmax",
    computation="softmax over the last dim",
    shapes=(
        Shape("4096x8192", {"rows": 4096, "cols": 8192}),
        *(Shape(_sweep_label(n), {"rows": n, "cols": 32768}) for n in SOFTMAX_SWEEP_ROWS),
    ),
    quick_shape=Shape("quick", {"rows": 8, "cols": 64}),
    make_model=lambda d, dt, dev, s: Softmax(),
    make_inputs=_matrix_inputs,
    min_bytes=lambda d, dt: 2 * d["rows"] * d["cols"] * element_size(dt),
    rowwise=True,
)

GELU_BIAS = Workload(
    name="gelu_bias",
    computation="gelu(x + b)",
    shapes=(Shape("8192x8192", {"rows": 8192, "cols": 8192}),),
    quick_shape=Shape("quick", {"rows": 8, "cols": 64}),
    make_model=lambda d, dt, dev, s: GeluBias(d["cols"], dt, dev, s),
    make_inputs=_matrix_inputs,
    min_bytes=lambda d, dt: (2 * d["rows"] * d["cols"] + d["cols"]) * element_size(dt),
    rowwise=True,
)
