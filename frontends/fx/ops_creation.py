"""Converters for tensor-creating ATen ops: full, zeros, ones (and their `_like` and
`new_` forms), scalar_tensor and arange, as nn constants; tril and triu as selects under
index comparisons."""

from __future__ import annotations

import math

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx import Node
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType, f32, i64
from xdsl.ir import SSAValue

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import is_bool, is_float
from fuseopt.frontends.fx.context import ImportContext, Imported, register

aten = torch.ops.aten


def _fill(ctx: ImportContext, value: object) -> Imported:
    out = ctx.out_type()
    if not isinstance(value, bool | int | float):
        raise ctx.fail(f"fill value must be a Python number, got {value!r}")
    if ctx.out_val().device.type == "meta":
        raise ctx.fail("meta tensors have no values")
    return ctx.constant(value, out.element_type, out.get_shape())


@register(aten.full.default, aten.full_like.default, aten.new_full.default)
def full(ctx: ImportContext, node: Node) -> Imported:
    """full(size, value) / full_like(x, value) / x.new_full(size, value)."""
    index = 2 if node.target is aten.new_full.default else 1
    return _fill(ctx, ctx.arg(index, "fill_value"))


@register(aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default)
def zeros(ctx: ImportContext, node: Node) -> Imported:
    """Zeros of the result shape and dtype."""
    return _fill(ctx, 0)


@register(aten.ones.default, aten.ones_like.default, aten.new_ones.default)
def ones(ctx: ImportContext, node: Node) -> Imported:
    """Ones of the result shape and dtype."""
    return _fill(ctx, 1)


@register(aten.scalar_tensor.default)
def scalar_tensor(ctx: ImportContext, node: Node) -> Imported:
    """A 0-d tensor holding a number."""
    return _fill(ctx, node.args[0])


@register(aten.arange.default, aten.arange.start, aten.arange.start_step)
def arange(ctx: ImportContext, node: Node) -> Imported:
    """arange(end) / arange(start, end, step=1) as a dense constant (computed by
    PyTorch itself, so the values match eager exactly)."""
    out = ctx.out_val()
    numbers = [a for a in node.args if isinstance(a, int | float)]
    if len(numbers) != len(node.args):
        raise ctx.fail("arange bounds must be static numbers")
    t = ctx.out_type()
    if is_bool(t.element_type) or not math.prod(t.get_shape()):
        raise ctx.fail("arange of this dtype or size is not supported")
    with unset_fake_temporarily():  # real values, outside the tracing fake mode
        values = torch.arange(*numbers, dtype=out.dtype)
        data = values.float().tolist() if is_float(t.element_type) else values.tolist()
    storage = TensorType(f32 if is_float(t.element_type) else i64, t.get_shape())
    dense = DenseIntOrFPElementsAttr.from_list(storage, data)
    return ctx.cast(ctx.emit(nn.ConstantOp(dense, dense.type)), t.element_type)


def index_vector(ctx: ImportContext, count: int, offset: int, shape: list[int]) -> SSAValue:
    """The i64 values offset, offset + 1, ... along one axis of `shape` (the axis of
    size `count`; the others size 1), broadcast later by the caller: an index vector,
    which kernels compute from their tile positions (tile.iota)."""
    dense = DenseIntOrFPElementsAttr.from_list(
        TensorType(i64, [count]), [offset + i for i in range(count)]
    )
    return ctx.reshape(ctx.emit(nn.ConstantOp(dense, dense.type)), shape)


def _triangle(keep: str) -> object:
    """tril (`keep` = "le": columns up to row + diagonal) or triu ("ge"), as a select
    between the input and zero under an index comparison (constants fold per shape)."""

    def convert(ctx: ImportContext, node: Node) -> Imported:
        x = ctx.value(node.args[0])
        diagonal = ctx.arg(1, "diagonal", 0)
        if not isinstance(diagonal, int):
            raise ctx.fail(f"the diagonal must be a static integer, got {diagonal!r}")
        t = ctx.out_type()
        shape = list(t.get_shape())
        if len(shape) < 2:
            raise ctx.fail("tril/triu need at least two dimensions")
        rows, cols = shape[-2], shape[-1]
        if rows * cols == 0:
            raise ctx.fail("tril/triu of an empty matrix is not lowered")
        full = [*shape[:-2], rows, cols]
        row_limit = ctx.broadcast(index_vector(ctx, rows, diagonal, [rows, 1]), full)
        col = ctx.broadcast(index_vector(ctx, cols, 0, [1, cols]), full)
        mask = ctx.emit(nn.CompareOp(keep, col, row_limit))
        zero = ctx.constant(0, t.element_type, full)
        return ctx.emit(nn.SelectOp(mask, x, zero))

    return convert


register(aten.tril.default)(_triangle("le"))
register(aten.triu.default)(_triangle("ge"))
