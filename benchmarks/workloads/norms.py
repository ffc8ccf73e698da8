"""Normalization workloads: rmsnorm, rmsnorm_silu_gate, layernorm, rmsnorm_rope.

All are memory-bound row reductions with an elementwise prologue/epilogue: the
roofline is one read of every input and one write of the output.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.workloads import (
    Dims,
    Shape,
    Workload,
    accumulation_dtype,
    element_size,
    generator,
    randn,
    scale_weight,
)

EPS = 1e-6

LLAMA_ROWS_SHAPES = (
    Shape("decode", {"batch": 1, "seq": 1, "hidden": 5120}, tiny=True),
    Shape("prefill", {"batch": 1, "seq": 2048, "hidden": 5120}),
    Shape("long", {"batch": 1, "seq": 8192, "hidden": 5120}),
)
LLAMA_ROWS_QUICK = Shape("quick", {"batch": 1, "seq": 4, "hidden": 64})


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``x * rsqrt(mean(x^2) + eps) * w``, accumulated in float32 (float64 for the reference).

    Written the way Hugging Face's LlamaRMSNorm is, so eager runs what users run.
    """
    xf = x.to(accumulation_dtype(x))
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * normed.to(x.dtype)


class RmsNorm(nn.Module):
    """RMSNorm over the last dimension with a learned scale."""

    def __init__(self, hidden: int, dtype: torch.dtype, device: torch.device, seed: int):
        super().__init__()
        gen = generator(device, seed)
        self.weight = nn.Parameter(scale_weight((hidden,), dtype, device, gen))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize `x` over its last dimension."""
        return rms_norm(x, self.weight, EPS)


class RmsNormSiluGate(nn.Module):
    """``rmsnorm(x, w) * silu(g)`` (the Mamba-2 / gated-delta-net output gate)."""

    def __init__(self, hidden: int, dtype: torch.dtype, device: torch.device, seed: int):
        super().__init__()
        gen = generator(device, seed)
        self.weight = nn.Parameter(scale_weight((hidden,), dtype, device, gen))

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        """Normalize `x` and multiply by ``silu(gate)``."""
        return rms_norm(x, self.weight, EPS) * F.silu(gate)


class LayerNorm(nn.Module):
    """`torch.nn.functional.layer_norm` over the last dimension, with weight and bias."""

    def __init__(self, hidden: int, dtype: torch.dtype, device: torch.device, seed: int):
        super().__init__()
        gen = generator(device, seed)
        self.weight = nn.Parameter(scale_weight((hidden,), dtype, device, gen))
        self.bias = nn.Parameter(0.1 * randn((hidden,), dtype, device, gen))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Layer-normalize `x` over its last dimension."""
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, 1e-5)


def rotate_halves(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding on the two halves of the last dimension (NeoX/Llama layout)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class RmsNormRope(nn.Module):
    """RMSNorm over head_dim (the QK-norm of Qwen3/OLMo2), then rotary on head halves.

    `x` is ``[batch, seq, heads, head_dim]``; `cos`/`sin` are ``[seq, 1, head_dim/2]``.
    """

    def __init__(self, head_dim: int, dtype: torch.dtype, device: torch.device, seed: int):
        super().__init__()
        gen = generator(device, seed)
        self.weight = nn.Parameter(scale_weight((head_dim,), dtype, device, gen))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Normalize each head vector, then rotate its halves by the given angles."""
        return rotate_halves(rms_norm(x, self.weight, EPS), cos, sin)


def random_rotary(
    seq: int, half: int, dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables ``[seq, 1, half]`` of random angles (valid rotations, not a fixed table)."""
    angles = torch.rand((seq, 1, half), generator=gen, device=device) * (2 * torch.pi)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def _rows(dims: Dims) -> int:
    return dims["batch"] * dims["seq"]


RMSNORM = Workload(
    name="rmsnorm",
    computation="x * rsqrt(mean(x^2) + eps) * w",
    shapes=LLAMA_ROWS_SHAPES,
    quick_shape=LLAMA_ROWS_QUICK,
    make_model=lambda d, dt, dev, s: RmsNorm(d["hidden"], dt, dev, s),
    make_inputs=lambda d, dt, dev, s: (
        randn((d["batch"], d["seq"], d["hidden"]), dt, dev, generator(dev, s)),
    ),
    min_bytes=lambda d, dt: (2 * _rows(d) * d["hidden"] + d["hidden"]) * element_size(dt),
    rowwise=True,
)


def _gate_inputs(d: Dims, dt: torch.dtype, dev: torch.device, s: int) -> tuple[torch.Tensor, ...]:
    gen = generator(dev, s)
    shape = (d["batch"], d["seq"], d["hidden"])
    return randn(shape, dt, dev, gen), randn(shape, dt, dev, gen)


RMSNORM_SILU_GATE = Workload(
    name="rmsnorm_silu_gate",
    computation="rmsnorm(x, w) * silu(g)",
    shapes=LLAMA_ROWS_SHAPES,
    quick_shape=LLAMA_ROWS_QUICK,
    make_model=lambda d, dt, dev, s: RmsNormSiluGate(d["hidden"], dt, dev, s),
    make_inputs=_gate_inputs,
    min_bytes=lambda d, dt: (3 * _rows(d) * d["hidden"] + d["hidden"]) * element_size(dt),
)

LAYERNORM = Workload(
    name="layernorm",
    computation="layer_norm(x, w, b)",
    shapes=(Shape("8192x4096", {"rows": 8192, "hidden": 4096}),),
    quick_shape=Shape("quick", {"rows": 8, "hidden": 64}),
    make_model=lambda d, dt, dev, s: LayerNorm(d["hidden"], dt, dev, s),
    make_inputs=lambda d, dt, dev, s: (
        randn((d["rows"], d["hidden"]), dt, dev, generator(dev, s)),
    ),
    min_bytes=lambda d, dt: (2 * d["rows"] * d["hidden"] + 2 * d["hidden"]) * element_size(dt),
    rowwise=True,
)


def _rope_inputs(d: Dims, dt: torch.dtype, dev: torch.device, s: int) -> tuple[torch.Tensor, ...]:
    gen = generator(dev, s)
    x = randn((d["batch"], d["seq"], d["heads"], d["head_dim"]), dt, dev, gen)
    cos, sin = random_rotary(d["seq"], d["head_dim"] // 2, dt, dev, gen)
    return x, cos, sin


def _rope_bytes(d: Dims, dt: torch.dtype) -> int:
    activations = 2 * d["batch"] * d["seq"] * d["heads"] * d["head_dim"]
    tables = 2 * d["seq"] * (d["head_dim"] // 2)
    return (activations + tables + d["head_dim"]) * element_size(dt)


RMSNORM_ROPE = Workload(
    name="rmsnorm_rope",
    computation="rmsnorm over head_dim, then rotary on head halves",
    shapes=(Shape("4x2048x32x128", {"batch": 4, "seq": 2048, "heads": 32, "head_dim": 128}),),
    quick_shape=Shape("quick", {"batch": 2, "seq": 4, "heads": 2, "head_dim": 16}),
    make_model=lambda d, dt, dev, s: RmsNormRope(d["head_dim"], dt, dev, s),
    make_inputs=_rope_inputs,
    min_bytes=_rope_bytes,
)
