"""argmax / argmin and max.dim / min.dim (values and indices) compile (issue 19 item 2,
issue 20 item 4): built from a max (min), a comparison and a min over indices, fused
into one row kernel. Checked bit for bit against eager on the interpreter and the
Triton backend: ties (the first index wins), NaN (the first NaN wins, its value NaN),
infinities, integers and booleans, every axis, keepdim, dim=None, one element, and
rows past one program's block."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from test_frontend_common import randn

import fuseopt


def _hard_rows(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Random values with ties, NaN and infinities planted along the last two axes."""
    x = randn(*shape, seed=5).to(dtype)
    if dtype.is_floating_point and x.numel() >= 12 and x.dim() >= 2:
        flat = x.view(-1, x.shape[-1])
        flat[0, :] = 1.0  # a constant row: index 0 (all tie)
        flat[1, -1] = float("nan")
        flat[min(2, flat.shape[0] - 1), 0] = float("inf")
        flat[-1, :] = flat[-1].max()  # ties everywhere on the last row
        if flat.shape[1] > 2:
            flat[min(3, flat.shape[0] - 1), 1] = float("-inf")
            flat[1, 0] = float("nan")  # two NaNs: the first one
    return x


CASES: dict[str, Callable[[torch.Tensor], object]] = {
    "argmax_last": lambda x: x.argmax(-1),
    "argmin_last": lambda x: x.argmin(-1),
    "argmax_first": lambda x: x.argmax(0),
    "argmin_first_keepdim": lambda x: x.argmin(0, keepdim=True),
    "argmax_flat": lambda x: x.argmax(),
    "argmin_flat": lambda x: x.argmin(),
    "max_dim": lambda x: x.max(-1),
    "min_dim_keepdim": lambda x: x.min(0, keepdim=True),
    "argmax_of_softmax": lambda x: torch.softmax(x.float(), -1).argmax(-1),
}


def _assert_same(got: object, expected: object) -> None:
    got_t = got if isinstance(got, tuple) else (got,)
    exp_t = expected if isinstance(expected, tuple) else (expected,)
    assert len(got_t) == len(exp_t)
    for g, e in zip(got_t, exp_t, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, e.dtype, g.shape, e.shape)
        same = (g == e) | (g.isnan() & e.isnan()) if e.is_floating_point() else g == e
        assert bool(same.all()), (g, e)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        ((6, 9), torch.float32),
        ((6, 9), torch.bfloat16),
        ((2, 3, 5), torch.float32),
        ((4, 300), torch.int64),
        ((5, 4), torch.float16),
        ((7, 3), torch.bool),
        ((1, 1), torch.float32),
        ((3, 9000), torch.float32),  # a row past one program's block on the interpreter
    ],
    ids=str,
)
def test_index_reductions_match_eager(
    name: str, shape: tuple[int, ...], dtype: torch.dtype
) -> None:
    fn = CASES[name]
    if name == "argmax_of_softmax" and not dtype.is_floating_point:
        pytest.skip("softmax needs floats")
    x = _hard_rows(shape, dtype) if dtype != torch.bool else randn(*shape, seed=6) > 0
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="interpret", strict=True)
        try:
            expected = fn(x)
        except RuntimeError as e:  # argmax of bool: PyTorch refuses, so must we
            with pytest.raises(RuntimeError, match="bool"):
                compiled(x)
            assert "bool" in str(e)
            return
        got = compiled(x)
    _assert_same(got, expected)
    assert compiled.regions and not compiled.fallbacks


@pytest.mark.parametrize("name", ["argmax_last", "argmin_first_keepdim", "max_dim", "argmax_flat"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_index_reductions_on_triton(name: str, dtype: torch.dtype) -> None:
    x = _hard_rows((5, 37), dtype)
    fn = CASES[name]
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="triton", strict=True)
        got, expected = compiled(x), fn(x)
    _assert_same(got, expected)
    # the max (min) and the min over indices: one row kernel
    rows = [k for k in compiled.kernels if k.schedule.startswith("row_reduction")]
    assert len(rows) == 1, [(k.name, k.schedule) for k in compiled.kernels]


def test_argmax_over_an_empty_axis_is_left_to_pytorch() -> None:
    """PyTorch raises for argmax over a zero-size axis: fuseopt does not compile it and
    PyTorch's own error reaches the user."""
    fn = lambda x: x.argmax(1)  # noqa: E731
    torch._dynamo.reset()
    with pytest.raises((IndexError, RuntimeError)):
        fuseopt.compile(fn, backend="interpret")(torch.zeros(3, 0))
