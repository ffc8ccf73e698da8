"""`nn-split-reductions`: reductions with few, long rows in two stages that fill the GPU.

The tiler runs a reduction as one program per output row. A reduction to a scalar (a
loss), or one over a handful of rows of millions of elements, therefore runs on one
or a few of the GPU's SMs. This pass rewrites such a reduction, before nn-fuse, into two
reductions of the same kind:

    %r = nn.sum %x [1, 2] : tensor<4x1024x4096xbf16> -> tensor<4xbf16>

becomes (S splits of C elements per row, S * C = the reduced count)

    %w = nn.cast %x : tensor<4x1024x4096xbf16> -> tensor<4x1024x4096xf32>
    %v = nn.reshape %w : tensor<4x1024x4096xf32> -> tensor<4x256x16384xf32>
    %p = nn.sum %v [2] : tensor<4x256x16384xf32> -> tensor<4x256xf32>
    %q = nn.sum %p [1] : tensor<4x256xf32> -> tensor<4xf32>
    %r = nn.cast %q : tensor<4xf32> -> tensor<4xbf16>

Stage one has rows * S programs (each a row-reduction of C elements, its elementwise
prologue fused in by nn-fuse); stage two reduces S partials per row. Partials of a sum
or mean are f32 whatever the input type, so splitting loses no precision; a mean of
equal chunks' means is the mean. max and min keep their type. The result is
deterministic (no atomics): the same order every run.

The reshape is pushed up through the elementwise ops that compute the reduction's input
and are used only by it or by each other (`(a - b)^2` of a loss, smooth-L1's branches on
`|a - b|`), down to their inputs, so that nn-fuse fuses them into stage one and the
reshapes are views of the inputs.

Which reductions: the reduced axes are the trailing ones (a full reduction, or a row
reduction; reductions over middle axes are left as they are), there are fewer than
`max_rows` rows, each of at least `min_length` elements, and the row length has a power
of two factor of at least `min_chunk`. C is the largest power-of-two factor of the row
length up to `max_chunk` and up to length * rows / `programs` (so that stage one has
about `programs` programs or more); S = length / C must be at least 2. Everything else
is left unchanged, so the shapes one program per row already fills (many rows) compile
as before.

Before splitting, a reduction over axes that are not adjacent (first and last) becomes
one reduction per run of adjacent axes, the last run first (`ChainReduction`): the
tiler schedules a run of axes, not a scattered set.

Options: `max_rows` (default 264: two programs per SM of an H100), `min_length` (65536),
`min_chunk` (1024), `max_chunk` (16384), `programs` (528: four per SM).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import is_float

WIDENED = (nn.SumOp, nn.MeanOp)
"""Reductions whose partials are kept in f32."""


@dataclass(frozen=True)
class SplitPlan:
    """How one reduction splits: `rows` outputs, each of `splits` chunks of `chunk`."""

    rows: int
    splits: int
    chunk: int


def plan_split(
    shape: tuple[int, ...],
    axes: tuple[int, ...],
    max_rows: int,
    min_length: int,
    min_chunk: int,
    max_chunk: int,
    programs: int,
) -> SplitPlan | None:
    """The split of a reduction over `axes` of `shape`, or None to leave it as it is."""
    rank = len(shape)
    if not axes or sorted(axes) != list(range(rank - len(axes), rank)):
        return None  # not the trailing axes
    length = math.prod(shape[rank - len(axes) :])
    rows = math.prod(shape[: rank - len(axes)])
    if rows >= max_rows or length < min_length:
        return None
    cap = max(min_chunk, min(max_chunk, length * rows // programs))
    chunk = 1
    while chunk * 2 <= cap and length % (chunk * 2) == 0:
        chunk *= 2
    if chunk < min_chunk or length // chunk < 2:
        return None
    return SplitPlan(rows, length // chunk, chunk)


SPLITTABLE = (nn.SumOp, nn.MeanOp, nn.ReduceMaxOp, nn.ReduceMinOp)
"""Reductions both patterns rewrite (their partial results combine with the same op)."""


class _Replacement:
    """The ops that replace reduction `op`, each located at it (errors in later stages
    point at the reduction); sums and means of 16-bit floats keep f32 partials."""

    def __init__(self, op: nn.ReductionOp):
        self.op, self.ops = op, []
        t = op.operands[0].type
        assert isinstance(t, TensorType)
        self.element = t.element_type
        self.wide = isinstance(op, WIDENED) and is_float(self.element) and self.element != f32

    def add(self, new: Operation) -> SSAValue:
        """Append `new`, located at the reduction; its first result."""
        new.location = self.op.location
        self.ops.append(new)
        return new.results[0]

    def widened(self, x: SSAValue) -> SSAValue:
        """`x` in f32 when the partials are widened."""
        shape = x.type.get_shape()  # type: ignore[attr-defined]
        return self.add(nn.CastOp(x, TensorType(f32, shape))) if self.wide else x

    def replace(self, rewriter: PatternRewriter, total: SSAValue) -> None:
        """Replace the reduction by the ops, `total` (rounded back, the reduced axes
        back as size 1 for keepdim) as its result."""
        if self.wide:
            shape = total.type.get_shape()  # type: ignore[attr-defined]
            total = self.add(nn.CastOp(total, TensorType(self.element, shape)))
        out = self.op.results[0].type
        if total.type != out:
            total = self.add(nn.ReshapeOp(total, out))
        rewriter.replace(self.op, self.ops, [total])


class SplitReduction(RewritePattern):
    """Rewrites one nn reduction into two stages when `plan_split` says so."""

    def __init__(self, pass_: NNSplitReductionsPass):
        self.options = pass_

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.ReductionOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op, SPLITTABLE):
            return
        source = op.operands[0]
        t = source.type
        assert isinstance(t, TensorType)
        shape = tuple(t.get_shape())
        o = self.options
        plan = plan_split(
            shape, op.axis_list, o.max_rows, o.min_length, o.min_chunk, o.max_chunk, o.programs
        )
        if plan is None:
            return
        kept = shape[: len(shape) - len(op.axis_list)]
        new = _Replacement(op)
        x = new.widened(reshaped(source, (*kept, plan.splits, plan.chunk), new.add, op))
        partial = new.add(type(op)(x, [len(kept) + 1]))
        new.replace(rewriter, new.add(type(op)(partial, [len(kept)])))


def axis_runs(axes: tuple[int, ...]) -> list[list[int]]:
    """Sorted `axes` as maximal runs of adjacent axes: (0, 2, 3) -> [[0], [2, 3]]."""
    runs: list[list[int]] = []
    for a in sorted(axes):
        if runs and runs[-1][-1] == a - 1:
            runs[-1].append(a)
        else:
            runs.append([a])
    return runs


class ChainReduction(RewritePattern):
    """Rewrites a reduction over axes that are not adjacent (a sum over the first and
    last axes) into one reduction per run of adjacent axes, the last run first (axes of
    size 1 join no run: they go with the first reduction, and alone they make no
    reduction non-adjacent, as InstanceNorm's statistics over (1, N*C, L)): each is
    a row or column reduction the tiler schedules, where the whole op would be one
    program. Sums and means keep f32 intermediates; a mean of equal groups' means is
    the mean; max and min are exact in any order."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.ReductionOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op, SPLITTABLE):
            return
        shape = op.operands[0].type.get_shape()  # type: ignore[attr-defined]
        units = [a for a in op.axis_list if shape[a] == 1]  # reducing them moves nothing
        runs = axis_runs(tuple(a for a in op.axis_list if shape[a] != 1))
        if len(runs) < 2:
            return
        new = _Replacement(op)
        x = new.widened(op.operands[0])
        removed: list[int] = []
        for run in reversed(runs):  # later runs first; the size-1 axes go with the first
            axes = [*run, *units] if not removed else run
            x = new.add(type(op)(x, sorted(a - sum(r < a for r in removed) for a in axes)))
            removed += axes
        new.replace(rewriter, x)


ELEMENTWISE = (
    nn.UnaryElementwiseOp,
    nn.BinaryElementwiseOp,
    nn.CompareOp,
    nn.SelectOp,
    nn.CastOp,
)
"""Ops a reshape moves through: same-shaped operands and result, element by element."""

MAX_CONE = 64
"""How many elementwise ops above the reduction a reshape is pushed through at most."""


def _same_shape_elementwise(op: Operation | None, shape: tuple[int, ...]) -> bool:
    return (
        isinstance(op, ELEMENTWISE)
        and len(op.results) == 1
        and all(x.type.get_shape() == shape for x in op.operands)  # type: ignore[attr-defined]
    )


def movable_cone(value: SSAValue, user: Operation) -> set[Operation]:
    """The elementwise ops computing `value` (all of its shape) that the reshape can move
    above: every use of each one's result is by `user` or by another op of the set (a
    value used twice inside, as smooth-L1's |a - b|, moves; one also used outside stays
    and is reshaped where it is). At most `MAX_CONE` ops, nearest first."""
    shape = tuple(value.type.get_shape())  # type: ignore[attr-defined]
    cone: list[Operation] = []
    frontier = [value.owner]
    while frontier and len(cone) < MAX_CONE:
        op = frontier.pop(0)
        if op in cone or not _same_shape_elementwise(op, shape):  # type: ignore[arg-type]
            continue
        cone.append(op)  # type: ignore[arg-type]
        frontier += [x.owner for x in op.operands]  # type: ignore[union-attr]
    inside = set(cone)
    changed = True
    while changed:  # drop ops with a use outside the set, until none is left
        changed = False
        for op in list(inside):
            users = {use.operation for r in op.results for use in r.uses}
            if not users <= inside | {user}:
                inside.discard(op)
                changed = True
    if value.owner not in inside:
        return set()
    return _reachable(value, inside)


def _reachable(value: SSAValue, inside: set[Operation]) -> set[Operation]:
    """The ops of `inside` that `value` depends on through ops of `inside`."""
    found: set[Operation] = set()
    stack = [value.owner]
    while stack:
        op = stack.pop()
        if op in inside and op not in found:
            found.add(op)  # type: ignore[arg-type]
            stack += [x.owner for x in op.operands]  # type: ignore[union-attr]
    return found


def reshaped(
    value: SSAValue,
    shape: tuple[int, ...],
    add: Callable[[Operation], SSAValue],
    user: Operation,
) -> SSAValue:
    """`value` under `shape`: the elementwise ops of its `movable_cone` are rebuilt on
    reshaped operands (each value once), splat constants made in the new shape, any
    other value reshaped where it is."""
    cone = movable_cone(value, user)
    done: dict[SSAValue, SSAValue] = {}

    def build(v: SSAValue) -> SSAValue:
        if v in done:
            return done[v]
        t = v.type
        assert isinstance(t, TensorType)
        target = TensorType(t.element_type, shape)
        op = v.owner
        if isinstance(op, nn.ConstantOp) and op.splat_value is not None:
            done[v] = add(nn.ConstantOp(op.splat_value, target))
        elif op in cone:
            assert isinstance(op, Operation)
            rebuilt = type(op).create(
                operands=[build(x) for x in op.operands],
                result_types=[target],
                attributes=dict(op.attributes),
                properties=dict(op.properties),
            )
            done[v] = add(rebuilt)
            rebuilt.location = op.location  # the rebuilt op is the one the user wrote
        else:
            done[v] = add(nn.ReshapeOp(v, target))
        return done[v]

    return build(value)


@dataclass(frozen=True)
class NNSplitReductionsPass(ModulePass):
    """Split reductions with few, long rows into two stages (see the module docstring)."""

    name = "nn-split-reductions"

    max_rows: int = 264
    """Split only reductions with fewer rows than this (default: two per SM of an H100)."""
    min_length: int = 65536
    """Split only rows of at least this many elements."""
    min_chunk: int = 1024
    """The smallest chunk C a row is split into (a power-of-two factor of its length)."""
    max_chunk: int = 16384
    """The largest chunk C."""
    programs: int = 528
    """About how many programs stage one should have (default: four per SM of an H100)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(ChainReduction(), apply_recursively=False).rewrite_module(op)
        walker = PatternRewriteWalker(SplitReduction(self), apply_recursively=False)
        walker.rewrite_module(op)
