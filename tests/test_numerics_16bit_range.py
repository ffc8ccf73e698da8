"""16-bit float inputs over their whole range, against eager PyTorch: no intermediate
may overflow (or underflow) where eager's does not.

PyTorch computes in f32 ("opmath") and rounds once; computed in f16, exp(x) overflows
for x > 11.09 (softplus and mish gave `inf` up to their threshold, issue 14) and x * x
for |x| > 256. Checked:
- the activations the frontend spells with nn primitives (softplus, mish, elu,
  leaky_relu) on [-60, 60] and around the overflow points;
- the ops with exp or squares inside (softmax, log_softmax, rms_norm, layer_norm, var,
  std, sigmoid, silu, tanh-approximated gelu) on values up to f16's largest;
each through:
- `fuseopt.compile(backend="interpret")` (the nn pipeline and the reference interpreter),
- `fuseopt.compile(backend="triton")` (kernels in Triton's CPU interpreter), also
  with `precision="eager"` (no widening of fused groups),
- `fuseopt.export` then `fuseopt.interpret` (the imported nn IR, no pass run).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import fuseopt

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2.0, threshold=30.0),
    "mish": F.mish,
    "elu": lambda x: F.elu(x, alpha=0.7),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.01),
}

TOLERANCE = {
    torch.float16: {"rtol": 2e-3, "atol": 2e-3},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 1.6e-2},
    torch.float32: {"rtol": 2e-5, "atol": 1e-6},
}
"""Within one rounding of the result dtype of eager (which rounds once, as we must)."""

DTYPES = [torch.float16, torch.bfloat16]


def spanning_inputs(dtype: torch.dtype) -> torch.Tensor:
    """[-60, 60], plus points around exp's f16 overflow (11.09), softplus's threshold
    (20, and 15 for beta=2 and threshold=30) and f16's underflow of exp(-x)."""
    near = [11.0, 11.05, 11.09, 11.1, 11.2, 14.9, 15.0, 15.1, 19.9, 20.0, 20.1, 16.6, 17.4]
    points = torch.tensor(near + [-v for v in near])
    return torch.cat([torch.linspace(-60, 60, 481), points]).to(dtype)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(tmp_path / "cache"))


def _assert_matches_eager(actual: torch.Tensor, x: torch.Tensor, name: str) -> None:
    expected = ACTIVATIONS[name](x)
    assert actual.dtype == expected.dtype
    assert torch.isfinite(actual).all(), x[~torch.isfinite(actual)]
    torch.testing.assert_close(actual.float(), expected.float(), **TOLERANCE[x.dtype])


BACKENDS: dict[str, dict[str, str]] = {
    "interpret": {"backend": "interpret"},
    "triton": {"backend": "triton"},
    "triton-eager-precision": {"backend": "triton", "precision": "eager"},
}
"""Backends and options: `precision="eager"` keeps each op's own rounding (no widening
of fused groups), so only the frontend's own f32 keeps the intermediates in range."""


@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
@pytest.mark.parametrize("backend", list(BACKENDS))
def test_activation_matches_eager_over_the_range(
    backend: str, name: str, dtype: torch.dtype
) -> None:
    x = spanning_inputs(dtype)
    torch._dynamo.reset()
    compiled = fuseopt.compile(ACTIVATIONS[name], strict=True, **BACKENDS[backend])
    with torch.no_grad():
        _assert_matches_eager(compiled(x), x, name)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_imported_ir_matches_eager_in_the_reference_interpreter(
    name: str, dtype: torch.dtype
) -> None:
    x = spanning_inputs(dtype)
    module = fuseopt.parse(fuseopt.export(ACTIVATIONS[name], (x,)))
    (y,) = fuseopt.interpret(module, "forward", x)
    _assert_matches_eager(torch.from_numpy(y).to(dtype), x, name)


def test_softplus_keeps_tiny_values_in_f32() -> None:
    # log1p(exp(x)) for x << 0 is exp(x): a plain log(1 + exp(x)) rounds it to 0 or to
    # a multiple of f32's epsilon
    x = torch.tensor([-30.0, -20.0, -16.0, -12.0, -8.0, -1e-3, 0.0, 1e-3])
    module = fuseopt.parse(fuseopt.export(F.softplus, (x,)))
    (y,) = fuseopt.interpret(module, "forward", x)
    torch.testing.assert_close(torch.from_numpy(y), F.softplus(x), rtol=1e-6, atol=0)


LARGE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softmax": lambda x: torch.softmax(x, -1),
    "log_softmax": lambda x: torch.log_softmax(x, -1),
    "rms_norm": lambda x: F.rms_norm(x, (x.shape[-1],), eps=1e-6),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
    "var": lambda x: torch.var(x, -1),
    "std": lambda x: torch.std(x, -1, keepdim=True),
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


def large_inputs(dtype: torch.dtype) -> torch.Tensor:
    """Rows of values far past 256 (x * x overflows f16) and exp's range: up to
    +-60000 (f16 holds 65504), and one row within [-60, 60]."""
    g = torch.Generator().manual_seed(0)
    rows = [
        torch.linspace(-60000, 60000, 37),
        torch.rand(37, generator=g) * 1000 + 300,
        -(torch.rand(37, generator=g) * 20000),
        torch.linspace(-60, 60, 37),
    ]
    return torch.stack(rows).to(dtype)


def _assert_large_matches_eager(actual: torch.Tensor, x: torch.Tensor, name: str) -> None:
    expected = LARGE[name](x)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(torch.isfinite(actual), torch.isfinite(expected))
    finite = expected.float()[torch.isfinite(expected)]
    scale = finite.abs().amax().clamp(min=1.0)
    tol = TOLERANCE[x.dtype]
    # relative to the largest output: var and std of these rows are ~1e8 and ~1e4
    torch.testing.assert_close(
        actual.float() / scale, expected.float() / scale, rtol=tol["rtol"], atol=tol["atol"]
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
@pytest.mark.parametrize("name", list(LARGE))
@pytest.mark.parametrize("backend", ["interpret", "triton"])
def test_large_values_match_eager(backend: str, name: str, dtype: torch.dtype) -> None:
    x = large_inputs(dtype)
    torch._dynamo.reset()
    compiled = fuseopt.compile(LARGE[name], backend=backend, strict=True)
    with torch.no_grad():
        _assert_large_matches_eager(compiled(x), x, name)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
@pytest.mark.parametrize("name", list(LARGE))
def test_large_values_in_the_reference_interpreter(name: str, dtype: torch.dtype) -> None:
    x = large_inputs(dtype)
    module = fuseopt.parse(fuseopt.export(LARGE[name], (x,)))
    (y,) = fuseopt.interpret(module, "forward", x)
    _assert_large_matches_eager(torch.from_numpy(y).to(dtype), x, name)
