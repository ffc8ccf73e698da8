"""Slices read in place: an unfused `nn.slice` whose readers are all kernels is not
copied. Each reading kernel gets the sliced buffer itself with a strided parameter
type (`tile.strided_layout`) that addresses the slice's elements: `x[1:-1, 16:-16]`
of a 64 x 256 tensor is `memref<62x224xf32, strided<[256, 1], offset: 272>>`, and
`x[:, 1::2]` steps by 2 along its last dim. A slice of such a slice composes into one
view of the first buffer.

nn-fuse leaves a slice outside a group when the group cannot index it (a strided
slice, a cut into too many parts: `analysis`); the cost model already counts such a
slice as a free view, and this is what makes it one. A kernel that cannot read a
given view in place (a gather from it, a matmul operand, axes that must merge but are
not contiguous) gets a copy instead, made where that kernel runs
(`HostLowering._materialized`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from fuseopt.dialects import nn, tile


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


def reads_in_place(op: nn.SliceOp, view_broadcasts: Collection[Operation]) -> bool:
    """Whether every reader of `op`'s result is a kernel that can take it as a strided
    view: a fusion lowered to kernels (not a library GEMM's), an unfused elementwise op
    or reduction, a broadcast such an op reads as indexing (`view_broadcasts`), or
    another unfused slice (which composes)."""
    uses = list(op.result.uses)
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
        elif not isinstance(user, (*nn.ELEMENTWISE_OPS, nn.ReductionOp, nn.SliceOp)):
            return False
    return True
