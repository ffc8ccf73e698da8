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

PyTorch's memory-efficient and cuDNN kernels, forward and backward, where they run in
PyTorch (`attention="eager"`, training graphs), need a bias whose strides are multiples of 16
bytes: the traced graph pads the mask and slices it back, and a compiled region that
computes the slice returns it contiguous (a decode step's mask of 129 keys: "attn_bias
is not correctly aligned"). `align_attention_biases` gives each such call an aligned
copy of its bias where the bias is not aligned already (`aligned_bias`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node

from fuseopt.frontends.fx.substitutes import substitute_calls


def _contiguous_sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """`F.scaled_dot_product_attention`, contiguous (a fused kernel may return another
    layout): the op's result, and on fake tensors its fake result (PyTorch's own fake
    SDPA: batch dims broadcast, grouped heads)."""
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


scaled_dot_product_attention = torch.library.custom_op(
    "fuseopt::scaled_dot_product_attention", mutates_args=()
)(_contiguous_sdpa)
"""`F.scaled_dot_product_attention` as one op (see the module docstring)."""
scaled_dot_product_attention.register_fake(_contiguous_sdpa)


ATTENTION_OP = torch.ops.fuseopt.scaled_dot_product_attention.default
"""The op the frontend converts (`ops_attention`)."""


def needs_no_gradient(gm: GraphModule, example_inputs: Sequence[Any]) -> bool:
    """Whether Dynamo's graph `gm` of these inputs runs without autograd: it never
    turns grad mode on itself (`torch.enable_grad()` inside the compiled code), and
    grad mode is off or no input requires a gradient (Dynamo guards on both)."""
    if any(
        n.op == "call_function" and n.target is torch._C._set_grad_enabled for n in gm.graph.nodes
    ):
        return False
    if not torch.is_grad_enabled():
        return True
    return not any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs)


def substitute_attention(gm: GraphModule) -> GraphModule:
    """Dynamo's graph `gm` with each `F.scaled_dot_product_attention` call replaced by
    `fuseopt::scaled_dot_product_attention` (`substitute_calls`)."""
    return substitute_calls(gm, {F.scaled_dot_product_attention: ATTENTION_OP})


BIASED_ATTENTION = {
    torch.ops.aten._scaled_dot_product_efficient_attention.default: 3,
    torch.ops.aten._scaled_dot_product_cudnn_attention.default: 3,
    torch.ops.aten._scaled_dot_product_efficient_attention_backward.default: 4,
    torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default: 8,
}
"""PyTorch's attention kernels that take a bias with aligned strides, forward and
backward (a training graph's backward reads the bias its forward saved), with the
position of the bias (`attn_bias`) among their arguments."""


def aligned_bias(bias: torch.Tensor | None) -> torch.Tensor | None:
    """`bias` as the memory-efficient and cuDNN attention kernels take it: itself when
    every stride but the last is a multiple of 16 bytes and the last is 1, else a copy
    in rows padded to 16 bytes (sliced back to its length), its broadcast dims (stride
    0) kept broadcast."""
    if bias is None:
        return None
    align = max(1, 16 // bias.element_size())
    strides = bias.stride()
    if not bias.dim() or (strides[-1] == 1 and all(s % align == 0 for s in strides[:-1])):
        return bias
    keep = tuple(
        slice(0, 1) if stride == 0 and size > 1 and d < bias.dim() - 1 else slice(None)
        for d, (size, stride) in enumerate(zip(bias.shape, strides, strict=True))
    )
    small = bias[keep]
    length = small.shape[-1]
    padded = small.new_empty((*small.shape[:-1], -(-length // align) * align))
    padded = padded.narrow(-1, 0, length)
    padded.copy_(small)
    return padded.expand(bias.shape)


def align_attention_biases(gm: GraphModule) -> GraphModule:
    """`gm` with `aligned_bias` applied to the bias of every call of BIASED_ATTENTION
    left in it (in place; see the module docstring). A bias the layers of a model share
    (one mask for every layer) is aligned once, before its first such call."""
    aligned_of: dict[Node, Node] = {}
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in BIASED_ATTENTION:
            continue
        at = BIASED_ATTENTION[node.target]
        bias = node.args[at] if len(node.args) > at else node.kwargs.get("attn_bias")
        if not isinstance(bias, Node):
            continue
        if bias not in aligned_of:
            with gm.graph.inserting_before(node):
                aligned_of[bias] = gm.graph.call_function(aligned_bias, (bias,))
        node.replace_input_with(bias, aligned_of[bias])
    changed = bool(aligned_of)
    if changed:
        gm.recompile()
    return gm
