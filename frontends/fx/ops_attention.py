"""Converters for attention: the fused scaled-dot-product-attention kernels PyTorch
dispatches `F.scaled_dot_product_attention` to (flash on CPU; flash, memory-efficient
and cuDNN on CUDA), and `_safe_softmax` from its math path.

An attention node becomes nn primitives, as PyTorch's math reference defines it:

    softmax(q @ k^T * scale + mask) @ v

computed in f32 for f16/bf16 inputs (the fused kernels accumulate in f32). A causal
mask is top-left aligned (`ones(L, S).tril()`), a boolean mask selects -inf where it is
False, a float mask is added; key/value with fewer heads (grouped-query attention) are
broadcast over each group. Only the attention output is produced: when a node's other
results are used (logsumexp for the backward pass), or dropout is on, the node runs
eagerly, so training through SDPA falls back for the attention kernel only.

Whether the fused kernels are converted at all is the frontend option `attention`
(see FUSED_ATTENTION); `fuseopt.export` always converts them.
"""

from __future__ import annotations

import operator

import torch
from torch.fx import Node
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    TensorType,
    f32,
)
from xdsl.ir import SSAValue

from fuseopt.dialects import nn
from fuseopt.frontends.fx.context import ImportContext, Imported, register

aten = torch.ops.aten

FUSED_ATTENTION = (
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_cudnn_attention.default,
)
"""PyTorch's fused attention kernels. By default (frontend option `attention="eager"`)
they stay eager: nn-fuse has no attention fusion yet, and PyTorch's flash kernels beat
an unfused softmax(QK^T)V. `attention="nn"` converts them with the converters below."""


def _type(v: SSAValue) -> TensorType:
    t = v.type
    assert isinstance(t, TensorType)
    return t


def _shape(v: SSAValue) -> tuple[int, ...]:
    return tuple(_type(v).get_shape())


def _only_output_used(ctx: ImportContext, node: Node) -> None:
    for user in node.users:
        if user.target is not operator.getitem or user.args[1] != 0:
            raise ctx.fail("only the attention output is supported (logsumexp is used)")


