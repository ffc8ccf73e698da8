"""Slices read in place: an unfused `nn.slice` whose readers are all kernels (directly or
through reshapes that strides can express) is not copied. Each reading kernel gets the
sliced buffer itself with a strided parameter type (`tile.strided_layout`) that
addresses the slice's elements: `x[1:-1, 16:-16]` of a 64 x 256 tensor is
`memref<62x224xf32, strided<[256, 1], offset: 272>>`, and `x[:, 1::2]` steps by 2 along
its last dim. A slice of such a slice composes into one view of the first buffer, and so
does a reshape of one that splits or merges dims the way a PyTorch `view` could
(`reshape_view`): the query columns of a GEMM that projects query, key and value at
once, split into heads, are read by the RoPE kernel in place.

nn-fuse leaves a slice outside a group when the group cannot index it (a strided
slice, a cut into too many parts: `analysis`); the cost model already counts such a
slice as a free view, and this is what makes it one. A kernel that cannot read a
given view in place (a gather from it, a matmul operand, axes that must merge but are
not contiguous) gets a copy instead, made where that kernel runs
(`HostLowering._materialized`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from fuseopt.dialects import nn, tile
from fuseopt.passes.convert_nn_to_tile.analysis import Group


@dataclass(frozen=True)
class StridedView:
    """The elements of nn value `value` as a strided view of the buffer of `source`."""

    value: SSAValue
    source: SSAValue
    """The nn value whose buffer the kernels are passed (it has one of its own)."""
    strides: tuple[int, ...]
    offset: int

    @property
    def layout(self) -> tuple[tuple[int, ...], int]:
        """(strides, offset), as `analysis.analyze` takes them."""
        return self.strides, self.offset


def slice_view(op: nn.SliceOp, base: StridedView | None) -> StridedView:
    """`op`'s result as a strided view: of its operand's buffer, or composed with the
    view `base` its operand already is."""
    dims = tuple(int(n) for n in op.input.type.get_shape())  # type: ignore[union-attr]
    strides, offset = (base.strides, base.offset) if base else (tile.row_major_strides(dims), 0)
    source = base.source if base else op.input
    new_strides = []
    for (lo, _, step), s in zip(op.bounds, strides, strict=True):
        offset += lo * s
        new_strides.append(s * step)
    return StridedView(op.result, source, tuple(new_strides), offset)


def view_strides(
    shape: Sequence[int], strides: Sequence[int], new_shape: Sequence[int]
) -> tuple[int, ...] | None:
    """The strides of `new_shape` over the elements of a `shape` view with `strides`,
    taken in row-major order, when one strided view can address them (PyTorch's rule
    for `Tensor.view`: only dims that are contiguous with each other merge); else None."""
    if math.prod(shape) != math.prod(new_shape):
        return None
    if math.prod(shape) == 0:
        return tile.row_major_strides(tuple(new_shape))
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_stride = strides[-1] if strides else 1
    tensor_count = view_count = 1
    for d in range(len(shape) - 1, -1, -1):
        tensor_count *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tensor_count * chunk_stride):
            while view_d >= 0 and (view_count < tensor_count or new_shape[view_d] == 1):
                new_strides[view_d] = view_count * chunk_stride
                view_count *= new_shape[view_d]
                view_d -= 1
            if view_count != tensor_count:
                return None
            if d > 0:
                chunk_stride = strides[d - 1]
                tensor_count = view_count = 1
    return tuple(new_strides) if view_d == -1 else None


def reshape_view(op: nn.ReshapeOp, base: StridedView) -> StridedView | None:
    """`op`'s result as a view of the buffer `base` (its operand) views, or None when
    no strides express it (dims merged that are not contiguous with each other)."""
    dims = tuple(int(n) for n in op.input.type.get_shape())  # type: ignore[union-attr]
    new_dims = tuple(int(n) for n in op.result.type.get_shape())  # type: ignore[union-attr]
    strides = view_strides(dims, base.strides, new_dims)
    if strides is None:
        return None
    return StridedView(op.result, base.source, strides, base.offset)


def reads_in_place(
    op: nn.SliceOp, view_broadcasts: Collection[Operation], view: StridedView | None = None
) -> bool:
    """Whether every reader of `op`'s result is a kernel that can take it as a strided
    view: a fusion lowered to kernels (not a library GEMM's), an unfused elementwise op
    or reduction, a broadcast such an op reads as indexing (`view_broadcasts`), another
    unfused slice (which composes), or a reshape whose readers all can take its result
    (`view`, the slice's strided view, tells whether strides express the reshape)."""
    return _readers_take_views(op.result, view_broadcasts, view)


def _readers_take_views(
    value: SSAValue, view_broadcasts: Collection[Operation], view: StridedView | None
) -> bool:
    uses = list(value.uses)
    if not uses:
        return False
    for use in uses:
        user = use.operation
        if isinstance(user, nn.FusionOp):
            if user.route_kind == nn.Route.LIBRARY_GEMM:
                return False
        elif isinstance(user, nn.BroadcastOp):
            if user not in view_broadcasts:
                return False
        elif isinstance(user, nn.ReshapeOp):
            reshaped = reshape_view(user, view) if view is not None else None
            if reshaped is None or not _readers_take_views(user.result, view_broadcasts, reshaped):
                return False
        elif not isinstance(user, (*nn.ELEMENTWISE_OPS, nn.ReductionOp, nn.SliceOp)):
            return False
    return True


def peel_input_reshapes(
    group: Group, ins: dict[SSAValue, SSAValue], views: dict[SSAValue, StridedView]
) -> tuple[Group, dict[SSAValue, SSAValue], dict[SSAValue, StridedView]]:
    """`group` with each reshape of an input it reads as a strided view (`views`) taken
    out of the kernel: the reshape's result becomes the input, itself a strided view of
    the same buffer (`reshape_view`). The analysis tiles no reshape that splits or
    merges dims, and a strided input's dims cannot be flattened as a contiguous one's
    are: a query's columns of a merged projection, split into heads inside a q-norm's
    kernel, would otherwise be copied. Reshapes no strides express, or whose result
    leaves the group, stay."""
    peeled: list[Operation] = []
    ins, views = dict(ins), dict(views)
    inputs = list(group.inputs)
    for op in group.ops:
        if not isinstance(op, nn.ReshapeOp) or op.input not in views:
            continue
        if op.result in group.outputs:
            continue
        reshaped = reshape_view(op, views[op.input])
        if reshaped is None:
            continue
        peeled.append(op)
        views[op.result], ins[op.result] = reshaped, ins[op.input]
        inputs.append(op.result)
    if not peeled:
        return group, ins, views
    ops = [op for op in group.ops if op not in peeled]
    used = {x for op in ops for x in op.operands} | set(group.outputs)
    inputs = [x for x in inputs if x in used]
    ins = {x: b for x, b in ins.items() if x in inputs}
    views = {x: v for x, v in views.items() if x in inputs}
    return Group(ops, inputs, list(group.outputs)), ins, views
