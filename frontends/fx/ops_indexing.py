"""Converters for the ATen ops that read a tensor at computed positions: embedding,
index_select, gather, take and advanced indexing (`index.Tensor`).

Each becomes one `nn.take` under index arithmetic: the flat position of every result
element in the (contiguous) input is the sum over the input's dims of its coordinate
times the dim's stride, where a coordinate is an index tensor's value on an indexed dim
and the result element's own position (an index vector) on the others. Kernels compute
those positions and load by address (`tile.gather`), so a lookup fuses into whatever
consumes it (an embedding into the add and norm after it), and the indices' arithmetic
into the same kernel. Advanced indexing wraps negative indices as PyTorch does; the
other ops require indices in range (PyTorch raises for one out of range; the reference
interpreter raises too, and a kernel reads 0 without touching memory outside the
input). Boolean indices (a data-dependent result shape) run eagerly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch.fx import Node
from xdsl.dialects.builtin import IntegerType, TensorType, i64
from xdsl.ir import SSAValue

from fuseopt.dialects import nn
from fuseopt.frontends.fx.context import ImportContext, Imported, register
from fuseopt.frontends.fx.ops_creation import index_vector
from fuseopt.frontends.fx.ops_shape import contiguous_strides, slice_value

aten = torch.ops.aten


def _shape(v: SSAValue) -> list[int]:
    t = v.type
    assert isinstance(t, TensorType)
    return list(t.get_shape())


def _index(ctx: ImportContext, arg: object, what: str) -> SSAValue:
    """An integer index tensor (i64; booleans select a data-dependent number of
    elements and are not lowered)."""
    v = ctx.value(arg)
    element = v.type.element_type  # type: ignore[attr-defined]
    if not isinstance(element, IntegerType) or element.width.data == 1:
        raise ctx.fail(f"{what} must be an integer tensor, got {v.type}")
    return ctx.cast(v, i64)


def _wrapped(ctx: ImportContext, index: SSAValue, size: int) -> SSAValue:
    """`index` with negative entries counted from the end (index + size), as PyTorch's
    advanced indexing reads them."""
    shape = _shape(index)
    negative = ctx.emit(nn.CompareOp("lt", index, ctx.constant(0, i64, shape)))
    shifted = ctx.emit(nn.AddOp(index, ctx.constant(size, i64, shape)))
    return ctx.emit(nn.SelectOp(negative, shifted, index))


def _take(
    ctx: ImportContext,
    x: SSAValue,
    coordinates: Sequence[SSAValue | int | None],
    result: Sequence[int],
) -> SSAValue:
    """`nn.take` of `x` at the flat positions sum(coordinate_d * stride_d) over x's dims,
    as a tensor of shape `result`. `coordinates[d]` is an i64 tensor broadcastable to
    `result` (an index), an int r (the result's axis r: an index vector along it), or
    None (the dim has size 1: coordinate 0)."""
    shape = _shape(x)
    if not math.prod(shape) or not math.prod(result):
        raise ctx.fail("indexing into or producing an empty tensor is not lowered")
    position: SSAValue | None = None
    for stride, coordinate in zip(contiguous_strides(shape), coordinates, strict=True):
        if coordinate is None:
            continue
        if isinstance(coordinate, int):
            along = [result[coordinate] if i == coordinate else 1 for i in range(len(result))]
            term = index_vector(ctx, result[coordinate], 0, along)
        else:
            term = coordinate
        if stride != 1:
            term = ctx.emit(nn.MulOp(term, ctx.constant(stride, i64, _shape(term))))
        term = ctx.broadcast(term, result)
        position = term if position is None else ctx.emit(nn.AddOp(position, term))
    if position is None:  # every dim of x has size 1
        position = ctx.constant(0, i64, result)
    return ctx.emit(nn.TakeOp(x, position))


def _placed(ctx: ImportContext, index: SSAValue, rank: int, at: int) -> SSAValue:
    """`index` reshaped to `rank` dims with its own dims starting at `at` (size 1 on
    the others): broadcastable to a result whose axes `at`... are the index's."""
    shape = _shape(index)
    return ctx.reshape(index, [1] * at + shape + [1] * (rank - at - len(shape)))


@register(aten.embedding.default)
def embedding(ctx: ImportContext, node: Node) -> Imported:
    """embedding(weight [V, D], indices [*S]) -> [*S, D]: row `indices[s]` of the
    weight (padding_idx and the gradient options change only the backward)."""
    weight = ctx.value(node.args[0])
    ids = _index(ctx, node.args[1], "embedding indices")
    if len(_shape(weight)) != 2:
        raise ctx.fail(f"embedding weight must be 2-D, got {weight.type}")
    result = _shape(ids) + [_shape(weight)[1]]
    rows = _placed(ctx, ids, len(result), 0)
    return _take(ctx, weight, [rows, len(result) - 1], result)


@register(aten.index_select.default)
def index_select(ctx: ImportContext, node: Node) -> Imported:
    """index_select(x, dim, index [K]) -> x with dim `dim` replaced by K."""
    x = ctx.value(node.args[0])
    shape = _shape(x)
    dim = ctx.axis(ctx.arg(1, "dim"), max(len(shape), 1))
    index = _index(ctx, node.args[2], "index_select index")
    if not shape:  # a 0-d input: the index holds one 0, the result is 0-d
        return _take(ctx, x, [], list(ctx.out_type().get_shape()))
    index = ctx.reshape(index, [math.prod(_shape(index))])
    result = list(ctx.out_type().get_shape())
    along = _placed(ctx, index, len(result), dim)
    coordinates = [along if d == dim else (d if n != 1 else None) for d, n in enumerate(shape)]
    return _take(ctx, x, coordinates, result)


@register(aten.gather.default)
def gather(ctx: ImportContext, node: Node) -> Imported:
    """gather(x, dim, index) -> index's shape: out[i][j] = x[index[i][j]][j] (dim 0),
    the index no larger than x off `dim`."""
    x = ctx.value(node.args[0])
    shape = _shape(x)
    index = _index(ctx, node.args[2], "gather index")
    result = _shape(index)
    if len(result) != len(shape):
        raise ctx.fail(f"gather index of rank {len(result)} for an input of rank {len(shape)}")
    if not shape:
        return _take(ctx, x, [], result)
    dim = ctx.axis(ctx.arg(1, "dim"), len(shape))
    coordinates = [index if d == dim else (d if n != 1 else None) for d, n in enumerate(shape)]
    return _take(ctx, x, coordinates, result)


@register(aten.take.default)
def take(ctx: ImportContext, node: Node) -> Imported:
    """take(x, index): x flattened, read at `index` (negative entries count from the
    end, as PyTorch's take reads them)."""
    x = ctx.value(node.args[0])
    index = _index(ctx, node.args[1], "take index")
    flat = ctx.reshape(x, [math.prod(_shape(x))])
    return _take(ctx, flat, [_wrapped(ctx, index, math.prod(_shape(x)))], _shape(index))


@register(aten.index.Tensor)
def index_tensor(ctx: ImportContext, node: Node) -> Imported:
    """x[i0, i1, ...] with integer index tensors (None: the whole dim), broadcast
    together: the indexed dims are replaced by the indices' broadcast shape, in place
    when they are adjacent, else in front (NumPy's rule)."""
    x = ctx.value(node.args[0])
    shape = _shape(x)
    entries = list(node.args[1])
    if len(entries) > len(shape):
        raise ctx.fail(f"{len(entries)} indices for a tensor of rank {len(shape)}")
    entries += [None] * (len(shape) - len(entries))
    indexed = [d for d, e in enumerate(entries) if e is not None]
    if not indexed:
        raise ctx.fail("indexing without an index tensor")
    indices = {d: _index(ctx, entries[d], "an index") for d in indexed}
    bshape = list(torch.broadcast_shapes(*(tuple(_shape(i)) for i in indices.values())))
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    at = indexed[0] if adjacent else 0
    kept = [d for d in range(len(shape)) if d not in indexed]
    result = list(ctx.out_type().get_shape())
    # result axes: the kept dims before `at`, the broadcast dims, the kept dims after
    before = [d for d in kept if d < at] if adjacent else []
    after = [d for d in kept if d not in before]
    axis_of = {d: i for i, d in enumerate(before)}
    axis_of.update({d: at + len(bshape) + i for i, d in enumerate(after)})
    if len(result) != len(before) + len(bshape) + len(after):
        raise ctx.fail(f"unexpected result shape {result} of advanced indexing")
    coordinates: list[SSAValue | int | None] = []
    for d, n in enumerate(shape):
        if d in indices:
            i = indices[d]
            i = ctx.reshape(i, [1] * (len(bshape) - len(_shape(i))) + _shape(i))
            coordinates.append(_placed(ctx, _wrapped(ctx, i, n), len(result), at))
        else:
            coordinates.append(axis_of[d] if n != 1 else None)
    return _take(ctx, x, coordinates, result)


@register(aten.pad.default)
def pad(ctx: ImportContext, node: Node) -> Imported:
    """pad(x, pad, mode="constant", value=None), as graphs traced without
    decompositions (`fuseopt.export`) keep it: the constant mode is `constant_pad_nd`;
    reflect, replicate and circular are not lowered (they run in PyTorch)."""
    mode = ctx.arg(2, "mode", "constant")
    if mode != "constant":
        raise ctx.fail(f"pad mode {mode!r} is not lowered (only 'constant')")
    value = ctx.arg(3, "value", None)
    return _constant_pad(ctx, node, 0 if value is None else value)


@register(aten.constant_pad_nd.default)
def constant_pad_nd(ctx: ImportContext, node: Node) -> Imported:
    """constant_pad_nd(x, pad, value=0): `pad` holds (before, after) pairs from the last
    dim backwards; a negative amount crops, a positive one adds `value`. A crop alone is
    a slice. With padding, out[i] = x[i - before] where that is inside x, else `value`:
    an `nn.take` at the clamped source coordinates under a select, so the pad is indexing
    in the kernel that reads it (a concatenation with constant blocks would cut the
    padded axis into pieces as narrow as the pad)."""
    return _constant_pad(ctx, node, ctx.arg(2, "value", 0))


def _constant_pad(ctx: ImportContext, node: Node, value: object) -> Imported:
    """`constant_pad_nd` of the node's input by its `pad` (args 0 and 1) with `value`."""
    x = ctx.value(node.args[0])
    pad = ctx.int_list(node.args[1], "pad")
    shape = _shape(x)
    rank = len(shape)
    if len(pad) % 2 or len(pad) // 2 > rank:
        raise ctx.fail(f"pad {pad} does not fit a tensor of rank {rank}")
    if not isinstance(value, int | float):
        raise ctx.fail(f"pad value must be a number, got {value!r}")
    befores, afters = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        befores[rank - 1 - i], afters[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    for d, (n, lo, hi) in enumerate(zip(shape, befores, afters, strict=True)):
        if n + min(lo, 0) + min(hi, 0) < 0:
            raise ctx.fail(f"pad {pad} crops dim {d} of size {n} below zero")
    if all(p <= 0 for p in pad):  # crops only: a view
        for d, (n, lo, hi) in enumerate(zip(shape, befores, afters, strict=True)):
            x = slice_value(ctx, x, d, -lo, n + hi, 1)
        return x
    out_type = ctx.out_type()
    out = list(out_type.get_shape())
    if not math.prod(shape) or not math.prod(out):  # nothing to read: all `value`
        return ctx.constant(value, out_type.element_type, out)
    coordinates: list[SSAValue | int | None] = []
    inside: SSAValue | None = None
    for d, (n, lo, hi) in enumerate(zip(shape, befores, afters, strict=True)):
        if lo == 0 and hi == 0:
            coordinates.append(d if n != 1 else None)
            continue
        # i - before over the whole result (a kernel computes it from its tile indices),
        # clamped into x where a side is padded; in x where the clamp changed nothing
        along = [out[d] if i == d else 1 for i in range(rank)]
        source = ctx.broadcast(index_vector(ctx, out[d], -lo, along), out)
        clamped = source
        if lo > 0:
            clamped = ctx.emit(nn.MaxOp(clamped, ctx.constant(0, i64, out)))
        if hi > 0:
            clamped = ctx.emit(nn.MinOp(clamped, ctx.constant(n - 1, i64, out)))
        coordinates.append(clamped)
        if clamped is not source:
            valid = ctx.emit(nn.CompareOp("eq", clamped, source))
            inside = valid if inside is None else ctx.emit(nn.SelectOp(inside, valid, inside))
    gathered = _take(ctx, x, coordinates, out)
    assert inside is not None  # some dim is padded
    filler = ctx.constant(value, out_type.element_type, out)
    return ctx.emit(nn.SelectOp(inside, gathered, filler))
