"""Converters for the losses PyTorch keeps as ATen ops: nll_loss forward and backward
(cross_entropy is log_softmax then nll_loss).

The class a target picks is read without a gather: a comparison of the class index with
the target selects it in a row reduction, which nn-fuse fuses with the log_softmax
before it (one row kernel for cross-entropy, as fused cross-entropy kernels do). A
target outside [0, C) that is not `ignore_index` makes that row's loss NaN (PyTorch
raises; a wrong finite loss would pass unnoticed).
"""

from __future__ import annotations

import torch
from torch.fx import Node
from xdsl.dialects.builtin import TensorType, f32, i1, i64
from xdsl.ir import SSAValue

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import is_float
from fuseopt.frontends.fx.context import ImportContext, Imported, register
from fuseopt.frontends.fx.ops_creation import index_vector

aten = torch.ops.aten

REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
"""PyTorch's reduction enum as nll_loss_forward takes it."""


def _shape(v: SSAValue) -> tuple[int, ...]:
    t = v.type
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


class _Picked:
    """The pieces of nll_loss for inputs (N, C) and targets (N,): which class each row
    picks (`hit`, N x C booleans), whether the row is ignored, whether its target is
    valid, and each row's weight (f32, 0 when ignored)."""

    def __init__(self, ctx: ImportContext, node: Node, x_index: int, target_index: int):
        self.ctx = ctx
        x = ctx.value(node.args[x_index])
        target = ctx.value(node.args[target_index])
        t = x.type
        assert isinstance(t, TensorType)
        if not is_float(t.element_type):
            raise ctx.fail(f"nll_loss needs floating-point inputs, got {t}")
        if len(_shape(x)) not in (1, 2) or _shape(target) != _shape(x)[:-1]:
            raise ctx.fail(
                f"nll_loss of input {list(_shape(x))} and target {list(_shape(target))} "
                "(only (N, C) with (N,), or (C,) with ())"
            )
        self.one_row = len(_shape(x)) == 1
        n, c = (1, _shape(x)[0]) if self.one_row else _shape(x)
        self.rows, self.classes = n, c
        self.x = ctx.reshape(x, [n, c])
        target = ctx.reshape(ctx.cast(target, i64), [n])
        ignore = ctx.arg(target_index + 3, "ignore_index", -100)
        if not isinstance(ignore, int):
            raise ctx.fail(f"ignore_index must be a static integer, got {ignore!r}")
        self.ignored = ctx.emit(nn.CompareOp("eq", target, ctx.constant(ignore, i64, [n])))
        at_least_zero = ctx.emit(nn.CompareOp("ge", target, ctx.constant(0, i64, [n])))
        below_c = ctx.emit(nn.CompareOp("lt", target, ctx.constant(c, i64, [n])))
        self.valid = ctx.emit(nn.SelectOp(at_least_zero, below_c, ctx.constant(False, i1, [n])))
        self.hit = ctx.emit(
            nn.CompareOp(
                "eq",
                ctx.broadcast(index_vector(ctx, c, 0, [1, c]), [n, c]),
                ctx.broadcast(ctx.reshape(target, [n, 1]), [n, c]),
            )
        )
        weight_arg = ctx.arg(target_index + 1, "weight", None)
        if weight_arg is None:
            weight = ctx.constant(1.0, f32, [n])
        else:
            w = ctx.cast(ctx.value(weight_arg), f32)
            if _shape(w) != (c,):
                raise ctx.fail(f"nll_loss weight of shape {list(_shape(w))}, expected [{c}]")
            weight = self.pick(ctx.broadcast(ctx.reshape(w, [1, c]), [n, c]))
        self.weight = ctx.emit(nn.SelectOp(self.ignored, ctx.constant(0.0, f32, [n]), weight))
        self.reduction = REDUCTIONS.get(ctx.arg(target_index + 2, "reduction", 1))
        if self.reduction is None:
            raise ctx.fail(f"unknown reduction {ctx.arg(target_index + 2, 'reduction')!r}")

    def pick(self, values: SSAValue) -> SSAValue:
        """Each row's value at its target class (f32 values of shape N x C -> N)."""
        ctx, n, c = self.ctx, self.rows, self.classes
        picked = ctx.emit(nn.SelectOp(self.hit, values, ctx.constant(0.0, f32, [n, c])))
        return ctx.emit(nn.SumOp(picked, [1]))

    def total_weight(self) -> SSAValue:
        """The sum of the rows' weights (f32, 0-d)."""
        return self.ctx.emit(nn.SumOp(self.weight, [0]))


@register(aten.nll_loss_forward.default)
def nll_loss_forward(ctx: ImportContext, node: Node) -> Imported:
    """nll_loss_forward(input, target, weight, reduction, ignore_index) ->
    (loss, total_weight): minus each row's log-probability of its target class, times
    the class weight; ignored rows count 0; mean divides by the total weight."""
    p = _Picked(ctx, node, 0, 1)
    n = p.rows
    zero = ctx.constant(0.0, f32, [n])
    loss = ctx.emit(nn.MulOp(ctx.emit(nn.NegOp(p.pick(ctx.cast(p.x, f32)))), p.weight))
    loss = ctx.emit(nn.SelectOp(p.ignored, zero, loss))  # -inf * 0 would be NaN
    invalid = ctx.emit(nn.SelectOp(p.ignored, zero, ctx.constant(float("nan"), f32, [n])))
    loss = ctx.emit(nn.SelectOp(p.valid, loss, invalid))
    total = p.total_weight()
    if p.reduction == "none":
        result = loss
    else:
        result = ctx.emit(nn.SumOp(loss, [0]))
        if p.reduction == "mean":
            result = ctx.emit(nn.DivOp(result, total))
    if p.reduction == "none" and not p.one_row:
        total = ctx.constant(0.0, f32, [])  # PyTorch's total_weight without a reduction
    loss_type, weight_type = ctx.out_type(0), ctx.out_type(1)
    result = ctx.cast(ctx.reshape(result, loss_type.get_shape()), loss_type.element_type)
    return result, ctx.cast(total, weight_type.element_type)


@register(aten.nll_loss_backward.default)
def nll_loss_backward(ctx: ImportContext, node: Node) -> Imported:
    """nll_loss_backward(grad, input, target, weight, reduction, ignore_index,
    total_weight): minus the weighted gradient at each row's target class (divided by
    the total weight for a mean), zero elsewhere and on ignored rows."""
    p = _Picked(ctx, node, 1, 2)
    n, c = p.rows, p.classes
    grad = ctx.cast(ctx.value(node.args[0]), f32)
    if p.reduction == "none":
        grad = ctx.reshape(grad, [n])
    else:
        grad = ctx.broadcast(ctx.reshape(grad, [1]), [n])
    scale = ctx.emit(nn.MulOp(ctx.emit(nn.NegOp(grad)), p.weight))
    if p.reduction == "mean":
        total = ctx.reshape(ctx.cast(ctx.value(node.args[6]), f32), [1])
        scale = ctx.emit(nn.DivOp(scale, ctx.broadcast(total, [n])))
    per_class = ctx.broadcast(ctx.reshape(scale, [n, 1]), [n, c])
    grad_input = ctx.emit(nn.SelectOp(p.hit, per_class, ctx.constant(0.0, f32, [n, c])))
    out = ctx.out_type()
    return ctx.cast(ctx.reshape(grad_input, out.get_shape()), out.element_type)
