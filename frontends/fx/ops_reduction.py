"""Converters for reductions and row-wise ops: sum, mean, amax/amin, argmax/argmin, cumsum and
max.dim/min.dim, var/var_mean/std, softmax, log_softmax, layer_norm and rms_norm.

Softmax and the norms become nn composites (`nn.softmax`, `nn.layer_norm`, ...), which
`nn-decompose` expands and the fuser recognizes; statistics PyTorch returns besides
the result (layer_norm's mean and rstd, kept for backward) are built from primitives
in f32.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence

import torch
from torch.fx import Node
from xdsl.dialects.builtin import TensorType, f32, i64
from xdsl.ir import Attribute, Operation, SSAValue

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import is_bool, is_float
from fuseopt.frontends.fx.context import ImportContext, Imported, register
from fuseopt.frontends.fx.ops_creation import index_vector
from fuseopt.passes.nn_builder import NNBuilder
from fuseopt.passes.nn_decompose import row_mean

aten = torch.ops.aten


def _shape(v: SSAValue) -> tuple[int, ...]:
    t = v.type
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def _reduce(op: type[nn.ReductionOp], dim_index: int | None) -> Callable[..., Imported]:
    def convert(ctx: ImportContext, node: Node) -> Imported:
        out = ctx.out_val()
        x = ctx.value(node.args[0])
        dims = ctx.arg(dim_index, "dim", None) if dim_index is not None else None
        keepdim = bool(ctx.arg(dim_index + 1, "keepdim", False)) if dim_index is not None else False
        axes = ctx.axes(dims, len(_shape(x)))
        element = ctx.element(out.dtype)
        if op is nn.MeanOp and not is_float(element):
            raise ctx.fail(f"mean needs a floating-point result, got {out.dtype}")
        if not _shape(x):  # a 0-d tensor reduces to itself
            return ctx.cast(x, element)
        return ctx.emit(op(ctx.cast(x, element), axes, keepdim))

    return convert


register(aten.sum.dim_IntList)(_reduce(nn.SumOp, 1))
register(aten.sum.default)(_reduce(nn.SumOp, None))
register(aten.mean.dim)(_reduce(nn.MeanOp, 1))
register(aten.mean.default)(_reduce(nn.MeanOp, None))
register(aten.amax.default)(_reduce(nn.ReduceMaxOp, 1))
register(aten.amin.default)(_reduce(nn.ReduceMinOp, 1))
register(aten.max.default)(_reduce(nn.ReduceMaxOp, None))
register(aten.min.default)(_reduce(nn.ReduceMinOp, None))


def _first_index_where_extreme(
    ctx: ImportContext, x: SSAValue, axis: int, largest: bool
) -> tuple[SSAValue, SSAValue]:
    """(extreme, index) of `x` along `axis`, both keepdim: the max (or min) and the
    first index holding it, as PyTorch's argmax/argmin and max.dim/min.dim give: a row
    holding NaN has NaN as its extreme and the first NaN's index. Built from a max
    (min), a comparison and a min over indices, which nn-fuse runs as one row kernel."""
    shape = _shape(x)
    extreme = ctx.emit((nn.ReduceMaxOp if largest else nn.ReduceMinOp)(x, [axis], keepdim=True))
    count = shape[axis]
    along = [count if d == axis else 1 for d in range(len(shape))]
    index = ctx.broadcast(index_vector(ctx, count, 0, along), shape)
    past_the_end = ctx.constant(count, i64, shape)
    hit = ctx.emit(nn.CompareOp("eq", x, ctx.broadcast(extreme, shape)))
    candidate = ctx.emit(nn.SelectOp(hit, index, past_the_end))
    if is_float(_element(x)):  # a NaN is the extreme; x != x finds it
        nan = ctx.emit(nn.CompareOp("ne", x, x))
        candidate = ctx.emit(nn.SelectOp(nan, index, candidate))
    first = ctx.emit(nn.ReduceMinOp(candidate, [axis], keepdim=True))
    return extreme, first


def _element(x: SSAValue) -> Attribute:
    t = x.type
    assert isinstance(t, TensorType)
    return t.element_type


def _index_reduction_input(ctx: ImportContext, node: Node, bools: bool) -> tuple[SSAValue, int]:
    """The input of argmax/argmin/max.dim/min.dim and the axis it reduces (dim=None:
    the input flattened, axis 0), checked; booleans only where PyTorch takes them
    (`bools`: max.dim and min.dim, not argmax and argmin)."""
    x = ctx.value(node.args[0])
    if is_bool(_element(x)):
        if not bools:
            raise ctx.fail("argmax/argmin of a bool tensor (PyTorch raises)")
        x = ctx.cast(x, i64)  # True is larger than False, as in PyTorch
    dim = ctx.arg(1, "dim", None)
    shape = _shape(x)
    if dim is None:
        x, dim = ctx.reshape(x, [math.prod(shape)]), 0
    axis = ctx.axis(dim, max(len(shape), 1))
    if not shape:
        x, axis = ctx.reshape(x, [1]), 0
    if _shape(x)[axis] == 0:
        raise ctx.fail("argmax/argmin over an empty axis (PyTorch raises)")
    return x, axis


def _arg_extreme(largest: bool) -> Callable[..., Imported]:
    def convert(ctx: ImportContext, node: Node) -> Imported:
        x, axis = _index_reduction_input(ctx, node, bools=False)
        _, first = _first_index_where_extreme(ctx, x, axis, largest)
        return ctx.reshape(first, ctx.out_type().get_shape())

    return convert


def _extreme_with_index(largest: bool) -> Callable[..., Imported]:
    def convert(ctx: ImportContext, node: Node) -> Imported:
        x, axis = _index_reduction_input(ctx, node, bools=True)
        extreme, first = _first_index_where_extreme(ctx, x, axis, largest)
        values = ctx.cast(
            ctx.reshape(extreme, ctx.out_type(0).get_shape()), ctx.out_type(0).element_type
        )
        return values, ctx.reshape(first, ctx.out_type(1).get_shape())

    return convert


register(aten.argmax.default)(_arg_extreme(largest=True))
register(aten.argmin.default)(_arg_extreme(largest=False))
register(aten.max.dim)(_extreme_with_index(largest=True))
register(aten.min.dim)(_extreme_with_index(largest=False))


def _f32(ctx: ImportContext, x: SSAValue) -> SSAValue:
    """`x` widened to f32 (statistics accumulate in f32 at least)."""
    t = x.type
    assert isinstance(t, TensorType)
    if not is_float(t.element_type):
        raise ctx.fail(f"needs a floating-point tensor, got {t}")
    return ctx.cast(x, f32)


def _variance(
    ctx: ImportContext, x: SSAValue, axes: Sequence[int], correction: float
) -> tuple[SSAValue, SSAValue]:
    """(variance, mean) of f32 `x` over `axes`, both keepdim, with `correction`:
    two-pass, around nn-decompose's `row_mean` (so a constant row's variance is
    exactly 0, as eager's Welford gives)."""
    shape = _shape(x)
    b = NNBuilder()
    mean = row_mean(b, x, axes)
    for op in b.ops:
        ctx.emit(op)
    d = ctx.emit(nn.SubOp(x, ctx.broadcast(mean, shape)))
    ss = ctx.emit(nn.SumOp(ctx.emit(nn.MulOp(d, d)), axes, keepdim=True))
    n = math.prod(shape[a] for a in axes) - correction
    divisor = ctx.constant(max(n, 0), f32, _shape(ss))
    return ctx.emit(nn.DivOp(ss, divisor)), mean


