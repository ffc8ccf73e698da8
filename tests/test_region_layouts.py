"""Compiled regions keep the dimension order PyTorch traced at their edges
(`frontends/fx/layouts.py`): outputs come back with eager's stride order (a `.view` the
user, an eager fallback or the next graph applies works as in eager), permuted inputs
are read in place (no copy), on the interpret and Triton backends, through both entry
points."""

from __future__ import annotations

import pytest
import torch
from test_frontend_common import assert_close, randn

import fuseopt
from fuseopt.frontends.fx.layouts import dimension_order, inverse, is_dense

BACKENDS = ["interpret", "triton"]


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


def _order(t: torch.Tensor) -> tuple[int, ...]:
    return dimension_order(t)


class Heads(torch.nn.Module):
    """A projection split into heads and transposed (attention's q), a permuted
    elementwise result, a slice of a fused projection and a plain result."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(32, 96)
        torch.nn.init.normal_(self.proj.weight, std=0.3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        b, s, _ = x.shape
        qkv = self.proj(x)
        q = qkv[..., :32].view(b, s, 4, 8).transpose(1, 2)
        k = (qkv[..., 32:64] * 2).view(b, s, 4, 8).permute(0, 2, 3, 1)
        v = torch.sigmoid(qkv)[..., 64:]
        return q, k, v, x + 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("entry", ["fuseopt.compile", "torch.compile"])
def test_outputs_have_eager_stride_order(backend: str, entry: str) -> None:
    """Every output's dims are ordered by stride as eager's, with eager's values, and
    dense, or a view with eager's strides (q: columns of the projection's GEMM result,
    returned as a view of it as eager does)."""
    model = Heads().eval()
    x = randn(2, 6, 32)
    if entry == "fuseopt.compile":
        compiled = fuseopt.compile(model, (x,), backend=backend, strict=True)
    else:
        compiled = torch.compile(model, backend="fuseopt", options={"backend": backend})
    with torch.no_grad():
        got, want = compiled(x), model(x)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w)
        assert _order(g) == _order(w), (g.stride(), w.stride())
        assert is_dense(g, _order(g)) or g.stride() == w.stride()


@pytest.mark.parametrize("backend", BACKENDS)
def test_view_after_graph_break(backend: str) -> None:
    """The DDP-split failure: a graph returns heads transposed, the next graph (after a
    graph break, as Dynamo's DDPOptimizer splits at gradient buckets) transposes back and
    views them merged. With contiguous region outputs that `view` raised "view size is
    not compatible with input tensor's size and stride"."""

    def attention_out(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        heads = (x @ w).view(2, 5, 4, 8).transpose(1, 2) * 0.5
        torch._dynamo.graph_break()
        merged = heads.transpose(1, 2).view(2, 5, 32)
        return merged @ w.t() + 1

    x, w = randn(2, 5, 32), randn(32, 32)
    compiled = torch.compile(attention_out, backend="fuseopt", options={"backend": backend})
    assert_close(compiled(x, w), attention_out(x, w))


@pytest.mark.parametrize("backend", BACKENDS)
def test_user_view_of_returned_transpose(backend: str) -> None:
    """What the user does with a returned transpose works as in eager."""

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x).transpose(0, 1)

    x = randn(6, 10)
    out = torch.compile(f, backend="fuseopt", options={"backend": backend})(x)
    assert out.stride() == f(x).stride()
    assert_close(out.t().view(60), f(x).t().view(60))


@pytest.mark.parametrize("backend", BACKENDS)
def test_permuted_input_read_in_place(backend: str) -> None:
    """A transposed input is passed as its dense storage view: one kernel (no copy of
    the input), the result in the input's order as eager's."""

    class Act(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(x) * 3 - x

    x = randn(2, 7, 12).permute(2, 0, 1)
    compiled = fuseopt.compile(Act(), (x,), backend=backend, strict=True)
    got, want = compiled(x), Act()(x)
    assert_close(got, want)
    assert got.stride() == want.stride()
    assert len(compiled.kernels) == 1, [k.name for k in compiled.kernels]
    y = randn(7, 12, 2).permute(2, 0, 1).contiguous()  # the same shape, other strides
    assert_close(compiled(y), Act()(y))


@pytest.mark.parametrize("backend", BACKENDS)
def test_permuted_input_to_reduction_and_gemm(backend: str) -> None:
    """Transposed inputs feeding a row reduction and a GEMM: values as eager's."""

    class Mixed(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.softmax(a, -1) @ b + a.sum(-1, keepdim=True)

    a, b = randn(9, 5).t(), randn(3, 9).t()
    compiled = fuseopt.compile(Mixed(), (a, b), backend=backend, strict=True)
    assert_close(compiled(a, b), Mixed()(a, b))


def test_dimension_order() -> None:
    """Orders by stride, size-1 and broadcast dims in place, ties in logical order;
    density."""
    assert dimension_order(torch.empty(2, 3, 4)) == (0, 1, 2)
    assert dimension_order(torch.empty(2, 3, 4).transpose(1, 2)) == (0, 2, 1)
    assert dimension_order(torch.empty(2, 3, 4).permute(2, 0, 1)) == (1, 2, 0)
    assert dimension_order(torch.empty(3, 1, 4).transpose(0, 2)) == (2, 1, 0)
    assert dimension_order(torch.empty(4, 1).expand(4, 5)) == (0, 1)
    assert dimension_order(torch.empty(1, 5).expand(4, 5)) == (0, 1)
    assert dimension_order(torch.empty(3, 1, 4).expand(3, 2, 4).transpose(0, 2)) == (2, 1, 0)
    t = torch.empty(2, 8)[:, :3]
    assert dimension_order(t) == (0, 1) and not is_dense(t, (0, 1))
    p = torch.empty(5, 6, 7).permute(1, 2, 0)
    assert is_dense(p, dimension_order(p))
    assert p.permute(dimension_order(p)).is_contiguous()
    assert inverse((1, 2, 0)) == (2, 0, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_repeated_heads_keep_the_unit_stride_last(backend: str) -> None:
    """Grouped-query heads repeated by expand + reshape (Hugging Face's repeat_kv) are
    traced with a stride-0 head dim; the region's output keeps the last dim unit-stride
    (found under tensor parallelism: the broadcast dim moved innermost, and PyTorch's CPU
    flash attention, which reads the last dim as unit-stride, returned wrong values)."""

    class RepeatKV(torch.nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
            k = (k * 2)[:, :, None].expand(1, 1, 2, 16, 16).reshape(1, 2, 16, 16)
            flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
            return flash(q, k, k, 0.0, True)[0]

    q, k = randn(1, 2, 16, 16), randn(1, 1, 16, 16)
    compiled = torch.compile(RepeatKV(), backend="fuseopt", options={"backend": backend})
    assert_close(compiled(q, k), RepeatKV()(q, k))


@pytest.mark.parametrize("backend", BACKENDS)
def test_permuted_output_takes_in_place_updates(backend: str) -> None:
    """A permuted output is not an autograd view (found in review: `Tensor.permute`
    results made `y.add_(1)` fail in training, "Output 0 of CompiledFunction is a view
    and is being modified inplace", and under no_grad "A view was created in no_grad
    mode"); a residual update after a graph break works as in eager."""

    def f(x: torch.Tensor) -> torch.Tensor:
        return x.t() * 2 + 1

    x = randn(8, 6).requires_grad_()
    compiled = torch.compile(f, backend="fuseopt", options={"backend": backend})
    y = compiled(x)
    y.add_(1)
    y.sum().backward()
    want = f(x.detach()) + 1
    assert_close(y.detach(), want)
    assert_close(x.grad, torch.full((8, 6), 2.0))
    w = randn(6, 8).requires_grad_()
    with torch.no_grad():
        z = compiled(x.detach())
    z.mul_(w)
    assert_close(z.detach(), f(x.detach()) * w.detach())

    def residual(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = (x @ w).view(2, 5, 4, 8).transpose(1, 2) * 0.5
        torch._dynamo.graph_break()
        h += 1
        return h.sum()

    a, b = randn(2, 5, 32), randn(32, 32).requires_grad_()
    torch._dynamo.reset()
    got = torch.compile(residual, backend="fuseopt", options={"backend": backend})(a, b)
    assert_close(got, residual(a, b))
