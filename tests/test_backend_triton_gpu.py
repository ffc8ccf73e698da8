"""The issue-14 Triton fixes on a CUDA GPU (skipped without one): the source the CPU
tests run in Triton's interpreter also compiles and gives eager's results on the GPU
(NaN-propagating max/min, casts between every pair of types, names that would shadow
helpers, split dims)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_backend_sanitize import NN_SOFTMAX
from test_backend_triton_numerics import (
    ELEMENTS,
    NAN_OPS,
    NAN_ROW,
    PAIRS,
    cast_input,
    cast_module,
    check_casts,
)
from test_backend_triton_parts import CASES

import fuseopt
from fuseopt.backends.kernel_cache import KernelCache
from fuseopt.backends.triton.backend import compile_module

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

GPU = torch.device("cuda")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(cache))
    return cache


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("name", list(NAN_OPS))
def test_max_and_min_propagate_nan_on_gpu(name: str, dtype: torch.dtype) -> None:
    x = torch.tensor([NAN_ROW, [4.0, -1.0, 0.5, 2.0]], dtype=dtype, device=GPU)
    fn = NAN_OPS[name]
    got = fuseopt.compile(fn, (x,), backend="triton", strict=True)(x)
    torch.testing.assert_close(got, fn(x), equal_nan=True, rtol=1e-2, atol=1e-2)


def test_casts_between_every_pair_of_types_on_gpu(_private_cache: Path) -> None:
    inputs = {s: cast_input(s).to(GPU) for s in ELEMENTS}
    fn = compile_module(
        fuseopt.parse(cast_module(PAIRS)), "main", {}, KernelCache(str(_private_cache))
    )
    got = tuple(g.cpu() for g in fn(*(inputs[s] for s in ELEMENTS)))
    check_casts(got, {s: x.cpu() for s, x in inputs.items()}, PAIRS)


def test_helper_names_on_gpu(_private_cache: Path) -> None:
    text = NN_SOFTMAX.replace("FUNC", "fuseopt_bf16")
    x = torch.randn(4, 8, device=GPU).to(torch.bfloat16)
    fn = compile_module(fuseopt.parse(text), "fuseopt_bf16", {}, KernelCache(str(_private_cache)))
    (y,) = fn(x)
    torch.testing.assert_close(y, torch.softmax(x.float(), -1).to(torch.bfloat16))


@pytest.mark.parametrize("name", list(CASES))
def test_split_dims_on_gpu(name: str) -> None:
    fn, shapes = CASES[name]
    args = tuple(torch.randn(s, device=GPU).to(torch.bfloat16) for s in shapes)
    got, want = fuseopt.compile(fn, args, backend="triton", strict=True)(*args), fn(*args)
    assert got.shape == want.shape
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=7e-2)