def _correction(ctx: ImportContext, node: Node) -> float:
    if node.target in (aten.var.dim, aten.std.dim):
        return 1.0 if ctx.arg(2, "unbiased", True) else 0.0
    c = node.kwargs.get("correction", node.args[2] if len(node.args) > 2 else None)
    return 1.0 if c is None else float(c)


def _keepdim(ctx: ImportContext, x: SSAValue, axes: Sequence[int], index: int | None) -> SSAValue:
    """Reshape a keepdim statistic to the node's result shape (`index` of a tuple)."""
    out = ctx.out_type(index)
    return ctx.cast(ctx.reshape(x, out.get_shape()), out.element_type)


@register(aten.var.correction, aten.var.dim, aten.std.correction, aten.std.dim)
def var(ctx: ImportContext, node: Node) -> Imported:
    """var / std over dims with a correction (default 1, Bessel's)."""
    x = _f32(ctx, ctx.value(node.args[0]))
    axes = ctx.axes(ctx.arg(1, "dim", None), len(_shape(x)))
    v, _ = _variance(ctx, x, axes, _correction(ctx, node))
    if node.target in (aten.std.correction, aten.std.dim):
        v = ctx.emit(nn.SqrtOp(v))
    return _keepdim(ctx, v, axes, None)


@register(aten.var_mean.correction, aten.var_mean.dim)
def var_mean(ctx: ImportContext, node: Node) -> Imported:
    """(var, mean) over dims with a correction."""
    x = _f32(ctx, ctx.value(node.args[0]))
    axes = ctx.axes(ctx.arg(1, "dim", None), len(_shape(x)))
    v, mean = _variance(ctx, x, axes, _correction(ctx, node))
    return _keepdim(ctx, v, axes, 0), _keepdim(ctx, mean, axes, 1)


def _rowwise(op: type[nn.RowwiseOp]) -> Callable[..., Imported]:
    def convert(ctx: ImportContext, node: Node) -> Imported:
        out = ctx.out_val()
        x = ctx.value(node.args[0])
        element = ctx.element(out.dtype)
        if not is_float(element):
            raise ctx.fail(f"needs a floating-point result, got {out.dtype}")
        x = ctx.cast(x, element)  # half_to_float / dtype=: convert before, as PyTorch
        shape = _shape(x)
        if not shape:
            x = ctx.reshape(x, (1,))
        y = ctx.emit(op(x, ctx.axis(node.args[1], max(len(shape), 1))))
        return ctx.reshape(y, shape)

    return convert


