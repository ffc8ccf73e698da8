"""MLP workloads: mlp, mlp_heavy, mlp_stacked (Linear-GELU-Linear + residual) and gated_mlp.

GEMM work: the roofline is the larger of the GEMM FLOPs over the measured bf16 matmul
rate and the bytes (activations, weights and biases read once, output written once)
over the measured copy bandwidth. The presets span both sides: ``memory_bound``
(d = 256) is bandwidth-bound, ``large`` is compute-bound, ``small`` (M = 128) is
launch-bound.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.workloads import Dims, Shape, Workload, element_size, generator, randn

MLP_PRESETS = (
    Shape("memory_bound", {"m": 16384, "d": 256, "di": 1024}),
    Shape("medium", {"m": 2048, "d": 1024, "di": 4096}),
    Shape("large", {"m": 16384, "d": 4096, "di": 16384}),
    Shape("small", {"m": 128, "d": 1024, "di": 4096}, tiny=True),
)
MLP_QUICK = Shape("quick", {"m": 16, "d": 32, "di": 64})
STACK_DEPTH = 4


def random_linear(
    fan_in: int,
    fan_out: int,
    bias: bool,
    dtype: torch.dtype,
    device: torch.device,
    gen: torch.Generator,
) -> nn.Linear:
    """An `nn.Linear` with N(0, 1/fan_in) weights and, if asked, N(0, 0.1^2) biases."""
    layer = nn.Linear(fan_in, fan_out, bias=bias, device=device, dtype=dtype)
    with torch.no_grad():
        layer.weight.copy_(randn((fan_out, fan_in), dtype, device, gen) / math.sqrt(fan_in))
        if layer.bias is not None:
            layer.bias.copy_(0.1 * randn((fan_out,), dtype, device, gen))
    return layer


class Mlp(nn.Module):
    """``fc2(gelu(fc1(x))) + x``; with `heavy`, ``fc2(gelu(fc1(x)) * 0.5 + 0.125) + x``."""

    def __init__(
        self, d: int, di: int, heavy: bool, dtype: torch.dtype, device: torch.device, seed: int
    ):
        super().__init__()
        gen = generator(device, seed)
        self.fc1 = random_linear(d, di, True, dtype, device, gen)
        self.fc2 = random_linear(di, d, True, dtype, device, gen)
        self.heavy = heavy

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One MLP block with its residual connection."""
        hidden = F.gelu(self.fc1(x))
        if self.heavy:
            hidden = hidden * 0.5 + 0.125
        return self.fc2(hidden) + x


class StackedMlp(nn.Module):
    """`STACK_DEPTH` MLP blocks in sequence, each with its own weights."""

    def __init__(self, d: int, di: int, dtype: torch.dtype, device: torch.device, seed: int):
        super().__init__()
        self.blocks = nn.ModuleList(
            Mlp(d, di, False, dtype, device, seed + 1000 * i) for i in range(STACK_DEPTH)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the blocks in order."""
        for block in self.blocks:
            x = block(x)
        return x


class GatedMlp(nn.Module):
    """The SwiGLU MLP of Llama: ``down(silu(gate(x)) * up(x))``, no biases."""

    def __init__(self, d: int, di: int, dtype: torch.dtype, device: torch.device, seed: int):
        super().__init__()
        gen = generator(device, seed)
        self.gate = random_linear(d, di, False, dtype, device, gen)
        self.up = random_linear(d, di, False, dtype, device, gen)
        self.down = random_linear(di, d, False, dtype, device, gen)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The gated MLP."""
        return self.down(F.silu(self.gate(x)) * self.up(x))


def _x(d: Dims, dt: torch.dtype, dev: torch.device, s: int) -> tuple[torch.Tensor]:
    return (randn((d["m"], d["d"]), dt, dev, generator(dev, s)),)


def _mlp_bytes(d: Dims, dt: torch.dtype, depth: int = 1) -> int:
    weights = 2 * d["d"] * d["di"] + d["di"] + d["d"]
    return (2 * d["m"] * d["d"] + depth * weights) * element_size(dt)


def _mlp_flops(d: Dims, depth: int = 1) -> int:
    return depth * 2 * 2 * d["m"] * d["d"] * d["di"]


MLP = Workload(
    name="mlp",
    computation="Linear -> GELU -> Linear -> + residual",
    shapes=MLP_PRESETS,
    quick_shape=MLP_QUICK,
    make_model=lambda d, dt, dev, s: Mlp(d["d"], d["di"], False, dt, dev, s),
    make_inputs=_x,
    min_bytes=_mlp_bytes,
    flops=_mlp_flops,
)

MLP_HEAVY = Workload(
    name="mlp_heavy",
    computation="Linear -> GELU -> *0.5 -> +0.125 -> Linear -> + residual",
    shapes=MLP_PRESETS,
    quick_shape=MLP_QUICK,
    make_model=lambda d, dt, dev, s: Mlp(d["d"], d["di"], True, dt, dev, s),
    make_inputs=_x,
    min_bytes=_mlp_bytes,
    flops=_mlp_flops,
)

MLP_STACKED = Workload(
    name="mlp_stacked",
    computation=f"{STACK_DEPTH} x mlp",
    shapes=MLP_PRESETS,
    quick_shape=MLP_QUICK,
    make_model=lambda d, dt, dev, s: StackedMlp(d["d"], d["di"], dt, dev, s),
    make_inputs=_x,
    min_bytes=lambda d, dt: _mlp_bytes(d, dt, STACK_DEPTH),
    flops=lambda d: _mlp_flops(d, STACK_DEPTH),
)

GATED_MLP = Workload(
    name="gated_mlp",
    computation="down(silu(gate(x)) * up(x)), no bias",
    shapes=(Shape("4096x4096x11008", {"m": 4096, "d": 4096, "di": 11008}),),
    quick_shape=MLP_QUICK,
    make_model=lambda d, dt, dev, s: GatedMlp(d["d"], d["di"], dt, dev, s),
    make_inputs=_x,
    min_bytes=lambda d, dt: (2 * d["m"] * d["d"] + 3 * d["d"] * d["di"]) * element_size(dt),
    flops=lambda d: 3 * 2 * d["m"] * d["d"] * d["di"],
)
