"""Region outputs that are partial views of a value the region computes come back as
those views of its buffer (`frontends/fx/output_views.py`): no copy kernel per slice,
eager's strides and storage sharing, on the interpret and Triton backends."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_frontend_common import assert_close, randn
from torch.fx.experimental.proxy_tensor import make_fx

import fuseopt
from fuseopt.frontends.fx.output_views import (
    OutputView,
    OutputViews,
    view_outputs,
    with_output_views,
)

BACKENDS = ["interpret", "triton"]


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


class SplitHeads(torch.nn.Module):
    """A fused QKV projection split into heads (GPT-2's `c_attn`), returned as is."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(32, 96)
        torch.nn.init.normal_(self.proj.weight, std=0.3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        b, n, _ = x.shape
        q, k, v = self.proj(x).split(32, dim=-1)
        return tuple(t.view(b, n, 4, 8).transpose(1, 2) for t in (q, k, v))


class AttentionBlock(torch.nn.Module):
    """SplitHeads feeding PyTorch's attention (left eager), then an output projection."""

    def __init__(self) -> None:
        super().__init__()
        self.heads = SplitHeads()
        self.out = torch.nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.heads(x)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(x.shape))


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_heads_are_views_of_one_buffer(backend: str) -> None:
    """q, k and v share the projection's buffer with eager's strides and offsets, and
    no kernel copies a slice."""
    model = SplitHeads().eval()
    x = randn(2, 6, 32)
    with torch.no_grad():  # inference: a training graph keeps its copies
        compiled = fuseopt.compile(model, (x,), backend=backend, strict=True)
        got, want = compiled(x), model(x)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w)
        assert g.stride() == w.stride() and g.storage_offset() == w.storage_offset()
    assert len({_storage(g) for g in got}) == 1
    assert not [k.name for k in compiled.kernels if "slice" in k.name]


@pytest.mark.parametrize("backend", BACKENDS)
def test_eager_attention_reads_the_views(backend: str) -> None:
    """With attention left to PyTorch, the region before it returns the projection once
    (no slice kernels) and the block computes eager's result."""
    model = AttentionBlock().eval()
    x = randn(2, 6, 32)
    with torch.no_grad():
        compiled = fuseopt.compile(model, (x,), backend=backend, attention="eager")
        assert_close(compiled(x), model(x))
    assert not [k.name for k in compiled.kernels if "slice" in k.name]


def _traced(fn, *args: torch.Tensor) -> torch.fx.GraphModule:  # noqa: ANN001 - a function
    return make_fx(fn, tracing_mode="fake")(*args)


def test_views_of_one_base_become_one_output() -> None:
    """Three slices of one product: the rewritten region returns the product once, and
    each original output is a view of it at its traced offset."""

    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple((x @ w).split(4, dim=-1))

    gm = _traced(f, torch.randn(3, 8), torch.randn(8, 12))
    found = view_outputs(gm)
    assert found is not None
    rewritten, views = found
    outs = next(n for n in rewritten.graph.nodes if n.op == "output").args[0]
    assert len(outs) == 1
    assert [(v.base, v.shape, v.strides, v.offset) for v in views.outputs] == [  # type: ignore[union-attr]
        (0, (3, 4), (12, 1), 0),
        (0, (3, 4), (12, 1), 4),
        (0, (3, 4), (12, 1), 8),
    ]
    # the original graph is untouched: it stays the eager fallback
    assert len(next(n for n in gm.graph.nodes if n.op == "output").args[0]) == 3


def test_a_small_view_of_a_large_intermediate_keeps_its_buffer() -> None:
    """The last row of a large elementwise result is not worth writing the whole result
    for: the region is left as it is."""

    def f(x: torch.Tensor) -> torch.Tensor:
        return (torch.sigmoid(x))[-1]

    assert view_outputs(_traced(f, torch.randn(64, 16))) is None


def test_a_small_view_of_a_gemm_result_is_returned_as_a_view() -> None:
    """The value columns of a merged projection (a third of a GEMM's result) while the
    rest is read inside the region: the GEMM writes its result anyway, so the region
    returns it and the columns are a view of it, not a copy."""

    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        qk, v = (x @ w).split([8, 4], dim=-1)
        return torch.sigmoid(qk).sum(-1), v.view(3, 2, 2).transpose(0, 1)

    gm = _traced(f, torch.randn(3, 8), torch.randn(8, 12))
    found = view_outputs(gm)
    assert found is not None
    _, views = found
    value = views.outputs[1]
    assert isinstance(value, OutputView)
    assert (value.shape, value.strides, value.offset) == ((2, 3, 2), (2, 12, 1), 8)


def test_views_of_inputs_and_whole_outputs_are_left() -> None:
    """A view of an input, directly or through a view of it (its runtime strides are not
    the region's to promise), and an output covering its storage (a transpose:
    `layouts` re-describes it) are left."""

    def of_input(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x[:, :4], x.sum()

    def of_a_view_of_an_input(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.view(24)[:4], x.view(24)[4:], x * 2

    def whole(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).t()

    assert view_outputs(_traced(of_input, torch.randn(3, 8))) is None
    assert view_outputs(_traced(of_a_view_of_an_input, torch.randn(3, 8))) is None
    assert view_outputs(_traced(whole, torch.randn(3, 8))) is None


def test_a_base_returned_with_other_strides_is_copied_once() -> None:
    """A base the backend returns with padded rows is copied into the traced strides
    once a call, however many views read it: the views read the right elements of one
    buffer."""
    base = torch.arange(24.0).view(3, 8)
    padded = torch.zeros(3, 10)[:, :8]
    padded.copy_(base)
    first = OutputView(0, (3, 8), (8, 1), (3, 4), (8, 1), 0)
    second = OutputView(0, (3, 8), (8, 1), (3, 4), (8, 1), 4)
    call = with_output_views(lambda: (padded,), OutputViews((first, second, 0)))
    got = call()
    assert torch.equal(got[0], base[:, :4]) and torch.equal(got[1], base[:, 4:])
    assert _storage(got[0]) == _storage(got[1]) != _storage(padded)
    assert got[2] is padded


def test_size_one_dims_need_no_copy() -> None:
    """A base whose size-1 dims have other strides than traced (`layouts` gives them
    canonical ones) is the same memory: its views are taken in place."""
    base = torch.arange(20.0).view(1, 4, 1, 5)
    view = OutputView(0, (1, 4, 1, 5), (20, 5, 99, 1), (4, 2), (5, 1), 1)
    (got,) = with_output_views(lambda: (base,), OutputViews((view,)))()
    assert _storage(got) == _storage(base)
    assert torch.equal(got, base.view(4, 5)[:, 1:3])


def test_training_graphs_keep_their_copies() -> None:
    """With autograd a region's outputs are not made views of each other: a view saved
    for backward would share the buffer of an output the caller updates in place,
    unseen by autograd's version counters. The gradient is eager's from the values the
    forward computed."""

    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        base = x @ w
        return base, base[:, :4].sin()

    x, w = randn(3, 8, seed=1), randn(8, 12, seed=2).requires_grad_()
    compiled = fuseopt.compile(f, (x, w), backend="interpret", strict=True)
    base, y = compiled(x, w)
    with torch.no_grad():
        base.add_(100.0)
    (grad,) = torch.autograd.grad(y.sum(), w)
    w_eager = w.detach().clone().requires_grad_()
    (expected,) = torch.autograd.grad(f(x, w_eager)[1].sum(), w_eager)
    assert_close(grad, expected)
