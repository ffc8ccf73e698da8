"""Converters for attention: the fused scaled-dot-product-attention kernels PyTorch
dispatches `F.scaled_dot_product_attention` to (flash on CPU; flash, memory-efficient
and cuDNN on CUDA), and `_safe_softmax` from its math path.

An attention node becomes one `nn.attention` op (softmax(q @ k^T * scale + mask) @ v,
which convert-nn-to-tile schedules as one flash-attention kernel): 3-d operands gain a
head dim of 1; key/value with fewer heads stay as they are (grouped-query attention is
an index map in the kernel, never a copy); a mask is kept at its own broadcastable shape
(an `expand` in front of it is peeled off, so the kernel reads the small tensor), a bool
mask as i1, a float mask in the query's type or f32. Only the attention output is
produced: when a node's other results are used (logsumexp for the backward pass), or
dropout is on, the node runs eagerly, so training through SDPA falls back for the
attention kernel only.

Whether the fused kernels are converted at all is the frontend option `attention`
(FUSED_ATTENTION; `"nn"` decomposes the op into matmul, softmax and matmul with
nn-decompose's `decompose_attention`); `fuseopt.export` always converts them.
"""

from __future__ import annotations

import operator

import torch
from torch.fx import Node
from xdsl.dialects.builtin import TensorType, f32
from xdsl.ir import SSAValue

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import is_bool
from fuseopt.frontends.fx.attention_call import ATTENTION_OP
from fuseopt.frontends.fx.context import ImportContext, Imported, register
from fuseopt.passes.nn_canonicalization_patterns import splat_of
from fuseopt.passes.nn_match_attention import unbroadcast

aten = torch.ops.aten

FUSED_ATTENTION = (
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_cudnn_attention.default,
    ATTENTION_OP,
)
"""PyTorch's fused attention kernels and fuseopt's whole call (`attention_call`), which
the converters below (and the one of the `scaled_dot_product_attention` composite, which
torch.export keeps) turn into `nn.attention` (frontend option `attention`: "fused", the
default; "nn" decomposed; "eager" left to PyTorch)."""


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


def _unbroadcast(v: SSAValue) -> SSAValue:
    """`v` with the `nn.broadcast`s producing it peeled off (down to rank 4 or less)."""
    return unbroadcast(v, max_rank=4)


def _splat_of(v: SSAValue) -> float | int | None:
    """The value of a (broadcast) splat constant, else None."""
    return splat_of(_unbroadcast(v))


def _mask_operand(
    ctx: ImportContext, mask: Node, full: tuple[int, ...], element: object, one_head: bool
) -> SSAValue:
    """The mask as a rank-4 tensor broadcastable to `full` ([B, Hq, L, S]): an
    `nn.broadcast` producing it is peeled off (the kernel broadcasts by indexing), as is
    the `where(keep, 0, -inf)` that turns a boolean mask into an additive one (PyTorch's
    CPU flash kernel is handed that: the kernel reads `keep` as i1); a `where(keep, 0,
    finfo.min)` (what PyTorch's CUDA kernels are handed) is computed at `keep`'s shape; a
    lower rank gains leading 1s (for 3-d attention, `one_head`, a head dim of 1 after
    the batch), a float mask of another type becomes f32."""
    val = ctx.val(mask)
    if not isinstance(val, torch.Tensor):
        raise ctx.fail("the attention mask must be a tensor")
    m = _unbroadcast(ctx.value(mask))
    select = m.owner
    if isinstance(select, nn.SelectOp) and _splat_of(select.operands[1]) == 0.0:
        fill = _splat_of(select.operands[2])
        keep = _unbroadcast(select.operands[0])
        if fill == float("-inf"):
            m = keep  # where(keep, 0, -inf): `keep` itself
        elif fill is not None and _shape(keep) != _shape(m):
            # where(keep, 0, finfo.min) of a broadcast `keep`: the same select at
            # `keep`'s shape (exact; the kernel broadcasts it by indexing)
            t = _type(m).element_type
            small = _shape(keep)
            m = ctx.emit(
                nn.SelectOp(keep, ctx.constant(0.0, t, small), ctx.constant(fill, t, small))
            )
    shape = _shape(m)
    rank = 3 if one_head else 4
    if len(shape) > rank:
        raise ctx.fail(f"an attention mask of rank {len(shape)} for rank-{rank} attention")
    shape4 = (1,) * (rank - len(shape)) + shape
    if one_head:
        shape4 = (shape4[0], 1, *shape4[1:])
    if any(d not in (1, f) for d, f in zip(shape4, full, strict=True)):
        raise ctx.fail(f"the attention mask {list(shape)} does not broadcast to {list(full)}")
    m = ctx.reshape(m, shape4)
    t = _type(m).element_type
    if is_bool(t) or t in (element, f32):
        return m
    return ctx.cast(m, f32)


