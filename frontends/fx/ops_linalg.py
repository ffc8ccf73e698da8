"""Converters for matrix products: mm, bmm, matmul, addmm, baddbmm and linear.

All become `nn.matmul` (batched, transpose flags) or `nn.linear`; a transpose feeding
the right operand of a 2-d product is folded into `transpose_b`, so `x @ w.t()` (what
AOTAutograd makes of `nn.Linear`) reaches the fuser as one op.
"""

from __future__ import annotations

import torch
from torch.fx import Node
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import is_float
from fuseopt.frontends.fx.context import ImportContext, Imported, register

aten = torch.ops.aten


def _type(v: SSAValue) -> TensorType:
    t = v.type
    assert isinstance(t, TensorType)
    return t


def _float_operands(ctx: ImportContext, *values: SSAValue) -> None:
    for v in values:
        if not is_float(_type(v).element_type):
            raise ctx.fail(f"matrix products need floating-point tensors, got {v.type}")
    if len({_type(v).element_type for v in values}) != 1:
        raise ctx.fail("matrix product operands have different dtypes")


def _rhs(ctx: ImportContext, arg: Node) -> tuple[SSAValue, bool]:
    """The right operand, with a 2-d transpose (`aten.t`/`transpose`) folded away."""
    v = ctx.value(arg)
    producer = v.owner
    if isinstance(producer, nn.TransposeOp) and len(producer.perm) == 2 and producer.perm == (1, 0):
        return producer.input, True
    return v, False


def _matmul(ctx: ImportContext, a: SSAValue, b: SSAValue, transpose_b: bool) -> SSAValue:
    _float_operands(ctx, a, b)
    try:
        op = nn.MatmulOp(a, b, transpose_b=transpose_b)
    except ValueError as e:
        raise ctx.fail(str(e)) from None
    return ctx.emit(op)


@register(aten.mm.default, aten.bmm.default)
def mm(ctx: ImportContext, node: Node) -> Imported:
    """mm(a, b) / bmm(a, b)."""
    b, tb = _rhs(ctx, node.args[1])
    return _matmul(ctx, ctx.value(node.args[0]), b, tb)


@register(aten.matmul.default, aten.mv.default, aten.dot.default)
def matmul(ctx: ImportContext, node: Node) -> Imported:
    """matmul(a, b) (also mv and dot): batch dims broadcast; vectors are reshaped to
    matrices and back."""
    a, b = ctx.value(node.args[0]), ctx.value(node.args[1])
    ra, rb = len(_type(a).get_shape()), len(_type(b).get_shape())
    if ra == 1:
        a = ctx.reshape(a, (1, *_type(a).get_shape()))
    if rb == 1:
        b = ctx.reshape(b, (*_type(b).get_shape(), 1))
    sa, sb = _type(a).get_shape(), _type(b).get_shape()
    if len(sb) > 2 and sa[:-2] != sb[:-2]:
        batch = list(torch.broadcast_shapes(sa[:-2], sb[:-2]))
        a = ctx.broadcast(a, (*batch, *sa[-2:]))
        b = ctx.broadcast(b, (*batch, *sb[-2:]))
    return ctx.reshape(_matmul(ctx, a, b, False), ctx.out_type().get_shape())


def _epilogue(ctx: ImportContext, node: Node, product: SSAValue, bias_arg: Node) -> SSAValue:
    """beta * bias + alpha * product, as addmm/baddbmm define it."""
    beta, alpha = ctx.arg(3, "beta", 1), ctx.arg(4, "alpha", 1)
    t = _type(product)
    shape = t.get_shape()
    if alpha != 1:
        product = ctx.emit(nn.MulOp(product, ctx.constant(alpha, t.element_type, shape)))
    if beta == 0:
        return product
    bias = ctx.operand(bias_arg, t.element_type, shape)
    if beta != 1:
        bias = ctx.emit(nn.MulOp(bias, ctx.constant(beta, t.element_type, shape)))
    return ctx.emit(nn.AddOp(product, bias))


@register(aten.addmm.default, aten.baddbmm.default)
def addmm(ctx: ImportContext, node: Node) -> Imported:
    """addmm(bias, a, b, beta=1, alpha=1) = beta * bias + alpha * (a @ b)."""
    b, tb = _rhs(ctx, node.args[2])
    product = _matmul(ctx, ctx.value(node.args[1]), b, tb)
    return _epilogue(ctx, node, product, node.args[0])


@register(aten.linear.default)
def linear(ctx: ImportContext, node: Node) -> Imported:
    """linear(x, weight, bias=None) = x @ weight^T + bias, as one nn.linear."""
    x, w = ctx.value(node.args[0]), ctx.value(node.args[1])
    bias = ctx.arg(2, "bias", None)
    b = ctx.value(bias) if bias is not None else None
    _float_operands(ctx, x, w, *([b] if b is not None else []))
    if len(_type(w).get_shape()) != 2 or len(_type(x).get_shape()) < 1:
        raise ctx.fail(f"linear needs a 2-d weight, got {w.type}")
    if b is not None and len(_type(b).get_shape()) != 1:
        raise ctx.fail(f"linear needs a 1-d bias, got {b.type}")
    squeeze = len(_type(x).get_shape()) == 1
    if squeeze:
        x = ctx.reshape(x, (1, *_type(x).get_shape()))
    y = ctx.emit(nn.LinearOp(x, w, b))
    return ctx.reshape(y, ctx.out_type().get_shape()) if squeeze else y
