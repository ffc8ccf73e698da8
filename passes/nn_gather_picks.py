"""`nn-gather-picks`: a reduction that picks one element per row by comparing an index
vector with a target becomes a gather of that element.

nll_loss (cross-entropy after its log_softmax) reads each row's value at its target
class. The frontend writes that pick as a one-hot sum, which keeps the whole loss in one
row kernel but costs a third pass over the row (an i64 comparison, a select and a sum
per element):

    %hit = nn.compare eq, %classes, %targets : tensor<Nx1000xi64>   (index vector, target)
    %sel = nn.select %hit, %v, %zero : tensor<Nx1000xf32>
    %p = nn.sum %sel [1] : tensor<Nx1000xf32> -> tensor<Nxf32>

When `%v` is computed element by element from values the pass can read at one position
(row values broadcast along the picked axis, splat constants, column values broadcast
over rows, and tensors that are in memory anyway: function arguments and the results of
GEMMs and library calls), the pick becomes `%v`'s computation at the target's position,
its tensors read there by `nn.take`:

    %t = clamped target; %x_t = nn.take %x, %row * 1000 + %t : ... -> tensor<Nxbf16>
    %p = nn.select %valid, (%v computed on %x_t and the row values), 0

so nn-fuse fuses the gather into the row kernel and the one-hot pass is gone (bf16
cross-entropy on an H200, kernel us: 65536 x 1000 81.1 -> 62.0, 8192 x 32000 371.6 ->
261.4, and over 8 rows of 128256, where the split reductions had split the one-hot sum
too, 7 kernels -> 4). A target outside the axis picks nothing, as the one-hot sum does:
the result is 0 there (the take reads position 0 of the row, in range). A -0.0 at the
target stays -0.0 (the one-hot sum gives +0.0). Anything else (a `%v` computed from a
view or another reduction's full-size result, which a take would have to read from
memory that nn-fuse keeps in registers) is left as it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.context import Context
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, TensorType, i1, i64
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from fuseopt.dialects import nn
from fuseopt.passes.nn_canonicalization_patterns import splat_of

IN_MEMORY = (nn.MatmulOp, nn.LinearOp, nn.TorchCallOp, nn.AttentionOp, nn.CumsumOp)
"""Ops whose full-size results are written to memory whatever fuses around them, so a
take may read them (besides function arguments); a GEMM's only when no elementwise
epilogue may take its place (`in_memory`)."""


def _shape(v: SSAValue) -> list[int]:
    t = v.type
    assert isinstance(t, TensorType)
    return list(t.get_shape())


def _element(v: SSAValue) -> Attribute:
    t = v.type
    assert isinstance(t, TensorType)
    return t.element_type


def _aligned(shape: Sequence[int], rank: int) -> list[int]:
    """`shape` with leading 1s up to `rank` dims (NumPy broadcasting's alignment)."""
    return [1] * (rank - len(shape)) + list(shape)


def index_axis(value: SSAValue) -> int | None:
    """The axis along which `value` equals its own index (0, 1, 2, ... along it, the
    same across the other axes), or None: an arange constant, reshaped and broadcast."""
    owner = value.owner
    shape = _shape(value)
    if isinstance(owner, nn.ConstantOp):
        long = [k for k, n in enumerate(shape) if n > 1]
        return long[0] if len(long) == 1 and owner.arange == (0, 1) else None
    if isinstance(owner, nn.ReshapeOp):
        inner = index_axis(owner.input)
        long = [k for k, n in enumerate(shape) if n > 1]
        if inner is None or len(long) != 1 or sum(n > 1 for n in _shape(owner.input)) != 1:
            return None
        return long[0]
    if isinstance(owner, nn.BroadcastOp):
        inner = index_axis(owner.input)
        source = _shape(owner.input)
        if inner is None or sum(n > 1 for n in source) != 1:
            return None
        return inner + len(shape) - len(source)
    return None


class _Pick:
    """Builds the ops that read a one-hot sum's `%v` at each row's target: the picked
    shape is the reduced input's shape without the picked axis."""

    def __init__(self, shape: list[int], axis: int, targets: SSAValue, location: object):
        """`targets`: the integer tensor the comparison broadcasts along `axis`."""
        self.shape, self.axis = shape, axis
        self.picked = shape[:axis] + shape[axis + 1 :]
        self.ops: list[Operation] = []
        self.location = location
        self.memo: dict[SSAValue, SSAValue | None] = {}
        rows = _aligned(_shape(targets), len(shape))
        target = self.broadcast(self.reshape(targets, rows[:axis] + rows[axis + 1 :]))
        count = self.constant(shape[axis], i64)
        at_least_zero = self.add(nn.CompareOp("ge", target, self.constant(0, i64)))
        below = self.add(nn.CompareOp("lt", target, count))
        self.valid = self.add(nn.SelectOp(at_least_zero, below, self.constant(False, i1)))
        self.target = self.add(nn.SelectOp(self.valid, target, self.constant(0, i64)))

    def add(self, op: Operation) -> SSAValue:
        op.location = self.location
        self.ops.append(op)
        return op.results[0]

    def discard(self) -> None:
        """Erase the ops built so far (their operand uses included): no rewrite."""
        for op in reversed(self.ops):
            op.erase()
        self.ops.clear()

    def constant(self, value: float | int | bool, element: Attribute) -> SSAValue:
        """A splat of the picked shape."""
        return self.add(nn.ConstantOp(value, TensorType(element, self.picked)))

    def reshape(self, value: SSAValue, shape: list[int]) -> SSAValue:
        if _shape(value) == shape:
            return value
        return self.add(nn.ReshapeOp(value, TensorType(_element(value), shape)))

    def broadcast(self, value: SSAValue) -> SSAValue:
        if _shape(value) == self.picked:
            return value
        return self.add(nn.BroadcastOp(value, TensorType(_element(value), self.picked)))

    def index_vector(self, axis: int) -> SSAValue:
        """0, 1, ... along axis `axis` of the picked shape, broadcast over the others."""
        n = self.picked[axis]
        dense = DenseIntOrFPElementsAttr.from_list(TensorType(i64, [n]), list(range(n)))
        vector = self.add(nn.ConstantOp(dense, dense.type))
        along = [n if k == axis else 1 for k in range(len(self.picked))]
        return self.broadcast(self.reshape(vector, along))

    def take(self, source: SSAValue, aligned: list[int]) -> SSAValue:
        """`source` (of shape `aligned` after leading 1s, each dim 1 or the input's)
        read at every row's target: flat positions of (row coordinates, target)."""
        strides = [math.prod(aligned[k + 1 :]) for k in range(len(aligned))]
        position: SSAValue | None = None
        for k, (n, stride) in enumerate(zip(aligned, strides, strict=True)):
            if n == 1:
                continue
            term = self.target if k == self.axis else self.index_vector(k - (k > self.axis))
            if stride != 1:
                term = self.add(nn.MulOp(term, self.constant(stride, i64)))
            position = term if position is None else self.add(nn.AddOp(position, term))
        if position is None:
            position = self.constant(0, i64)
        flat = self.reshape(source, [math.prod(aligned)])
        return self.add(nn.TakeOp(flat, position))

    def at(self, value: SSAValue) -> SSAValue | None:
        """`value` (of the reduced input's shape) at each row's target, or None when it
        cannot be read there without writing a tensor out."""
        if value not in self.memo:
            self.memo[value] = self._at(value)
        return self.memo[value]

    def _at(self, value: SSAValue) -> SSAValue | None:
        owner = value.owner
        splat = splat_of(value)
        if splat is not None:
            return self.constant(splat, _element(value))
        if isinstance(owner, nn.BroadcastOp):
            source = owner.input
            aligned = _aligned(_shape(source), len(self.shape))
            if aligned[self.axis] == 1:  # the same along the picked axis: a row value
                row = aligned[: self.axis] + aligned[self.axis + 1 :]
                return self.broadcast(self.reshape(source, row))
            return self.take(source, aligned) if in_memory(source) else None
        if isinstance(owner, nn.ELEMENTWISE_OPS):
            operands = [self.at(v) for v in owner.operands]
            if any(v is None for v in operands):
                return None
            result = TensorType(_element(value), self.picked)
            clone = owner.__class__.create(
                operands=operands,
                result_types=[result],
                properties=dict(owner.properties),
                attributes=dict(owner.attributes),
            )
            return self.add(clone)
        return self.take(value, self.shape) if in_memory(value) else None


def in_memory(value: SSAValue) -> bool:
    """Whether `value`'s elements are in memory whatever fuses around it (a function
    argument or an `IN_MEMORY` op's result, through reshapes, which keep flat positions).
    A GEMM whose one use is elementwise (a bias add) is not: nn-fuse makes that use its
    epilogue and the GEMM's own result is never stored, so a take from it would add a
    store of the whole product."""
    while isinstance(value.owner, nn.ReshapeOp):
        value = value.owner.input
    if isinstance(value, BlockArgument):
        return True
    owner = value.owner
    if isinstance(owner, nn.MatmulOp | nn.LinearOp):
        uses = list(value.uses)
        return not (len(uses) == 1 and isinstance(uses[0].operation, nn.ELEMENTWISE_OPS))
    return isinstance(owner, IN_MEMORY)


def _targets_along(value: SSAValue, shape: list[int], axis: int) -> SSAValue | None:
    """The tensor `value` broadcasts along `axis` (of size 1 there), or None."""
    owner = value.owner
    if not isinstance(owner, nn.BroadcastOp):
        return None
    source = owner.input
    aligned = _aligned(_shape(source), len(shape))
    if aligned[axis] != 1:
        return None
    return source


class GatherPick(RewritePattern):
    """`nn.sum (nn.select (index == target), %v, 0) [axis]` -> `%v` at the target."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.SumOp, rewriter: PatternRewriter) -> None:
        axes = op.axis_list
        select = op.input.owner
        if len(axes) != 1 or not isinstance(select, nn.SelectOp):
            return
        if splat_of(select.operands[2]) != 0:
            return
        compare = select.operands[0].owner
        if not isinstance(compare, nn.CompareOp) or compare.predicate.data != "eq":
            return
        shape = _shape(op.input)
        axis = axes[0] % len(shape)
        for index, target in (compare.operands, tuple(reversed(compare.operands))):
            targets = _targets_along(target, shape, axis)
            if index_axis(index) == axis and targets is not None and _element(index) == i64:
                break
        else:
            return
        pick = _Pick(shape, axis, targets, op.location)
        value = pick.at(select.operands[1])
        if value is None:
            pick.discard()
            return
        zero = pick.constant(0, _element(value))
        picked = pick.add(nn.SelectOp(pick.valid, value, zero))
        result = pick.reshape(picked, _shape(op.result))
        rewriter.replace_op(op, pick.ops, [result])


class NNGatherPicksPass(ModulePass):
    """One-hot sums that pick an element per row become a gather of it (see the module
    docstring): cross-entropy's target class read by address, not by a third pass over
    the row."""

    name = "nn-gather-picks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GatherPick(), apply_recursively=False).rewrite_module(op)
