"""`F.pad` with a constant (`aten.constant_pad_nd`) is indexing: one kernel with its
consumer (an `nn.take` at clamped source coordinates under a select), whatever the pad
widths, through the reference interpreter and Triton's interpreter, against eager."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fuseopt

CASES = {
    # name: (pad, value, input shape)
    "last_ragged": ((1, 2), 0.0, (5, 33)),
    "two_dims_value": ((0, 3, 2, 0), -1.5, (4, 8)),
    "every_dim_3d": ((1, 1, 2, 0, 0, 3), 0.25, (2, 3, 5)),
    "crop_and_pad": ((-1, 2, 3, -2), 1.0, (6, 7)),
    "one_element": ((2, 1), 7.0, (1, 1)),
    "wide_pad": ((40, 0), 0.0, (3, 2)),
    "crop_all_then_pad": ((-8, 2), 3.0, (4, 8)),
    "empty_input": ((1, 2), 0.5, (4, 0)),
}


@pytest.mark.parametrize("backend", ["interpret", "triton"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_pad_is_one_kernel_with_its_consumer(name: str, dtype: torch.dtype, backend: str) -> None:
    pad, value, shape = CASES[name]
    x = (torch.randn(shape) * 10).to(dtype)
    value = int(value) if dtype == torch.int64 else value

    def fn(t: torch.Tensor) -> torch.Tensor:
        return F.pad(t, pad, value=value) * 3

    compiled = fuseopt.compile(fn, backend=backend)
    got = compiled(x)
    assert not compiled.fallbacks
    assert torch.equal(got, fn(x))
    assert len(compiled.kernels) <= 1


def test_pad_of_a_computed_value_reads_it_after_its_kernel() -> None:
    """A take reads its input by address, so a pad of a value computed in the graph
    costs that value's kernel and one kernel for the pad and its consumers."""
    x = torch.randn(8, 30)
    fn = lambda t: F.pad(torch.relu(t) + 1, (2, 3)).sum(-1)  # noqa: E731
    compiled = fuseopt.compile(fn, backend="triton")
    torch.testing.assert_close(compiled(x), fn(x))
    assert not compiled.fallbacks and len(compiled.kernels) == 2


def test_other_pad_modes_run_in_pytorch_with_a_reason() -> None:
    """Reflect padding is not lowered: it runs in PyTorch (listed, correct), and export
    keeps it as an opaque op; the constant mode of `aten.pad` is lowered in export."""
    x = torch.randn(2, 3, 8)
    fn = lambda t: F.pad(t, (2, 1), mode="reflect") * 2  # noqa: E731
    compiled = fuseopt.compile(fn, backend="interpret")
    torch.testing.assert_close(compiled(x), fn(x))
    assert compiled.fallbacks
    assert "nn.take" in fuseopt.export(lambda t: F.pad(t, (2, 1)), (x,))
    assert "torch_call" in fuseopt.export(fn, (x,))
