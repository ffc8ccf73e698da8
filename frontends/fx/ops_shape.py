"""Converters for shape ATen ops: views, reshapes, transposes, expand, slicing,
concatenation, stacking, splits and constant padding.

nn has value semantics, so views are plain reshapes; the result shape of every view is
read from the node's example value rather than recomputed from `-1`s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch.fx import Node
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import int_array
from fuseopt.frontends.fx.context import ImportContext, Imported, register

aten = torch.ops.aten


def _type(v: SSAValue) -> TensorType:
    t = v.type
    assert isinstance(t, TensorType)
    return t


@register(
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.unsqueeze.default,
    aten.squeeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.flatten.using_ints,
)
def view(ctx: ImportContext, node: Node) -> Imported:
    """Every view that keeps the element order is an nn.reshape to the result shape."""
    return ctx.reshape(ctx.value(node.args[0]), ctx.out_type().get_shape())


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """Row-major strides of `shape` (in elements)."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return strides[::-1]


@register(aten.as_strided.default)
def as_strided(ctx: ImportContext, node: Node) -> Imported:
    """as_strided(x, size, stride, storage_offset) where it reads all of a contiguous `x`
    in order (row-major strides of `size`, same element count, no offset past x's own)
    is a reshape, as decompositions emit it; any other stride pattern reads memory that
    nn's values do not describe and is left to PyTorch."""
    x = ctx.value(node.args[0])
    example = ctx.val(node.args[0])
    size = ctx.int_list(node.args[1], "size")
    stride = ctx.int_list(node.args[2], "stride")
    offset = ctx.arg(3, "storage_offset", None)
    if not isinstance(example, torch.Tensor) or not example.is_contiguous():
        raise ctx.fail("as_strided of a tensor that is not contiguous")
    if offset is not None and offset != example.storage_offset():
        raise ctx.fail(f"as_strided with storage offset {offset}")
    reads_in_order = all(
        n == 1 or s == c for n, s, c in zip(size, stride, contiguous_strides(size), strict=True)
    )
    if not reads_in_order or torch.Size(size).numel() != example.numel():
        raise ctx.fail(f"as_strided to size {size} with strides {stride} is not a reshape")
    return ctx.reshape(x, ctx.out_type().get_shape())


@register(aten.expand.default)
def expand(ctx: ImportContext, node: Node) -> Imported:
    """expand(x, sizes) is an nn.broadcast to the result shape."""
    return ctx.broadcast(ctx.value(node.args[0]), ctx.out_type().get_shape())


def transpose_value(ctx: ImportContext, x: SSAValue, perm: Sequence[int]) -> SSAValue:
    """`x` with dims permuted (result dim i is dim perm[i]); nothing for the identity."""
    t = _type(x)
    if list(perm) == list(range(len(perm))):
        return x
    shape = [t.get_shape()[p] for p in perm]
    return ctx.emit(
        nn.TransposeOp(x, TensorType(t.element_type, shape), {"permutation": int_array(perm)})
    )


@register(aten.permute.default)
def permute(ctx: ImportContext, node: Node) -> Imported:
    """permute(x, dims)."""
    x = ctx.value(node.args[0])
    rank = len(_type(x).get_shape())
    perm = [ctx.axis(d, max(rank, 1)) for d in ctx.int_list(node.args[1], "dims")]
    return transpose_value(ctx, x, perm)


@register(aten.transpose.int)
def transpose(ctx: ImportContext, node: Node) -> Imported:
    """transpose(x, dim0, dim1)."""
    x = ctx.value(node.args[0])
    rank = len(_type(x).get_shape())
    if rank == 0:
        return x
    a, b = ctx.axis(node.args[1], rank), ctx.axis(node.args[2], rank)
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return transpose_value(ctx, x, perm)


@register(aten.t.default)
def t(ctx: ImportContext, node: Node) -> Imported:
    """t(x): transpose of a matrix; vectors and scalars are unchanged."""
    x = ctx.value(node.args[0])
    return transpose_value(ctx, x, [1, 0]) if len(_type(x).get_shape()) == 2 else x


