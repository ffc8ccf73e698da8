"""A constant row normalizes to exactly 0: layer_norm gives exactly `bias`, and its
variance (torch.var, var_mean) is exactly 0, as eager's Welford statistics give.

f32 sums of n copies of c are rarely n * c, so a mean computed as sum / n missed c by
ulps, and layer_norm scaled that miss by rsqrt(eps) ~ 316 (the Triton backend was off
by up to 5e-2 on rows of 3.7; issue 14). nn-decompose takes a row's value as its mean
where its min equals its max (`row_mean`), and the online variance of looped rows
does the same per chunk (`online`). Checked, on rows of 0.1, 3.7 and -1e4, in f32,
bf16 and f16, on short rows, non-powers of two, rows in registers and looped rows:
- Triton (CPU interpreter), whole rows and looped (online) rows;
- CUDA, emulated with g++: rows in registers, rows looped through the row cache, rows
  past the cache (online);
- the nn reference interpreter and the tile interpreter on the looped form.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_nn_fuse_workloads import layernorm
from test_tile_lowering import PRE_FUSE
from test_tile_online import LOOPED, loops

import fuseopt

VALUES = (0.1, 3.7, -1e4)
"""One constant row each: 0.1 and 3.7 have full 24-bit f32 mantissas."""

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(tmp_path / "cache"))


def constant_rows(n: int, dtype: torch.dtype) -> torch.Tensor:
    """One row of n copies of each of VALUES."""
    return torch.tensor(VALUES).repeat_interleave(n).reshape(len(VALUES), n).to(dtype)


def affine(n: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """A weight and a bias with no zeros (0 * w + b is b exactly)."""
    return torch.linspace(0.5, 1.5, n).to(dtype), torch.linspace(-1, 1, n).to(dtype) + 0.01


def assert_is_bias(y: torch.Tensor, b: torch.Tensor) -> None:
    assert torch.equal(y, b.expand_as(y)), (y.float() - b.float()).abs().max()


def _layer_norm_on_triton(n: int, dtype: torch.dtype, **options: int) -> None:
    x, (w, b) = constant_rows(n, dtype), affine(n, dtype)
    torch._dynamo.reset()
    compiled = fuseopt.compile(
        lambda x, w, b: F.layer_norm(x, (n,), w, b), backend="triton", strict=True, **options
    )
    with torch.no_grad():
        assert_is_bias(compiled(x, w, b), b)


@pytest.mark.parametrize("n", [40, 1000, 3000])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_layer_norm_of_constant_rows_is_the_bias_on_triton(dtype: str, n: int) -> None:
    _layer_norm_on_triton(n, DTYPES[dtype])


@pytest.mark.parametrize("n", [1000, 1024])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_looped_layer_norm_of_constant_rows_is_the_bias_on_triton(dtype: str, n: int) -> None:
    # chunks of 256 columns: four full chunks, or three and a ragged one of 232
    _layer_norm_on_triton(n, DTYPES[dtype], max_row_block=256, block_cols=256)


def test_layer_norm_of_long_constant_rows_is_the_bias_on_triton() -> None:
    # past the row block: the default chunks of 2048 columns, the last one ragged
    _layer_norm_on_triton(4100, torch.float32, max_row_block=4096)


@pytest.mark.parametrize("backend", ["interpret", "triton"])
def test_variance_of_constant_rows_is_zero(backend: str) -> None:
    x = constant_rows(1000, torch.float32)

    def stats(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        v, m = torch.var_mean(x, -1, correction=0)
        return torch.var(x, -1), torch.std(x, -1), v, m

    torch._dynamo.reset()
    compiled = fuseopt.compile(stats, backend=backend, strict=True)
    var, std, v, m = compiled(x)
    assert not var.any() and not std.any() and not v.any()
    assert torch.equal(m, x[:, 0])


@pytest.mark.parametrize("n", [1000, 9000, 30000], ids=["registers", "row-cache", "online"])
def test_layer_norm_of_constant_rows_is_the_bias_on_cuda(n: int, tmp_path: Path) -> None:
    from fuseopt.backends.cuda.backend import CudaBackend
    from fuseopt.backends.cuda.emulation import EmulatedFunction, emulator_available

    if not emulator_available():
        pytest.skip("g++ is not installed")
    fn = CudaBackend().compile(fuseopt.parse(layernorm(3, n).replace("bf16", "f32")), "main", {})
    x, (w, b) = constant_rows(n, torch.float32), affine(n, torch.float32)
    (y,) = EmulatedFunction(fn, tmp_path)(x, w, b)
    assert_is_bias(y, b)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_layer_norm_of_constant_rows_in_the_interpreters(dtype: str) -> None:
    n = 100
    x, (w, b) = constant_rows(n, DTYPES[dtype]), affine(n, DTYPES[dtype])
    text = layernorm(3, n).replace("bf16", dtype)
    reference = fuseopt.run_pipeline(fuseopt.parse(text), PRE_FUSE)
    (expected,) = fuseopt.interpret(reference, "main", x, w, b)
    tiled = fuseopt.run_pipeline(reference.clone(), LOOPED)
    assert loops(tiled) == 2  # the row mean keeps the online form: one statistics pass
    (actual,) = fuseopt.interpret(tiled, "main", x, w, b)
    bias = np.broadcast_to(b.float().numpy(), (3, n))
    np.testing.assert_array_equal(expected, bias)
    np.testing.assert_array_equal(actual, bias)
