"""Converters for elementwise ATen ops: arithmetic, math, activations, comparisons,
selection, sign and dtype conversion.

Operands are cast to the op's compute type and broadcast to the result shape by
`ImportContext.elementwise`; activations nn has no op for (leaky_relu, softplus, mish,
elu, hardtanh) are spelled with nn primitives here, as PyTorch defines them, computed
in opmath (f32 for f16/bf16) and rounded once, as PyTorch's kernels compute them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.fx import Node
from xdsl.dialects.builtin import StringAttr, TensorType
from xdsl.ir import Operation, SSAValue

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import is_bool
from fuseopt.frontends.fx.context import ImportContext, Imported, register

aten = torch.ops.aten
prims = torch.ops.prims


def _const_like(ctx: ImportContext, value: float, like: SSAValue) -> SSAValue:
    t = like.type
    assert isinstance(t, TensorType)
    return ctx.constant(value, t.element_type, t.get_shape())


def _scaled(ctx: ImportContext, x: Any, alpha: Any) -> Any:
    """`x * alpha` for add/sub's `alpha` argument (x itself when alpha is 1)."""
    if alpha in (None, 1):
        return x
    if isinstance(x, bool | int | float):
        return x * alpha
    out = ctx.out_val()
    compute = ctx.compute_element([x, alpha], out.dtype)
    shape = ctx.out_type().get_shape()
    v = ctx.operand(x, compute, shape)
    return ctx.emit(nn.MulOp(v, ctx.constant(alpha, compute, shape)))


def _binary(op: Callable[..., Operation], swap: bool = False) -> Callable[..., Imported]:
    def convert(ctx: ImportContext, node: Node) -> Imported:
        a, b = node.args[0], node.args[1]
        alpha = ctx.arg(2, "alpha", 1)
        if op is nn.DivOp:
            alpha = 1
        if swap:  # rsub: other - alpha * self
            a, b = b, _scaled(ctx, a, alpha)
        else:
            b = _scaled(ctx, b, alpha)
        if isinstance(a, SSAValue) or isinstance(b, SSAValue):
            return _binary_values(ctx, op, a, b)
        return ctx.elementwise(op, a, b)

    return convert


def _binary_values(ctx: ImportContext, op: Callable[..., Operation], a: Any, b: Any) -> SSAValue:
    """A binary op where an operand is already an emitted value (after `alpha`)."""
    out = ctx.out_val()
    compute = ctx.compute_element([x for x in (a, b) if not isinstance(x, SSAValue)], out.dtype)
    shape = ctx.out_type().get_shape()
    vals = [
        ctx.broadcast(ctx.cast(x, compute), shape)
        if isinstance(x, SSAValue)
        else ctx.operand(x, compute, shape)
        for x in (a, b)
    ]
    return ctx.cast(ctx.emit(op(*vals)), ctx.element(out.dtype))


for _targets, _op, _swap in [
    ((aten.add.Tensor, aten.add.Scalar), nn.AddOp, False),
    ((aten.sub.Tensor, aten.sub.Scalar), nn.SubOp, False),
    ((aten.rsub.Tensor, aten.rsub.Scalar), nn.SubOp, True),
    ((aten.mul.Tensor, aten.mul.Scalar), nn.MulOp, False),
    ((aten.div.Tensor, aten.div.Scalar), nn.DivOp, False),
    ((aten.maximum.default,), nn.MaxOp, False),
    ((aten.minimum.default,), nn.MinOp, False),
    ((aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar), nn.PowOp, False),
]:
    register(*_targets)(_binary(_op, _swap))

register(aten.floor_divide.default, aten.floor_divide.Scalar)(_binary(nn.FloorDivOp))


