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
    compiled = fuseopt.compile(model, (x,), backend=backend, strict=True)
    with torch.no_grad():
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
    compiled = fuseopt.compile(model, (x,), backend=backend, attention="eager")
    with torch.no_grad():
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


def test_views_of_inputs_and_whole_outputs_are_left() -> None:
    """A view of an input (its runtime strides are not the region's to promise) and an
    output covering its storage (a transpose: `layouts` re-describes it) are left."""

    def of_input(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x[:, :4], x.sum()

    def whole(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).t()

    assert view_outputs(_traced(of_input, torch.randn(3, 8))) is None
    assert view_outputs(_traced(whole, torch.randn(3, 8))) is None


def test_a_base_returned_with_other_strides_is_copied_first() -> None:
    """A base the backend returns with padded rows is copied into the traced strides
    before the view is taken: the view reads the right elements."""
    base = torch.arange(24.0).view(3, 8)
    padded = torch.zeros(3, 10)[:, :8]
    padded.copy_(base)
    view = OutputView(0, (3, 8), (8, 1), (3, 4), (8, 1), 4)
    call = with_output_views(lambda: (padded,), OutputViews((view, 0)))
    got = call()
    assert torch.equal(got[0], base[:, 4:])
    assert got[1] is padded
