"""Shared helpers for the frontend tests: seeded inputs, dtype-aware tolerances, and a
runner that compiles through `fuseopt.compile(..., backend="interpret")` and checks the
result against eager PyTorch (and that nothing fell back to eager, unless allowed)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import fuseopt

TOLERANCE = {
    torch.float32: {"rtol": 2e-5, "atol": 2e-5},
    torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2},
    torch.float16: {"rtol": 2e-3, "atol": 2e-3},
    torch.float64: {"rtol": 1e-10, "atol": 1e-10},
}
"""Per-dtype tolerances against eager (the interpreter rounds once per op)."""


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    """Reproducible standard-normal values of `dtype`."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def positive(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    """Reproducible values in [0.5, 2.5): safe for log, sqrt, rsqrt, pow."""
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(*shape, generator=g) * 2 + 0.5).to(dtype)


def assert_close(actual: Any, expected: Any, dtype: torch.dtype | None = None) -> None:
    """Compare (nested) outputs with a tolerance chosen by the expected dtype."""
    if isinstance(expected, tuple | list):
        assert isinstance(actual, tuple | list) and len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_close(a, e, dtype)
        return
    assert isinstance(actual, torch.Tensor), type(actual)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if not expected.dtype.is_floating_point:
        assert torch.equal(actual, expected)
        return
    tol = TOLERANCE[dtype or expected.dtype]
    torch.testing.assert_close(actual.float(), expected.float(), **tol)


def check(
    fn: Callable[..., Any],
    inputs: Sequence[torch.Tensor],
    *,
    dtype: torch.dtype | None = None,
    allow_fallback: bool = False,
    **options: Any,
) -> fuseopt.api.CompiledModule:
    """Compile `fn` with the interpret backend (and `options`), run it on `inputs`,
    compare with eager.

    Unless `allow_fallback`, every op must have been compiled (no eager fallback).
    """
    torch._dynamo.reset()
    compiled = fuseopt.compile(fn, backend="interpret", **options)
    with torch.no_grad():
        expected = fn(*inputs)
        actual = compiled(*inputs)
    assert_close(actual, expected, dtype)
    if not allow_fallback:
        assert not compiled.fallbacks, compiled.fusion_report()
        assert compiled.regions, "nothing was compiled"
    return compiled


class MLP(nn.Module):
    """Linear -> GELU -> Linear + residual."""

    def __init__(self, d: int = 8, hidden: int = 16):
        super().__init__()
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x))) + x


def randomize(model: nn.Module, seed: int = 0) -> nn.Module:
    """Seeded non-trivial parameters (normal, std 0.5), in place."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return model