def _in_result_type(op: Callable[..., Operation]) -> Callable[..., Imported]:
    """remainder or fmod: computed in the result's type, a scalar operand (a number, a
    0-d tensor) rounded to it first, as eager's kernels read it (`x_f16 % 0.1` takes
    the remainder by f16's 0.1, not f32's: the results differ by a whole step)."""

    def convert(ctx: ImportContext, node: Node) -> Imported:
        dtype = ctx.out_val().dtype
        # a number rounded here: a constant keeps its exact value when widened
        a, b = (float(torch.tensor(v, dtype=dtype)) if isinstance(v, float) else v
                for v in node.args[:2])  # fmt: skip
        return ctx.elementwise(op, a, b, compute=ctx.element(dtype))

    return convert


for _targets, _op in [
    ((aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor), nn.RemainderOp),
    ((aten.fmod.Tensor, aten.fmod.Scalar), nn.FmodOp),
]:
    register(*_targets)(_in_result_type(_op))

ROUNDING_DIVISIONS = {None: nn.DivOp, "floor": nn.FloorDivOp, "trunc": nn.TruncDivOp}
"""div's `rounding_mode` values and the nn ops they are."""


@register(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_rounding(ctx: ImportContext, node: Node) -> Imported:
    """div(a, b, rounding_mode=None | "floor" | "trunc")."""
    mode = ctx.arg(2, "rounding_mode", None)
    if mode not in ROUNDING_DIVISIONS:
        raise ctx.fail(f"unknown rounding_mode {mode!r} (expected None, 'floor' or 'trunc')")
    return _binary(ROUNDING_DIVISIONS[mode])(ctx, node)


def _rounding(op: Callable[..., Operation]) -> Callable[..., Imported]:
    """floor, ceil or trunc: an integer tensor is returned as it is (PyTorch's result is
    a copy of it); a bool one is refused, as eager refuses it."""

    def convert(ctx: ImportContext, node: Node) -> Imported:
        dtype = ctx.out_val().dtype
        if dtype == torch.bool:  # eager refuses it: PyTorch runs it and raises
            raise ctx.fail(f"{op.name} of a bool tensor is not defined")
        if not dtype.is_floating_point:
            return ctx.value(node.args[0])
        return ctx.elementwise(op, node.args[0])

    return convert


for _target, _op in [
    (aten.floor.default, nn.FloorOp),
    (aten.ceil.default, nn.CeilOp),
    (aten.trunc.default, nn.TruncOp),
]:
    register(_target)(_rounding(_op))


def _unary(op: Callable[..., Operation], float_only: bool = True) -> Callable[..., Imported]:
    def convert(ctx: ImportContext, node: Node) -> Imported:
        if float_only and not ctx.out_val().dtype.is_floating_point:
            raise ctx.fail(f"needs a floating-point tensor, got {ctx.out_val().dtype}")
        return ctx.elementwise(op, node.args[0])

    return convert


for _target, _op, _float_only in [
    (aten.neg.default, nn.NegOp, False),
    (aten.abs.default, nn.AbsOp, False),
    (aten.relu.default, nn.ReluOp, False),
    (aten.exp.default, nn.ExpOp, True),
    (aten.exp2.default, nn.Exp2Op, True),
    (aten.log.default, nn.LogOp, True),
    (aten.log1p.default, nn.Log1pOp, True),
    (aten.sqrt.default, nn.SqrtOp, True),
    (aten.rsqrt.default, nn.RsqrtOp, True),
    (aten.reciprocal.default, nn.ReciprocalOp, True),
    (aten.tanh.default, nn.TanhOp, True),
    (aten.sigmoid.default, nn.SigmoidOp, True),
    (aten.silu.default, nn.SiluOp, True),
    (aten.erf.default, nn.ErfOp, True),
    (aten.sin.default, nn.SinOp, True),
    (aten.cos.default, nn.CosOp, True),
]:
    register(_target)(_unary(_op, _float_only))


@register(aten.square.default)
def square(ctx: ImportContext, node: Node) -> Imported:
    """square(x) = x * x (integers and bool promote as torch does: bool to int64)."""
    return ctx.elementwise(lambda v: nn.MulOp(v, v), node.args[0])


@register(aten.gelu.default)
def gelu(ctx: ImportContext, node: Node) -> Imported:
    """gelu(x, approximate='none'|'tanh')."""
    approximate = ctx.arg(1, "approximate", "none")
    if approximate not in nn.GELU_APPROXIMATIONS:
        raise ctx.fail(f"unknown gelu approximation {approximate!r}")
    attrs = {"approximate": StringAttr(approximate)} if approximate == "tanh" else None
    return ctx.elementwise(lambda x: nn.GeluOp(x, attrs), node.args[0])


def _compare(predicate: str) -> Callable[..., Imported]:
    def convert(ctx: ImportContext, node: Node) -> Imported:
        a, b = node.args[0], node.args[1]
        compute = ctx.element(ctx.promoted(a, b))
        return ctx.elementwise(lambda x, y: nn.CompareOp(predicate, x, y), a, b, compute=compute)

    return convert


for _pred in ("eq", "ne", "lt", "le", "gt", "ge"):
    register(getattr(aten, _pred).Tensor, getattr(aten, _pred).Scalar)(_compare(_pred))


@register(aten.logical_not.default)
def logical_not(ctx: ImportContext, node: Node) -> Imported:
    """logical_not(x) = (x == 0)."""
    x = node.args[0]
    compute = ctx.element(ctx.val(x).dtype)
    return ctx.elementwise(
        lambda v: nn.CompareOp("eq", v, _const_like(ctx, 0, v)), x, compute=compute
    )


def _boolean(combine: Callable[[ImportContext, SSAValue, SSAValue], SSAValue]) -> Callable:
    """A binary op on i1 tensors (bitwise_and/or/xor of bools, logical_and/or/xor of
    any dtype: operands are compared with zero first), as nn.select and nn.compare."""

    def convert(ctx: ImportContext, node: Node) -> Imported:
        a, b = node.args[0], node.args[1]
        logical = node.target.__name__.startswith("logical")
        if not logical and ctx.out_val().dtype != torch.bool:
            raise ctx.fail("bitwise ops are lowered for bool tensors only")
        shape = ctx.out_type().get_shape()
        x, y = (_truth(ctx, v, shape) for v in (a, b))
        return ctx.cast(combine(ctx, x, y), ctx.element(ctx.out_val().dtype))

    def _truth(ctx: ImportContext, v: Any, shape: Sequence[int]) -> SSAValue:
        value = ctx.val(v)
        if isinstance(value, torch.Tensor) and value.dtype == torch.bool or isinstance(v, bool):
            return ctx.operand(v, ctx.element(torch.bool), shape)
        dtype = value.dtype if isinstance(value, torch.Tensor) else torch.float32
        element = ctx.element(dtype)
        x = ctx.operand(v, element, shape)
        return ctx.emit(nn.CompareOp("ne", x, ctx.constant(0, element, shape)))

    return convert


def _and(ctx: ImportContext, x: SSAValue, y: SSAValue) -> SSAValue:
    return ctx.emit(nn.SelectOp(x, y, _const_like(ctx, False, x)))


def _or(ctx: ImportContext, x: SSAValue, y: SSAValue) -> SSAValue:
    return ctx.emit(nn.SelectOp(x, _const_like(ctx, True, x), y))


def _xor(ctx: ImportContext, x: SSAValue, y: SSAValue) -> SSAValue:
    return ctx.emit(nn.CompareOp("ne", x, y))


for _targets, _combine in [
    ((aten.bitwise_and.Tensor, aten.bitwise_and.Scalar, aten.logical_and.default), _and),
    ((aten.bitwise_or.Tensor, aten.bitwise_or.Scalar, aten.logical_or.default), _or),
    ((aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar, aten.logical_xor.default), _xor),
    ((aten.__and__.Tensor, aten.__and__.Scalar), _and),  # `a & b` before decomposition
    ((aten.__or__.Tensor, aten.__or__.Scalar), _or),
    ((aten.__xor__.Tensor, aten.__xor__.Scalar), _xor),
]:
    register(*_targets)(_boolean(_combine))


@register(aten.bitwise_not.default)
def bitwise_not(ctx: ImportContext, node: Node) -> Imported:
    """bitwise_not of a bool tensor: (x == false)."""
    if ctx.out_val().dtype != torch.bool:
        raise ctx.fail("bitwise_not is lowered for bool tensors only")
    x = ctx.value(node.args[0])
    return ctx.emit(nn.CompareOp("eq", x, _const_like(ctx, False, x)))


@register(aten.sign.default, aten.sgn.default)
def sign(ctx: ImportContext, node: Node) -> Imported:
    """sign(x): 1, -1 or 0 by the sign of x (NaN and -0.0 give 0, as PyTorch's do; a
    bool is itself), as two compares and selects."""
    x = ctx.value(node.args[0])
    t = ctx.out_type()
    shape = t.get_shape()
    if is_bool(t.element_type):
        return x
    zero = ctx.constant(0, t.element_type, shape)
    one, minus = ctx.constant(1, t.element_type, shape), ctx.constant(-1, t.element_type, shape)
    positive = ctx.emit(nn.CompareOp("gt", x, zero))
    negative = ctx.emit(nn.CompareOp("lt", x, zero))
    rest = ctx.emit(nn.SelectOp(negative, minus, zero))
    return ctx.emit(nn.SelectOp(positive, one, rest))


@register(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def where(ctx: ImportContext, node: Node) -> Imported:
    """where(condition, a, b)."""
    cond, a, b = node.args[:3]
    out = ctx.out_val()
    shape = ctx.out_type().get_shape()
    compute = ctx.element(out.dtype)
    c = ctx.operand(cond, ctx.element(torch.bool), shape)
    return ctx.emit(nn.SelectOp(c, ctx.operand(a, compute, shape), ctx.operand(b, compute, shape)))


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(ctx: ImportContext, node: Node) -> Imported:
    """masked_fill(x, mask, value) = where(mask, value, x)."""
    x, mask, value = node.args[:3]
    shape = ctx.out_type().get_shape()
    element = ctx.element(ctx.out_val().dtype)
    c = ctx.operand(mask, ctx.element(torch.bool), shape)
    return ctx.emit(
        nn.SelectOp(c, ctx.operand(value, element, shape), ctx.operand(x, element, shape))
    )


def _clamp_bounds(ctx: ImportContext, x: Any, lo: Any, hi: Any) -> Imported:
    out = ctx.out_val()
    compute = ctx.compute_element([x, *(v for v in (lo, hi) if v is not None)], out.dtype)
    shape = ctx.out_type().get_shape()
    y = ctx.operand(x, compute, shape)
    if lo is not None:
        y = ctx.emit(nn.MaxOp(y, ctx.operand(lo, compute, shape)))
    if hi is not None:
        y = ctx.emit(nn.MinOp(y, ctx.operand(hi, compute, shape)))
    return ctx.cast(y, ctx.element(out.dtype))


@register(aten.clamp.default, aten.clamp.Tensor)
def clamp(ctx: ImportContext, node: Node) -> Imported:
    """clamp(x, min=None, max=None)."""
    return _clamp_bounds(ctx, node.args[0], ctx.arg(1, "min"), ctx.arg(2, "max"))


@register(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(ctx: ImportContext, node: Node) -> Imported:
    """clamp_min(x, min)."""
    return _clamp_bounds(ctx, node.args[0], node.args[1], None)


@register(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(ctx: ImportContext, node: Node) -> Imported:
    """clamp_max(x, max)."""
    return _clamp_bounds(ctx, node.args[0], None, node.args[1])


@register(aten.hardtanh.default)
def hardtanh(ctx: ImportContext, node: Node) -> Imported:
    """hardtanh(x, min_val=-1, max_val=1) = clamp(x, min_val, max_val)."""
    return _clamp_bounds(ctx, node.args[0], ctx.arg(1, "min_val", -1.0), ctx.arg(2, "max_val", 1.0))


def _opmath_input(ctx: ImportContext, node: Node) -> SSAValue:
    """The first argument at the result shape, in the type the op computes in: f32 for
    16-bit floats (PyTorch's opmath, `ImportContext.opmath_element`), so that a formula
    of several ops rounds once, at the end (`_opmath_result`)."""
    out = ctx.out_val()
    if not out.dtype.is_floating_point:
        raise ctx.fail(f"needs a floating-point tensor, got {out.dtype}")
    return ctx.operand(node.args[0], ctx.opmath_element(out.dtype), ctx.out_type().get_shape())


def _opmath_result(ctx: ImportContext, y: SSAValue) -> SSAValue:
    """`y` (computed in opmath) rounded once to the node's result dtype."""
    return ctx.cast(y, ctx.element(ctx.out_val().dtype))


def _mul(ctx: ImportContext, x: SSAValue, k: float) -> SSAValue:
    return x if k == 1 else ctx.emit(nn.MulOp(x, _const_like(ctx, k, x)))


def _log1p(ctx: ImportContext, u: SSAValue) -> SSAValue:
    """log(1 + u) for u >= 0, accurate to a few ulps even where 1 + u rounds (nn has no
    log1p): with w = 1 + u rounded, log(w) * (u / (w - 1)) corrects the rounding of w
    (w - 1 is exact), and u itself is the answer where w rounds to 1 (Goldberg, "What
    every computer scientist should know about floating-point arithmetic", thm. 4)."""
    one = _const_like(ctx, 1.0, u)
    w = ctx.emit(nn.AddOp(one, u))
    rounds_to_one = ctx.emit(nn.CompareOp("eq", w, one))
    # w - 1 is 0 where w rounds to 1: divide by 1 there (that lane takes u) rather than 0
    w_minus_one = ctx.emit(nn.SelectOp(rounds_to_one, one, ctx.emit(nn.SubOp(w, one))))
    corrected = ctx.emit(nn.MulOp(ctx.emit(nn.LogOp(w)), ctx.emit(nn.DivOp(u, w_minus_one))))
    return ctx.emit(nn.SelectOp(rounds_to_one, u, corrected))


def _softplus(ctx: ImportContext, x: SSAValue, beta: float, threshold: float) -> SSAValue:
    """softplus as PyTorch defines it: x where beta*x > threshold, else
    log(1 + exp(beta*x)) / beta, the latter in the stable form
    max(beta*x, 0) + log1p(exp(-|beta*x|)) (exp never overflows, and its small values
    keep their precision as eager's log1p keeps them)."""
    bx = _mul(ctx, x, beta)
    tail = _log1p(ctx, ctx.emit(nn.ExpOp(ctx.emit(nn.NegOp(ctx.emit(nn.AbsOp(bx)))))))
    soft = ctx.emit(nn.AddOp(ctx.emit(nn.MaxOp(bx, _const_like(ctx, 0.0, bx))), tail))
    if beta != 1:
        soft = ctx.emit(nn.DivOp(soft, _const_like(ctx, beta, soft)))
    big = ctx.emit(nn.CompareOp("gt", bx, _const_like(ctx, threshold, bx)))
    return ctx.emit(nn.SelectOp(big, x, soft))


@register(aten.softplus.default)
def softplus(ctx: ImportContext, node: Node) -> Imported:
    """softplus(x, beta=1, threshold=20), in opmath (f32 for 16-bit floats)."""
    x = _opmath_input(ctx, node)
    beta, threshold = float(ctx.arg(1, "beta", 1.0)), float(ctx.arg(2, "threshold", 20.0))
    return _opmath_result(ctx, _softplus(ctx, x, beta, threshold))


@register(aten.mish.default)
def mish(ctx: ImportContext, node: Node) -> Imported:
    """mish(x) = x * tanh(softplus(x)), in opmath (f32 for 16-bit floats)."""
    x = _opmath_input(ctx, node)
    y = ctx.emit(nn.MulOp(x, ctx.emit(nn.TanhOp(_softplus(ctx, x, 1.0, 20.0)))))
    return _opmath_result(ctx, y)


@register(aten.leaky_relu.default)
def leaky_relu(ctx: ImportContext, node: Node) -> Imported:
    """leaky_relu(x, negative_slope=0.01) = where(x > 0, x, x * negative_slope), in
    opmath (the slope is not rounded to 16 bits)."""
    x = _opmath_input(ctx, node)
    slope = float(ctx.arg(1, "negative_slope", 0.01))
    pos = ctx.emit(nn.CompareOp("gt", x, _const_like(ctx, 0.0, x)))
    y = ctx.emit(nn.SelectOp(pos, x, _mul(ctx, x, slope)))
    return _opmath_result(ctx, y)


@register(aten.elu.default)
def elu(ctx: ImportContext, node: Node) -> Imported:
    """elu(x, alpha=1, scale=1, input_scale=1) =
    where(x > 0, scale * x, scale * alpha * (exp(input_scale * x) - 1)), in opmath (the
    exp of the unselected branch may overflow: it is discarded)."""
    x = _opmath_input(ctx, node)
    alpha = float(ctx.arg(1, "alpha", 1.0))
    scale = float(ctx.arg(2, "scale", 1.0))
    input_scale = float(ctx.arg(3, "input_scale", 1.0))
    em1 = ctx.emit(nn.SubOp(ctx.emit(nn.ExpOp(_mul(ctx, x, input_scale))), _const_like(ctx, 1, x)))
    neg = _mul(ctx, em1, scale * alpha)
    pos = ctx.emit(nn.CompareOp("gt", x, _const_like(ctx, 0.0, x)))
    y = ctx.emit(nn.SelectOp(pos, _mul(ctx, x, scale), neg))
    return _opmath_result(ctx, y)


@register(
    aten._to_copy.default, aten.to.dtype, aten.to.dtype_layout, prims.convert_element_type.default
)
def to_copy(ctx: ImportContext, node: Node) -> Imported:
    """Dtype conversion (`.to(dtype)`); device or layout changes run eagerly."""
    x = ctx.val(node.args[0])
    out = ctx.out_val()
    if isinstance(x, torch.Tensor) and x.device != out.device:
        raise ctx.fail(f"device change {x.device} -> {out.device}")
    v = ctx.value(node.args[0])
    return ctx.cast(v, ctx.element(out.dtype))


@register(
    aten.clone.default,
    aten.detach.default,
    aten.alias.default,
    aten.lift_fresh_copy.default,
    aten.contiguous.default,
)
def identity(ctx: ImportContext, node: Node) -> Imported:
    """Copies and aliases are values in nn (value semantics)."""
    return ctx.value(node.args[0])


@register(aten.dropout.default, aten.native_dropout.default)
def dropout(ctx: ImportContext, node: Node) -> Imported:
    """Dropout in eval mode is the identity; training-mode dropout runs eagerly."""
    train = ctx.arg(2, "train", True)
    if train is not False and ctx.arg(1, "p", 0.5) != 0:
        raise ctx.fail("dropout in training mode is random; it runs eagerly")
    x = ctx.value(node.args[0])
    if node.target is aten.native_dropout.default:
        t = x.type
        assert isinstance(t, TensorType)
        return x, ctx.constant(True, ctx.element(torch.bool), t.get_shape())
    return x


@register(aten._assert_tensor_metadata.default)
def assert_metadata(ctx: ImportContext, node: Node) -> Imported:
    """Export's metadata assertions hold by construction (types are static)."""
    return None


@register(operator.getitem)
def getitem(ctx: ImportContext, node: Node) -> Imported:
    """One result of a multi-result op."""
    source, index = node.args
    values = ctx.env.get(source) if isinstance(source, Node) else None
    if not isinstance(values, tuple) or not isinstance(index, int) or values[index] is None:
        raise ctx.fail("getitem of a value that is not an imported tuple")
    return values[index]
