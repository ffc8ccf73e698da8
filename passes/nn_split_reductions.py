"""`nn-split-reductions`: reductions of few, long rows or columns in two stages that fill
the GPU.

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

Which rows: the reduced axes are the trailing ones (a full reduction, or a row
reduction), there are fewer than `max_rows` rows, each of at least `min_length`
elements, and the row length has a divisor C from `min_chunk` to `max_chunk` with
S = length / C at least 2. C is the largest power-of-two factor of the length up to
length * rows / `programs` (so that stage one has about `programs` programs or more)
when that is `min_chunk` or more; else the divisor with the least estimated time (waves
of programs times the power-of-two block each reads, its tail masked): a vocabulary of
128256 splits into 64 chunks of 2004, one of 151936 into 128 of 1187. A length with no
such divisor (a prime) splits *ragged*: chunks of a power of two, the last one overhanging
the row, read through `nn.take` at positions clamped into the row (the overhang reads the
last element again) and masked to the reduction's identity after the elementwise
prologue (0 for a sum, -inf for a max); a mean becomes a sum times 1 / length.
Everything else (many rows, short rows) is left unchanged, so the shapes one program per
row already fills compile as before.

A column reduction (over adjacent axes followed by kept ones: a bias gradient's sum
over the rows of a [16384, 4096] matrix) runs as about 64 outputs per program looping
over the reduced axes, so few outputs make a grid of a few dozen programs, each
streaming a long strip (a bf16 sum over 65536 x 1024 took 267 us against 37 for
Inductor's split). Such a reduction splits the same way, its reduced axes read as (S, C)
in place (`plan_column_split`): when its grid, estimated as the tiler builds it, is
under a quarter of `column_programs` and its input has `column_min_elements` or more,
into the fewest chunks that reach `column_programs`, each of `column_min_chunk` or
more, S any divisor of the reduced count (a prime count: ragged, as for rows). Stage one
is a column reduction of S times the outputs; stage two reduces S.

A softmax's or normalization's pair of dependent reductions (the max and the sum of
exponentials, the mean and the variance) over such rows or columns splits as one: chunk
statistics of both levels in one stage-one reduction, combined in stage two
(`split_statistics`), so that `x - max` or `x - mean` is never written out; such a pair
splits into whole chunks only (never ragged). The split shapes and the
rebuilt prologue live in `split_shapes`.

Before splitting, a reduction over axes that are not adjacent (first and last) becomes
one reduction per run of adjacent axes, the last run first (`ChainReduction`): the
tiler schedules a run of axes, not a scattered set.

Options: `max_rows` (default 264: two programs per SM of an H100), `min_length` (65536),
`min_chunk` (1024), `max_chunk` (16384), `programs` (528: four per SM); for columns
`column_programs` (1024: eight per SM), `column_min_chunk` (256), `column_min_elements`
(2^18).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp, TensorType, f32, i64
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
from fuseopt.passes.convert_nn_to_tile.heuristics import COLUMN_BLOCK
from fuseopt.passes.reduction_pairs import INDEX, match_pair
from fuseopt.passes.split_shapes import (
    SplitPlan,
    plan_column_split,
    plan_split,
    ragged_position,
    reshaped,
)
from fuseopt.passes.split_statistics import SplitStatistics

WIDENED = (nn.SumOp, nn.MeanOp)
"""Reductions whose partials are kept in f32."""


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

    def __init__(
        self,
        plan: Callable[[tuple[int, ...], tuple[int, ...]], SplitPlan | None],
        paired: Collection[Operation] = (),
    ):
        self.plan, self.paired = plan, paired

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.ReductionOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op, SPLITTABLE):
            return
        source = op.operands[0]
        t = source.type
        assert isinstance(t, TensorType)
        shape = tuple(t.get_shape())
        plan = self.plan(shape, tuple(op.axis_list))
        if plan is None or (plan.ragged and op in self.paired):
            return  # a statistics pair splits into whole chunks, as a pair, or not at all
        new = _Replacement(op)
        x = new.widened(reshaped(source, plan, new.add, op))
        if not plan.ragged:
            partial = new.add(type(op)(x, [plan.first + 1]))
            new.replace(rewriter, new.add(type(op)(partial, [plan.first])))
            return
        # the padding (reading the last element again) is the reduction's identity, and
        # a mean is a sum over the true count
        kind = nn.SumOp if isinstance(op, nn.MeanOp) else type(op)
        x = _masked(new, x, plan, kind)
        total = new.add(kind(new.add(kind(x, [plan.first + 1])), [plan.first]))
        if isinstance(op, nn.MeanOp):
            t = total.type
            assert isinstance(t, TensorType) and plan.length is not None
            scale = new.add(nn.ConstantOp(1.0 / plan.length, t))
            total = new.add(nn.MulOp(total, scale))
        new.replace(rewriter, total)


def _masked(new: _Replacement, x: SSAValue, plan: SplitPlan, kind: type) -> SSAValue:
    """`x` (a ragged split) with its padding replaced by `kind`'s identity: 0 for a
    sum, the lowest value for a max, the highest for a min."""
    t = x.type
    assert isinstance(t, TensorType)
    assert plan.length is not None
    position = ragged_position(plan, TensorType(i64, t.get_shape()), new.add, clamped=False)
    count = new.add(nn.ConstantOp(plan.length, TensorType(i64, t.get_shape())))
    inside = new.add(nn.CompareOp("lt", position, count))
    element = t.element_type
    if kind is nn.SumOp:
        identity: float | int = 0.0 if is_float(element) else 0
    elif is_float(element):
        identity = -math.inf if kind is nn.ReduceMaxOp else math.inf
    else:
        assert isinstance(element, IntegerType)
        bits = element.width.data
        low, high = (0, 1) if bits == 1 else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        identity = low if kind is nn.ReduceMaxOp else high
    return new.add(nn.SelectOp(inside, x, new.add(nn.ConstantOp(identity, t))))


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
    reduction non-adjacent, as the statistics of `torch.instance_norm` called directly,
    over (1, N*C, L)): each is a row or column reduction the tiler schedules, where the
    whole op would be one program. Sums and means keep f32 intermediates; a mean of
    equal groups' means is the mean; max and min are exact in any order."""

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


