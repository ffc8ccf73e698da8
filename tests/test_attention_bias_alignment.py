"""PyTorch's memory-efficient and cuDNN attention kernels, where they run in PyTorch,
get a bias with strides of whole 16-byte vectors (frontends/fx/attention_call.py): a
decode step's mask of 129 keys computed by a compiled region came back contiguous, and
the kernel refused it ("attn_bias is not correctly aligned")."""

from __future__ import annotations

import torch
from torch.fx import Graph, GraphModule

from fuseopt.frontends.fx.attention_call import (
    BIASED_ATTENTION,
    align_attention_biases,
    aligned_bias,
)


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
    outs = [graph.call_function(t, (q, k, v, bias, False)) for t in BIASED_ATTENTION]
    other = graph.call_function(torch.ops.aten.add.Tensor, (bias, bias))
    graph.output((*outs, other))
    gm = align_attention_biases(GraphModule(torch.nn.Module(), graph))
    for node in gm.graph.nodes:
        if node.target in BIASED_ATTENTION:
            assert node.args[3].target is aligned_bias, node.args
        if node.target is torch.ops.aten.add.Tensor:
            assert node.args == (bias, bias)