def slice_value(
    ctx: ImportContext, x: SSAValue, dim: int, start: int, end: int, step: int
) -> SSAValue:
    """`x[..., start:end:step, ...]` along `dim` (bounds already clamped)."""
    shape = list(_type(x).get_shape())
    if (start, end, step) == (0, shape[dim], 1):
        return x
    starts, limits, steps = [0] * len(shape), list(shape), [1] * len(shape)
    starts[dim], limits[dim], steps[dim] = start, end, step
    out = list(shape)
    out[dim] = -(-(end - start) // step)
    attrs = {"start": int_array(starts), "limit": int_array(limits), "step": int_array(steps)}
    return ctx.emit(nn.SliceOp(x, TensorType(_type(x).element_type, out), attrs))


def _clamp_index(i: int | None, size: int, default: int) -> int:
    if i is None:
        return default
    if i < 0:
        i += size
    return min(max(i, 0), size)


@register(aten.slice.Tensor)
def slice_(ctx: ImportContext, node: Node) -> Imported:
    """slice(x, dim=0, start=None, end=None, step=1), with Python's clamping."""
    x = ctx.value(node.args[0])
    shape = _type(x).get_shape()
    dim = ctx.axis(ctx.arg(1, "dim", 0), len(shape))
    step = ctx.arg(4, "step", 1)
    start, end = ctx.arg(2, "start", None), ctx.arg(3, "end", None)
    if not all(isinstance(v, int | None) for v in (start, end)) or not isinstance(step, int):
        raise ctx.fail("slice bounds must be static integers")
    if step < 1:
        raise ctx.fail(f"slice step {step} must be positive")
    lo = _clamp_index(start, shape[dim], 0)
    hi = max(_clamp_index(end, shape[dim], shape[dim]), lo)
    return slice_value(ctx, x, dim, lo, hi, step)


@register(aten.select.int)
def select(ctx: ImportContext, node: Node) -> Imported:
    """select(x, dim, index): a one-wide slice with the dim dropped."""
    x = ctx.value(node.args[0])
    shape = _type(x).get_shape()
    dim = ctx.axis(node.args[1], len(shape))
    index = node.args[2]
    if not isinstance(index, int) or not -shape[dim] <= index < shape[dim]:
        raise ctx.fail(f"index {index!r} is out of range for a dim of size {shape[dim]}")
    index %= shape[dim]
    return ctx.reshape(slice_value(ctx, x, dim, index, index + 1, 1), ctx.out_type().get_shape())


@register(aten.cat.default)
def cat(ctx: ImportContext, node: Node) -> Imported:
    """cat(tensors, dim=0): inputs promoted to the result dtype; legacy empty 1-d
    inputs (shape [0]) are skipped, as PyTorch does."""
    out = ctx.out_type()
    rank = len(out.get_shape())
    dim = ctx.axis(ctx.arg(1, "dim", 0), max(rank, 1))
    values = [ctx.cast(ctx.value(a), out.element_type) for a in node.args[0]]
    values = [v for v in values if _type(v).get_shape() != (0,) or rank == 1]
    if not values:
        raise ctx.fail("cat of only empty tensors")
    if len(values) == 1:
        return values[0]
    return ctx.emit(nn.ConcatOp(values, dim))


@register(aten.stack.default)
def stack(ctx: ImportContext, node: Node) -> Imported:
    """stack(tensors, dim=0): each input promoted to the result dtype and given a size-1
    dim at `dim` (a reshape), then concatenated along it."""
    out = ctx.out_type()
    shape = list(out.get_shape())
    dim = ctx.axis(ctx.arg(1, "dim", 0), len(shape))
    one = [*shape[:dim], 1, *shape[dim + 1 :]]
    values = [ctx.reshape(ctx.cast(ctx.value(a), out.element_type), one) for a in node.args[0]]
    if not values or not math.prod(shape):
        raise ctx.fail("stack of no or empty tensors is not lowered")
    if len(values) == 1:
        return values[0]
    return ctx.emit(nn.ConcatOp(values, dim))


def _split(ctx: ImportContext, x: SSAValue, sizes: Sequence[int], dim: int) -> tuple[SSAValue, ...]:
    parts, start = [], 0
    for size in sizes:
        parts.append(slice_value(ctx, x, dim, start, start + size, 1))
        start += size
    return tuple(parts)


@register(aten.split.Tensor)
def split(ctx: ImportContext, node: Node) -> Imported:
    """split(x, split_size, dim=0): equal chunks, the last possibly smaller."""
    x = ctx.value(node.args[0])
    shape = _type(x).get_shape()
    dim = ctx.axis(ctx.arg(2, "dim", 0), len(shape))
    size = node.args[1]
    if not isinstance(size, int) or size <= 0:
        raise ctx.fail(f"split size must be a positive integer, got {size!r}")
    sizes = [min(size, shape[dim] - s) for s in range(0, shape[dim], size)] or [0]
    return _split(ctx, x, sizes, dim)


@register(aten.split_with_sizes.default)
def split_with_sizes(ctx: ImportContext, node: Node) -> Imported:
    """split_with_sizes(x, sizes, dim=0)."""
    x = ctx.value(node.args[0])
    shape = _type(x).get_shape()
    dim = ctx.axis(ctx.arg(2, "dim", 0), len(shape))
    sizes = ctx.int_list(node.args[1], "split sizes")
    if sum(sizes) != shape[dim]:
        raise ctx.fail(f"split sizes {sizes} do not add up to {shape[dim]}")
    return _split(ctx, x, sizes, dim)


@register(aten.unbind.int)
def unbind(ctx: ImportContext, node: Node) -> Imported:
    """unbind(x, dim=0): every index along dim, with the dim dropped."""
    x = ctx.value(node.args[0])
    shape = list(_type(x).get_shape())
    dim = ctx.axis(ctx.arg(1, "dim", 0), len(shape))
    rest = shape[:dim] + shape[dim + 1 :]
    return tuple(ctx.reshape(p, rest) for p in _split(ctx, x, [1] * shape[dim], dim))


def _pad_along(
    ctx: ImportContext, x: SSAValue, dim: int, before: int, after: int, value: float = 0
) -> SSAValue:
    """`x` with `before` and `after` elements of `value` added along `dim` (an
    nn.concat, which fused kernels index)."""
    t = _type(x)

    def fill(size: int) -> SSAValue:
        shape = list(t.get_shape())
        shape[dim] = size
        return ctx.constant(value, t.element_type, shape)

    kept = [x] if t.get_shape()[dim] else []  # an empty x adds nothing (cropped away)
    parts = [*([fill(before)] if before else []), *kept, *([fill(after)] if after else [])]
    if not parts:
        return x
    return parts[0] if len(parts) == 1 else ctx.emit(nn.ConcatOp(parts, dim))


@register(aten.slice_backward.default)
def slice_backward(ctx: ImportContext, node: Node) -> Imported:
    """slice_backward(grad, input_sizes, dim, start, end, step=1): the gradient placed
    into zeros of the input's shape (step 1 only: concat with zero blocks)."""
    grad = ctx.value(node.args[0])
    sizes = ctx.int_list(node.args[1], "input sizes")
    dim = ctx.axis(node.args[2], len(sizes))
    start, end, step = node.args[3], node.args[4], ctx.arg(5, "step", 1)
    if not all(isinstance(v, int) for v in (start, end, step)) or step != 1:
        raise ctx.fail("slice_backward needs static bounds and step 1")
    lo = _clamp_index(start, sizes[dim], 0)
    width = _type(grad).get_shape()[dim]
    return _pad_along(ctx, grad, dim, lo, sizes[dim] - lo - width)


@register(aten.select_backward.default)
def select_backward(ctx: ImportContext, node: Node) -> Imported:
    """select_backward(grad, input_sizes, dim, index): the gradient as a one-wide slice
    of zeros of the input's shape."""
    grad = ctx.value(node.args[0])
    sizes = ctx.int_list(node.args[1], "input sizes")
    dim = ctx.axis(node.args[2], len(sizes))
    index = node.args[3]
    if not isinstance(index, int) or not -sizes[dim] <= index < sizes[dim]:
        raise ctx.fail(f"index {index!r} is out of range for a dim of size {sizes[dim]}")
    index %= sizes[dim]
    shape = list(sizes)
    shape[dim] = 1
    return _pad_along(ctx, ctx.reshape(grad, shape), dim, index, sizes[dim] - index - 1)
