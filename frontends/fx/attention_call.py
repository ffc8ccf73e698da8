"""`F.scaled_dot_product_attention` kept whole through AOTAutograd, whatever the device.

`scaled_dot_product_attention` is a composite: while AOTAutograd traces Dynamo's graph
it dispatches to the kernel PyTorch would pick for the tensors' device, dtype and
arguments. On a CPU that is one fused kernel the frontend converts to `nn.attention`;
on a GPU it depends: grouped-query heads in f32 (no memory-efficient kernel takes
them) trace as PyTorch's math fallback (a repeat of K and V, two batched GEMMs, a
softmax), and a mask whose last dim is not a multiple of 8 is padded and sliced
around the memory-efficient kernel. The math form over a decode step's cache length
compiled per token; the padding ran in PyTorch.

`substitute_attention` replaces each call in Dynamo's graph with
`fuseopt::scaled_dot_product_attention` (`torch.ops.fuseopt`), a custom op of the same
signature that AOTAutograd keeps as one node and the frontend converts to
`nn.attention`. Where it stays in PyTorch (a form `nn.attention` does not take), it runs
`F.scaled_dot_product_attention` itself. It has no backward, so the substitution is for
graphs that need no gradient (`needs_no_gradient`); training graphs keep PyTorch's call.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx import GraphModule


@torch.library.custom_op("fuseopt::scaled_dot_product_attention", mutates_args=())
def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """`F.scaled_dot_product_attention`, as one op (see the module docstring). The
    result is contiguous, as the op's fake result says (a fused kernel may return
    another layout)."""
    out = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attn_mask,
        dropout_p=dropout_p,
        is_causal=is_causal,
        scale=scale,
        enable_gqa=enable_gqa,
    )
    return out.contiguous()


@scaled_dot_product_attention.register_fake
def _fake(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """The result's shape: the query's but its last dim, the value's."""
    return query.new_empty((*query.shape[:-1], value.shape[-1]))


ATTENTION_OP = torch.ops.fuseopt.scaled_dot_product_attention.default
"""The op the frontend converts (`ops_attention`)."""


def needs_no_gradient(example_inputs: Sequence[Any]) -> bool:
    """Whether a graph of these inputs runs without autograd: grad mode is off, or no
    input requires a gradient (Dynamo guards on both)."""
    if not torch.is_grad_enabled():
        return True
    return not any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs)


def substitute_attention(gm: GraphModule) -> GraphModule:
    """Dynamo's graph `gm` with each `F.scaled_dot_product_attention` call replaced by
    `fuseopt::scaled_dot_product_attention`: a new GraphModule over a copy of its graph
    (`gm` itself, which Dynamo may still hold, keeps PyTorch's calls); `gm` itself when
    it has none."""
    target = F.scaled_dot_product_attention
    if not any(n.op == "call_function" and n.target is target for n in gm.graph.nodes):
        return gm
    graph = copy.deepcopy(gm.graph)
    for node in graph.nodes:
        if node.op == "call_function" and node.target is target:
            node.target = ATTENTION_OP
    return GraphModule(gm, graph)