register(aten._softmax.default, aten.softmax.int)(_rowwise(nn.SoftmaxOp))
register(aten._log_softmax.default, aten.log_softmax.int)(_rowwise(nn.LogSoftmaxOp))


def _norm_parts(
    ctx: ImportContext, node: Node, weight_index: int, bias_index: int | None
) -> tuple[SSAValue, SSAValue | None, SSAValue | None, int]:
    """(input, weight, bias, normalized rank) of a norm node, checked."""
    x = ctx.value(node.args[0])
    normalized = ctx.int_list(node.args[1], "normalized_shape")
    shape = _shape(x)
    if not normalized or tuple(shape[len(shape) - len(normalized) :]) != tuple(normalized):
        raise ctx.fail(f"normalized_shape {normalized} does not end the input shape {shape}")
    t = x.type
    assert isinstance(t, TensorType)
    if not is_float(t.element_type):
        raise ctx.fail(f"needs a floating-point tensor, got {t}")
    affine = []
    for index, name in ((weight_index, "weight"), (bias_index, "bias")):
        arg = ctx.arg(index, name) if index is not None else None
        if arg is None:
            affine.append(None)
            continue
        v = ctx.value(arg)
        if v.type != TensorType(t.element_type, normalized):
            raise ctx.fail(f"{name} of type {v.type} does not match input {t}")
        affine.append(v)
    return x, affine[0], affine[1], len(normalized)


def _emit_norm(ctx: ImportContext, op: Operation) -> SSAValue:
    return ctx.emit(op)


@register(aten.native_layer_norm.default, aten.layer_norm.default)
def layer_norm(ctx: ImportContext, node: Node) -> Imported:
    """layer_norm(x, normalized_shape, weight, bias, eps); native_layer_norm also
    returns the mean and rstd (f32 statistics, built only when used)."""
    x, w, b, k = _norm_parts(ctx, node, 2, 3)
    eps = float(ctx.arg(4, "eps", 1e-5))
    y = _emit_norm(ctx, nn.LayerNormOp(x, w, b, eps, k))
    if node.target is aten.layer_norm.default:
        return y
    users = {u.args[1] for u in node.users if isinstance(u.args[1], int)}
    if not users & {1, 2}:
        return y, None, None
    axes = list(range(len(_shape(x)) - k, len(_shape(x))))
    var_, mean = _variance(ctx, _f32(ctx, x), axes, 0.0)
    if not math.prod(_shape(x)[a] for a in axes):  # PyTorch's mean of no elements is 0
        mean = ctx.constant(0.0, f32, _shape(mean))
    rstd = ctx.emit(nn.RsqrtOp(ctx.emit(nn.AddOp(var_, ctx.constant(eps, f32, _shape(var_))))))
    return y, _keepdim(ctx, mean, axes, 1), _keepdim(ctx, rstd, axes, 2)


@register(aten.rms_norm.default, aten._fused_rms_norm.default)
def rms_norm(ctx: ImportContext, node: Node) -> Imported:
    """rms_norm(x, normalized_shape, weight=None, eps=None) (eps None: the machine
    epsilon of the type PyTorch computes in, f32 for 16-bit inputs); _fused_rms_norm
    (what nn.RMSNorm runs on a GPU) also returns the rstd (an f32 statistic, built only
    when used)."""
    x, w, _, k = _norm_parts(ctx, node, 2, None)
    eps = ctx.arg(3, "eps", None)
    fused = node.target is aten._fused_rms_norm.default
    if eps is None:
        dtype = ctx.out_val(0 if fused else None).dtype
        eps = torch.finfo(torch.float32 if dtype.itemsize < 4 else dtype).eps
    y = _emit_norm(ctx, nn.RmsNormOp(x, w, None, float(eps), k))
    if not fused:
        return y
    if not any(u.args[1] == 1 for u in node.users if u.target is operator.getitem):
        return y, None
    axes = list(range(len(_shape(x)) - k, len(_shape(x))))
    x32 = _f32(ctx, x)
    ms = ctx.emit(nn.MeanOp(ctx.emit(nn.MulOp(x32, x32)), axes, keepdim=True))
    rstd = ctx.emit(nn.RsqrtOp(ctx.emit(nn.AddOp(ms, ctx.constant(float(eps), f32, _shape(ms))))))
    return y, _keepdim(ctx, rstd, axes, 1)


@register(aten.cumsum.default)
def cumsum(ctx: ImportContext, node: Node) -> Imported:
    """cumsum(x, dim, dtype=None): the input cast to the result's dtype (bools and
    integers sum as int64, as PyTorch does), then `nn.cumsum` along `dim`."""
    x = ctx.value(node.args[0])
    t = ctx.out_type()
    rank = len(t.get_shape())
    axis = ctx.axis(ctx.arg(1, "dim"), max(rank, 1))
    if not math.prod(t.get_shape()):
        raise ctx.fail("cumsum of an empty tensor is not lowered")
    if is_bool(t.element_type):
        raise ctx.fail("cumsum into a bool result is not lowered")
    x = ctx.cast(x, t.element_type)
    if rank == 0:
        return x  # the sum of one element
    return ctx.emit(nn.CumsumOp(x, axis))
