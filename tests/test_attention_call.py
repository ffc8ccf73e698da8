"""frontends/fx/attention_call.py: SDPA kept as one op through AOTAutograd in graphs
that need no gradient, and PyTorch's memory-efficient and cuDNN attention kernels, where
they run in PyTorch, given a bias with strides of whole 16-byte vectors (a decode step's
mask of 129 keys computed by a compiled region came back contiguous, and the kernel
refused it: "attn_bias is not correctly aligned")."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx import Graph, GraphModule

import fuseopt
from fuseopt.frontends.fx.attention_call import (
    ATTENTION_OP,
    BIASED_ATTENTION,
    align_attention_biases,
    aligned_bias,
)

SHAPES = {
    "3-d": ((3, 5, 8), (3, 7, 8), (3, 7, 4)),
    "grouped heads": ((2, 8, 1, 16), (2, 2, 9, 16), (2, 2, 9, 16)),
    "broadcast batch": ((1, 2, 5, 8), (3, 2, 7, 8), (3, 2, 7, 8)),
}


@pytest.mark.parametrize("form", list(SHAPES))
def test_the_op_is_sdpa_and_its_fake_has_sdpa_shape(form: str) -> None:
    q, k, v = (torch.randn(s) for s in SHAPES[form])
    gqa = form == "grouped heads"
    want = F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
    got = ATTENTION_OP(q, k, v, None, 0.0, False, None, gqa)
    torch.testing.assert_close(got, want)
    assert got.is_contiguous()
    with FakeTensorMode() as mode:
        fake = ATTENTION_OP(*(mode.from_tensor(x) for x in (q, k, v)), None, 0.0, False, None, gqa)
    assert fake.shape == want.shape and fake.is_contiguous()


def test_a_batch_broadcast_attention_runs_in_pytorch_at_its_shape() -> None:
    """The fake shape is SDPA's: the call, which nn.attention does not take, runs in
    PyTorch and the result has the broadcast batch."""
    q, k, v = (torch.randn(s) for s in SHAPES["broadcast batch"])

    def f(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v) * 2

    torch._dynamo.reset()
    got = torch.compile(f, backend="fuseopt", options={"backend": "interpret"})(q, k, v)
    torch.testing.assert_close(got, f(q, k, v))


def test_grad_turned_on_inside_keeps_pytorch_attention() -> None:
    """Called under no_grad, a function that turns gradients on itself needs its
    attention's backward: the call is not substituted (the op has none)."""

    def f(q: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            return F.scaled_dot_product_attention(q, q, q) * 2

    q = torch.randn(1, 2, 5, 8, requires_grad=True)
    torch._dynamo.reset()
    compiled = torch.compile(f, backend="fuseopt", options={"backend": "interpret"})
    with torch.no_grad():
        out = compiled(q)
    out.sum().backward()
    grad, q.grad = q.grad, None
    with torch.no_grad():
        want = f(q)
    want.sum().backward()
    torch.testing.assert_close(grad, q.grad)


def test_eager_attention_and_training_graphs_keep_pytorchs_call() -> None:
    """attention="eager" leaves PyTorch's own kernel in PyTorch, and a training graph
    (the op has no backward) keeps PyTorch's call: no fuseopt op in either."""
    q, k, v = (torch.randn(s) for s in SHAPES["grouped heads"])

    def f(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True) * 2

    for options, leaf in (({"attention": "eager"}, q), ({}, q.clone().requires_grad_())):
        torch._dynamo.reset()
        compiled = fuseopt.compile(f, backend="interpret", **options)
        compiled(leaf, k, v).sum().backward() if leaf.requires_grad else compiled(leaf, k, v)
        targets = [r.target for r in compiled.fallbacks]
        assert any("aten._scaled_dot_product" in t for t in targets), targets
        assert not any(t.startswith("fuseopt.") for t in targets), targets


def _aligned(x: torch.Tensor) -> bool:
    align = 16 // x.element_size()
    return x.stride(-1) == 1 and all(s % align == 0 for s in x.stride()[:-1])


def test_a_misaligned_bias_is_copied_into_padded_rows() -> None:
    for dtype, length in ((torch.float32, 129), (torch.bfloat16, 9), (torch.float32, 1)):
        bias = torch.randn(2, 1, 3, length).to(dtype)
        got = aligned_bias(bias)
        assert got is not None and _aligned(got), got.stride()
        assert torch.equal(got, bias) and got.shape == bias.shape


def test_broadcast_dims_stay_broadcast() -> None:
    """A mask expanded over heads is padded once, not once per head."""
    bias = torch.randn(2, 1, 1, 129).expand(2, 32, 1, 129)
    got = aligned_bias(bias)
    assert got is not None and _aligned(got)
    assert got.stride(1) == 0 and torch.equal(got, bias)


def test_an_aligned_bias_and_none_are_passed_through() -> None:
    bias = torch.randn(2, 1, 4, 128)
    assert aligned_bias(bias) is bias
    assert aligned_bias(None) is None


def test_every_biased_attention_call_gets_the_aligned_bias() -> None:
    """The graph rewrite: the bias argument of each memory-efficient / cuDNN attention
    call goes through `aligned_bias` first; other calls are left alone."""
    graph = Graph()
    q, k, v, bias = (graph.placeholder(n) for n in ("q", "k", "v", "bias"))
    outs = [  # the bias at its position, the other arguments q (not read here)
        graph.call_function(t, tuple(bias if i == at else q for i in range(at + 1)))
        for t, at in BIASED_ATTENTION.items()
    ]
    other = graph.call_function(torch.ops.aten.add.Tensor, (bias, bias))
    graph.output((*outs, other))
    gm = align_attention_biases(GraphModule(torch.nn.Module(), graph))
    seen = 0
    for node in gm.graph.nodes:
        if node.target in BIASED_ATTENTION:
            at = BIASED_ATTENTION[node.target]
            assert node.args[at].target is aligned_bias, node.args
            assert all(a is q for a in node.args[:at]), node.args
            seen += 1
        if node.target is torch.ops.aten.add.Tensor:
            assert node.args == (bias, bias)
    assert seen == 4  # forward and backward, memory-efficient and cuDNN


def test_a_shared_bias_is_aligned_once() -> None:
    """One mask read by every layer's attention is aligned by one call, before the
    first attention, and every call reads that aligned bias; another bias gets its own."""
    graph = Graph()
    q, k, v, bias, other = (graph.placeholder(n) for n in ("q", "k", "v", "bias", "other"))
    target = next(iter(BIASED_ATTENTION))
    outs = [graph.call_function(target, (q, k, v, bias, False)) for _ in range(3)]
    outs.append(graph.call_function(target, (q, k, v, other, False)))
    graph.output(tuple(outs))
    gm = align_attention_biases(GraphModule(torch.nn.Module(), graph))
    aligned = [n for n in gm.graph.nodes if n.target is aligned_bias]
    assert [a.args for a in aligned] == [(bias,), (other,)]
    calls = [n for n in gm.graph.nodes if n.target is target]
    assert [c.args[3] for c in calls] == [aligned[0]] * 3 + [aligned[1]]
    gm.graph.lint()