def attention(
    ctx: ImportContext,
    q: SSAValue,
    k: SSAValue,
    v: SSAValue,
    mask: Node | None,
    is_causal: bool,
    scale: float | None,
) -> SSAValue:
    """One `nn.attention` for (batch, heads, seq, dim) operands (3-d: one head)."""
    ranks = {len(_shape(x)) for x in (q, k, v)}
    if ranks == {3}:
        q, k, v = (ctx.reshape(x, (_shape(x)[0], 1, *_shape(x)[1:])) for x in (q, k, v))
    elif ranks != {4}:
        raise ctx.fail("attention needs 3-d or 4-d (batch, heads, seq, dim) operands")
    b, h, lq, e = _shape(q)
    hk, s = _shape(k)[1], _shape(k)[2]
    kb, vb = _shape(k), _shape(v)
    if kb[0] != b or vb[0] != b or kb[3] != e or vb[1:3] != (hk, s):
        # PyTorch broadcasts batch dims (a key of batch 1) and repeats 3-d GQA along
        # the batch: such forms run in PyTorch's kernel
        raise ctx.fail(
            f"attention over query {list(_shape(q))}, key {list(kb)}, value {list(vb)}: "
            "only [B, H, L, E] / [B, Hkv, S, E] / [B, Hkv, S, Ev] operands are fused"
        )
    if 0 in (*_shape(q), *kb, *vb):
        raise ctx.fail("attention over an empty operand runs in PyTorch")
    if hk == 0 or h % hk:
        raise ctx.fail(f"{h} query heads are not a multiple of {hk} key/value heads")
    element = _type(q).element_type
    m = None if mask is None else _mask_operand(ctx, mask, (b, h, lq, s), element, ranks == {3})
    factor = scale if scale is not None else 1.0 / float(e) ** 0.5
    out = ctx.emit(nn.AttentionOp(q, k, v, m, float(factor), is_causal))
    return ctx.reshape(out, (b, lq, _shape(v)[-1])) if ranks == {3} else out


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


@register(aten.scaled_dot_product_attention.default, ATTENTION_OP)
def scaled_dot_product_attention(ctx: ImportContext, node: Node) -> Imported:
    """scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
    is_causal=False, *, scale=None, enable_gqa=False): the composite itself, as
    torch.export keeps it, or fuseopt's whole call in graphs that need no gradient
    (`attention_call`; training graphs reach the fused kernels above)."""
    _no_dropout(ctx, ctx.arg(4, "dropout_p", 0.0))
    q, k, v = (ctx.value(a) for a in node.args[:3])
    heads = {_shape(x)[-3] for x in (q, k, v) if len(_shape(x)) >= 3}
    # scale and enable_gqa: keyword-only in ATen's schema, positional in fuseopt's op
    if len(heads) > 1 and not ctx.arg(7, "enable_gqa", False):
        raise ctx.fail("key/value heads differ from the query's without enable_gqa")
    return attention(
        ctx,
        q,
        k,
        v,
        ctx.arg(3, "attn_mask"),
        bool(ctx.arg(5, "is_causal", False)),
        ctx.arg(6, "scale"),
    )


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