@dataclass(frozen=True)
class NNSplitReductionsPass(ModulePass):
    """Split reductions with few, long rows into two stages (see the module docstring)."""

    name = "nn-split-reductions"

    max_rows: int = 264
    """Split only reductions with fewer rows than this (default: two per SM of an H100)."""
    min_length: int = 65536
    """Split only rows of at least this many elements."""
    min_chunk: int = 1024
    """The smallest chunk C a row is split into (a divisor of its length)."""
    max_chunk: int = 16384
    """The largest chunk C."""
    programs: int = 528
    """About how many programs stage one should have (default: four per SM of an H100)."""
    column_programs: int = 1024
    """About how many programs stage one of a split column reduction should have
    (default: eight per SM of an H100, the fastest in a sweep of bf16 column sums)."""
    column_min_chunk: int = 256
    """The fewest reduced elements per chunk of a split column reduction."""
    column_min_elements: int = 1 << 18
    """Split only column reductions of inputs with at least this many elements (below
    it a second launch costs more than it saves)."""

    def plan(self, shape: tuple[int, ...], axes: tuple[int, ...]) -> SplitPlan | None:
        """How a reduction over `axes` of `shape` splits under these options: as few
        long rows (`plan_split`) or as a column reduction with few outputs
        (`plan_column_split`)."""
        rows = plan_split(
            shape,
            axes,
            self.max_rows,
            self.min_length,
            self.min_chunk,
            self.max_chunk,
            self.programs,
        )
        return rows or plan_column_split(
            shape,
            axes,
            self.column_programs,
            COLUMN_BLOCK,
            self.column_min_chunk,
            self.column_min_elements,
        )

    def even_plan(self, shape: tuple[int, ...], axes: tuple[int, ...]) -> SplitPlan | None:
        """`plan`, except a ragged one (a statistics pair splits into whole chunks only:
        its combine weighs every chunk alike)."""
        plan = self.plan(shape, axes)
        return None if plan is None or plan.ragged else plan

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(ChainReduction(), apply_recursively=False).rewrite_module(op)
        statistics = SplitStatistics(self.even_plan)
        PatternRewriteWalker(statistics, apply_recursively=False).rewrite_module(op)
        hint = op.attributes.get(nn.SIZE_HINT_ATTR)
        size = hint.value.data if isinstance(hint, IntegerAttr) else None
        paired: set[Operation] = set()  # members of statistics pairs left unsplit above
        for red in op.walk():  # (an argmax's max and min split apart exactly, even ragged)
            pair = match_pair(red) if isinstance(red, nn.ReductionOp) else None
            if pair is not None and pair.kind != INDEX:
                paired.update((pair.first, pair.second))
                if pair.bounds is not None:  # a row mean's min and max go with it
                    paired.update((pair.bounds.low, pair.bounds.high))

        def plan(shape: tuple[int, ...], axes: tuple[int, ...]) -> SplitPlan | None:
            """`self.plan`, except a ragged split of a shape that follows the dynamic
            size (a module lowered at a size hint, passes/generalize_sizes.py): its
            chunk count would be a function of the size tile IR cannot compute, and a
            function compiled once for every size would compile per size instead."""
            found = self.plan(shape, axes)
            if found is None or not found.ragged or size is None:
                return found
            follows = any(n and n % size == 0 for n in (*shape, found.length))
            return None if follows else found

        walker = PatternRewriteWalker(SplitReduction(plan, paired), apply_recursively=False)
        walker.rewrite_module(op)
