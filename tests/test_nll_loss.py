"""nll_loss forward and backward, so cross-entropy, compile (issue 19 item 1): the target
class picked by a comparison in a row reduction fused with the log_softmax. Against eager
for every reduction, with and without class weights, ignored rows (the default -100 and
an index inside [0, C)), all rows ignored, a single sample of shape (C,), f32 and bf16,
on the interpreter and the Triton backend; gradients through torch.compile; a target out
of range gives NaN, never a finite loss."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from test_frontend_common import positive, randn

import fuseopt

TARGETS = torch.tensor([1, -100, 3, 0, 9, 2, 3])
WEIGHT = positive(10, seed=3)


def _loss(reduction: str, weighted: bool, ignore_index: int):  # noqa: ANN202 - a loss
    weight = WEIGHT if weighted else None

    def loss(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(
            x,
            t,
            weight=weight.to(x.dtype) if weight is not None else None,
            reduction=reduction,
            ignore_index=ignore_index,
        )

    return loss


def _compare(got: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(got, expected, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_cross_entropy_matches_eager(
    reduction: str, weighted: bool, ignore_index: int, dtype: torch.dtype
) -> None:
    x = (randn(7, 10, seed=1) * 3).to(dtype)
    targets = TARGETS if ignore_index == -100 else TARGETS.clamp(min=0)
    fn = _loss(reduction, weighted, ignore_index)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="interpret", strict=True)
        _compare(compiled(x, targets), fn(x, targets), dtype)
    assert compiled.regions and not compiled.fallbacks


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_cross_entropy_on_triton(reduction: str, dtype: torch.dtype) -> None:
    x = (randn(7, 10, seed=2) * 3).to(dtype)
    fn = _loss(reduction, True, -100)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="triton", strict=True)
        _compare(compiled(x, TARGETS), fn(x, TARGETS), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_cross_entropy_over_a_long_vocabulary_on_triton(dtype: torch.dtype, tmp_path) -> None:  # noqa: ANN001
    """Rows longer than the Triton target's statistics row block (8192), ragged (9001),
    loop once: the log-sum-exp's max and sum online, the summed exponentials in base 2,
    no row stored; a row of equal logits, a row with one dominant class and a target on
    the last class, against eager."""
    x = (randn(3, 9001, seed=4) * 4).to(dtype)
    x[1] = 2.5
    x[2, 9000] = 60.0
    targets = torch.tensor([17, 4000, 9000])
    fn = _loss("none", False, -100)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="triton", strict=True)
        _compare(compiled(x, targets), fn(x, targets), dtype)
    compiled.save(tmp_path)
    rows = [p.read_text() for p in tmp_path.glob("*.py") if "reduce_max" in p.name]
    assert len(rows) == 1 and "row_reduction_looped" in rows[0]
    assert len(re.findall(r"for k\w* in range", rows[0])) == 1 and "fuseopt_exp2(" in rows[0]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_one_sample_and_all_ignored(reduction: str) -> None:
    x = randn(10, seed=4)
    for fn, args in (
        (_loss(reduction, True, -100), (x, torch.tensor(4))),
        (_loss(reduction, False, -100), (randn(3, 10, seed=5), torch.full((3,), -100))),
    ):
        torch._dynamo.reset()
        with torch.no_grad():
            compiled = fuseopt.compile(fn, backend="interpret", strict=True)
            _compare(compiled(*args), fn(*args), torch.float32)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_gradients(
    reduction: str, weighted: bool, caplog: pytest.LogCaptureFixture
) -> None:
    x = randn(7, 10, seed=6) * 2
    fn = _loss(reduction, weighted, -100)
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="fuseopt", options={"backend": "interpret"})
    out_ours, out_theirs = compiled(ours, TARGETS), fn(theirs, TARGETS)
    grad = randn(*out_theirs.shape, seed=7) if reduction == "none" else torch.tensor(1.5)
    out_ours.backward(grad)
    out_theirs.backward(grad)
    torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-5, atol=1e-6)
    assert "run eagerly" not in caplog.text  # forward and backward compiled whole


def test_target_out_of_range_is_nan() -> None:
    """Eager raises for a target outside [0, C); the compiled loss is NaN there."""
    fn = _loss("none", False, -100)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="interpret", strict=True)
        loss = compiled(randn(3, 10, seed=8), torch.tensor([1, 10, -5]))
    assert not loss[0].isnan() and loss[1:].isnan().all()
