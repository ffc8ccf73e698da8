"""nn-gather-picks (passes/nn_gather_picks.py): a one-hot sum that picks each row's
target becomes a gather of it. The pass against the reference interpreter on IR with
targets in and out of range; cross-entropy and nll_loss in their forms against eager on
the interpreter and the Triton backend, each through a take; the few-long-rows
cross-entropy of a vocabulary in fewer kernels (FileCheck: passes/nn-gather-picks.mlir)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_frontend_common import randn

import fuseopt
from fuseopt.interpreter import interpret
from fuseopt.pipelines import run_pipeline

FILECHECK = Path(__file__).parent.parent / "filecheck" / "passes" / "nn-gather-picks.mlir"


def _cases() -> list[str]:
    return [c for c in FILECHECK.read_text().split("// -----") if "func.func" in c]


@pytest.mark.parametrize("index", range(2), ids=["nll", "weight"])
def test_pass_matches_the_reference(index: int) -> None:
    """The FileCheck functions the pass rewrites, before and after it, on random inputs
    whose targets include -1, the class count and -100 (picked as 0 by the one-hot
    sum)."""
    text = _cases()[index]
    before = fuseopt.parse(text)
    after = run_pipeline(fuseopt.parse(text), "nn-gather-picks,canonicalize,cse")
    func = next(op for op in before.ops if op.name == "func.func")
    name = func.sym_name.data  # type: ignore[attr-defined]
    rng = np.random.default_rng(3)
    args = []
    for t in func.function_type.inputs.data:  # type: ignore[attr-defined]
        shape = t.get_shape()
        if str(t.element_type) == "i64":
            values = rng.integers(0, shape[-1] if len(shape) > 1 else 10, shape)
            if len(shape) == 1:
                values[:3] = [-1, 10, -100]
            args.append(values.astype(np.int64))
        else:
            args.append(rng.standard_normal(shape).astype(np.float32))
    for want, got in zip(
        interpret(before, name, *args), interpret(after, name, *args), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


LOSSES = {
    "mean": lambda x, t, w: F.cross_entropy(x, t),
    "sum": lambda x, t, w: F.cross_entropy(x, t, reduction="sum"),
    "none": lambda x, t, w: F.cross_entropy(x, t, reduction="none"),
    "weighted": lambda x, t, w: F.cross_entropy(x, t, weight=w),
    "smoothed": lambda x, t, w: F.cross_entropy(x, t, label_smoothing=0.1),
    "nll": lambda x, t, w: F.nll_loss(x, t),
}


@pytest.mark.parametrize("backend", ["interpret", "triton"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_losses_read_the_target_by_gather(name: str, dtype: torch.dtype, backend: str) -> None:
    """Every form reads the target's value through a take and matches eager within
    twice eager's error against float64, or a few roundings of the result (ignored rows
    included)."""
    x = (randn(37, 50, seed=1) * 3).to(dtype)
    t = torch.randint(0, 50, (37,), generator=torch.Generator().manual_seed(2))
    t[3] = t[5] = -100
    w = (torch.rand(50, generator=torch.Generator().manual_seed(4)) + 0.5).to(dtype)
    fn = LOSSES[name]
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, (x, t, w), backend=backend, strict=True)
        got, expected = compiled(x, t, w), fn(x, t, w)
        reference = fn(x.double(), t, w.double())
    error = (got.double() - reference).abs().max().item()
    eager_error = (expected.double() - reference).abs().max().item()
    # at most twice eager's error, or a few roundings of the result (a sum of 37 losses)
    ulp = 2**-7 if dtype == torch.bfloat16 else 2**-20
    scale = reference.abs().max().item()
    assert error <= max(2 * eager_error, ulp * scale), (error, eager_error, scale)
    assert "nn.take" in compiled.fusion_report()


def test_loss_over_a_linear_reads_the_logits_in_memory() -> None:
    """Logits from a GEMM are in memory: the loss gathers the target's logit there."""
    h, lin = randn(37, 16, seed=5), randn(50, 16, seed=6)
    t = torch.randint(0, 50, (37,), generator=torch.Generator().manual_seed(7))
    fn = lambda h, lin, t: F.cross_entropy(h @ lin.t(), t)  # noqa: E731
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, (h, lin, t), backend="interpret", strict=True)
        torch.testing.assert_close(compiled(h, lin, t), fn(h, lin, t), rtol=1e-5, atol=1e-6)
    assert "nn.take" in compiled.fusion_report()


def test_vocabulary_loss_over_few_rows_is_four_kernels() -> None:
    """Cross-entropy over 2 rows of 128256 classes: the rows split into chunks (a
    softmax pair's statistics, then their combination), the target's logit is gathered
    in the combine, and the mean over rows is one more kernel; the one-hot sum split in
    its own chunks took three kernels more, one of them writing the split class index."""
    x = randn(2, 128256, seed=8)
    t = torch.tensor([5, 128000])
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(F.cross_entropy, (x, t), backend="interpret", strict=True)
        got = compiled(x, t)
    torch.testing.assert_close(got, F.cross_entropy(x, t), rtol=1e-5, atol=1e-6)
    assert len(compiled.kernels) == 4, [k.name for k in compiled.kernels]
