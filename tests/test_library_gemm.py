"""Library GEMMs run with N padded to whole 16-byte vectors (backends/library_gemm.py):
the rule, the padded product on both weight layouts, and both backends' host code."""

from __future__ import annotations

import pytest
import torch

import fuseopt
from fuseopt.backends.library_gemm import MIN_PADDED_WEIGHT, mm_padded, padded_columns


def test_padded_columns_rounds_unaligned_large_weights_only() -> None:
    assert padded_columns(50257, 1024, 2) == 50264
    assert padded_columns(30522, 1024, 2) == 30528
    assert padded_columns(32001, 4096, 4) == 32004
    assert padded_columns(50264, 1024, 2) == 50264  # aligned already
    assert padded_columns(3, 1024, 2) == 3  # a classifier: padding costs more than it saves
    assert 3 * 1024 < MIN_PADDED_WEIGHT


@pytest.mark.parametrize("transposed", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mm_padded_matches_mm(transposed: bool, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(5, 24, generator=g).to(dtype)
    weight = torch.randn(37, 24, generator=g).to(dtype)
    b = weight.mT if transposed else weight.mT.contiguous()
    out = torch.full((5, 37), float("nan"), dtype=dtype)
    mm_padded(a, b, out, padded_columns(37, 10**6, a.element_size()))
    torch.testing.assert_close(out, torch.mm(a, b))


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_backends_pad_an_lm_head(backend: str) -> None:
    """A linear layer of 64 -> 16411 outputs (weight over a million elements, N odd)
    compiles with the padded GEMM and matches eager."""
    if backend == "cuda" and not torch.cuda.is_available():
        pytest.skip("the CUDA backend runs on a GPU")
    head = torch.nn.Linear(64, 16411, bias=False)
    x = torch.randn(3, 64)
    if backend == "cuda":
        head, x = head.cuda(), x.cuda()
    compiled = fuseopt.compile(head, x, backend=backend)
    assert [k.schedule for k in compiled.kernels] == ["library_gemm"] or not compiled.kernels
    if backend == "triton":
        assert "fuseopt_mm_padded(" in compiled.regions[0].compiled.source  # type: ignore[attr-defined]
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), head(x), rtol=1e-4, atol=1e-4)