def _repeat_heads(ctx: ImportContext, x: SSAValue, heads: int) -> SSAValue:
    """(B, Hkv, S, D) -> (B, heads, S, D), each key/value head serving heads/Hkv queries."""
    b, hkv, s, d = _shape(x)
    if hkv == heads:
        return x
    if heads % hkv:
        raise ctx.fail(f"{heads} query heads are not a multiple of {hkv} key/value heads")
    grouped = ctx.reshape(x, (b, hkv, 1, s, d))
    return ctx.reshape(ctx.broadcast(grouped, (b, hkv, heads // hkv, s, d)), (b, heads, s, d))


def _causal_mask(ctx: ImportContext, rows: int, cols: int) -> SSAValue:
    """A (rows, cols) i1 constant, True on and below the diagonal (top-left aligned)."""
    values = [float(j <= i) for i in range(rows) for j in range(cols)]
    dense = DenseIntOrFPElementsAttr.from_list(TensorType(f32, (rows, cols)), values)
    ones = ctx.emit(nn.ConstantOp(dense, dense.type))
    return ctx.emit(nn.CompareOp("gt", ones, ctx.constant(0.5, f32, (rows, cols))))


def attention(
    ctx: ImportContext,
    q: SSAValue,
    k: SSAValue,
    v: SSAValue,
    mask: Node | None,
    is_causal: bool,
    scale: float | None,
) -> SSAValue:
    """softmax(q @ k^T * scale + mask) @ v for 4-d (batch, heads, seq, dim) operands."""
    if any(len(_shape(x)) != 4 for x in (q, k, v)):
        raise ctx.fail("attention needs 4-d (batch, heads, seq, dim) operands")
    element = _type(q).element_type
    compute = f32 if isinstance(element, Float16Type | BFloat16Type) else element
    b, h, lq, e = _shape(q)
    q, k, v = (ctx.cast(x, compute) for x in (q, k, v))
    k, v = _repeat_heads(ctx, k, h), _repeat_heads(ctx, v, h)
    ls = _shape(k)[2]
    scores = ctx.emit(nn.MatmulOp(q, k, transpose_b=True))
    factor = scale if scale is not None else 1.0 / float(e) ** 0.5
    scores = ctx.emit(nn.MulOp(scores, ctx.constant(factor, compute, (b, h, lq, ls))))
    full = (b, h, lq, ls)
    neg_inf = ctx.constant(float("-inf"), compute, full)
    if is_causal:
        allowed = ctx.broadcast(_causal_mask(ctx, lq, ls), full)
        scores = ctx.emit(nn.SelectOp(allowed, scores, neg_inf))
    if mask is not None:
        mask_val = ctx.val(mask)
        if not isinstance(mask_val, torch.Tensor):
            raise ctx.fail("the attention mask must be a tensor")
        if mask_val.dtype == torch.bool:
            allowed = ctx.broadcast(ctx.value(mask), full)
            scores = ctx.emit(nn.SelectOp(allowed, scores, neg_inf))
        else:
            scores = ctx.emit(nn.AddOp(scores, ctx.operand(mask, compute, full)))
    probs = ctx.emit(nn.SoftmaxOp(scores, 3))
    out = ctx.emit(nn.MatmulOp(probs, v))
    return ctx.cast(out, element)


def _no_dropout(ctx: ImportContext, p: object) -> None:
    if p not in (0, 0.0, None):
        raise ctx.fail("attention dropout is random; it runs eagerly")


@register(aten._scaled_dot_product_flash_attention_for_cpu.default)
def flash_attention_cpu(ctx: ImportContext, node: Node) -> Imported:
    """_scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, *,
    attn_mask, scale) -> (output, logsumexp)."""
    _only_output_used(ctx, node)
    _no_dropout(ctx, ctx.arg(3, "dropout_p", 0.0))
    q, k, v = (ctx.value(a) for a in node.args[:3])
    out = attention(
        ctx,
        q,
        k,
        v,
        node.kwargs.get("attn_mask"),
        bool(ctx.arg(4, "is_causal", False)),
        node.kwargs.get("scale"),
    )
    return (out, None)


@register(aten._scaled_dot_product_flash_attention.default)
def flash_attention(ctx: ImportContext, node: Node) -> Imported:
    """_scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal, ...; scale)."""
    _only_output_used(ctx, node)
    _no_dropout(ctx, ctx.arg(3, "dropout_p", 0.0))
    q, k, v = (ctx.value(a) for a in node.args[:3])
    out = attention(
        ctx, q, k, v, None, bool(ctx.arg(4, "is_causal", False)), node.kwargs.get("scale")
    )
    return (out, *([None] * 8))


@register(
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_cudnn_attention.default,
)
def biased_attention(ctx: ImportContext, node: Node) -> Imported:
    """Memory-efficient / cuDNN attention (q, k, v, attn_bias, compute_log_sumexp,
    dropout_p, is_causal, ...; scale)."""
    _only_output_used(ctx, node)
    _no_dropout(ctx, ctx.arg(5, "dropout_p", 0.0))
    q, k, v = (ctx.value(a) for a in node.args[:3])
    out = attention(
        ctx,
        q,
        k,
        v,
        ctx.arg(3, "attn_bias"),
        bool(ctx.arg(6, "is_causal", False)),
        node.kwargs.get("scale"),
    )
    count = len(ctx.node.meta.get("val") or ()) or 1
    return (out, *([None] * (count - 1)))


@register(aten._safe_softmax.default)
def safe_softmax(ctx: ImportContext, node: Node) -> Imported:
    """_safe_softmax(x, dim, dtype=None): softmax, but 0 on rows that are all -inf."""
    out = ctx.out_val()
    element = ctx.element(out.dtype)
    x = ctx.cast(ctx.value(node.args[0]), element)
    shape = _shape(x)
    if not shape:
        raise ctx.fail("_safe_softmax of a 0-d tensor")
    if 0 in shape:  # an empty result (and no max over an axis of size 0)
        return x
    axis = ctx.axis(node.args[1], len(shape))
    probs = ctx.emit(nn.SoftmaxOp(x, axis))
    row_max = ctx.broadcast(ctx.emit(nn.ReduceMaxOp(x, [axis], keepdim=True)), shape)
    dead = ctx.emit(nn.CompareOp("eq", row_max, ctx.constant(float("-inf"), element, shape)))
    return ctx.emit(nn.SelectOp(dead, ctx.constant(0.0, element, shape), probs))
