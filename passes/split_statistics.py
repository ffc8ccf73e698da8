"""Softmax, variance and argmax statistics of few long rows or columns, in chunks, then
combined (a pattern of nn-split-reductions).

A softmax or normalization over a handful of rows of millions of elements has two
dependent reductions (`reduction_pairs`): the sum of exponentials needs the max, the
variance needs the mean (an argmax's first position needs the max too, and splits the
same way). Splitting each reduction alone would leave the level-1 one reading
`a - max` or `a - mean`, a value the size of the input that the normalization
also reads, so it would be written to memory in f32 and read twice. Instead the pair
splits as one: with the row of length S * C seen as [S, C] (`plan_split`),

- stage one computes each chunk's statistics, both levels in one fused reduction:
  softmax `mc = max(chunk)`, `sc = sum(exp(chunk - mc'))` (`mc'` = `mc`, or 0 where
  `mc` is -inf: a chunk of only -inf has `sc` = 0); variance `mc = mean(chunk)` (the
  chunk's `row_mean` when the row's is one) and `M2c = sum((chunk - mc)^2)`;
- stage two combines the S chunks of a row: softmax `m = max(mc)`,
  `s = sum(sc * exp(mc - m))`; variance `m = mean(mc)` (again a `row_mean` of the chunk
  means, exact when they are all one value), `M2 = sum(M2c) + C * sum((mc - m)^2)`
  (Chan et al.'s combination of equal-count groups), the variance `M2 / (S * C)` or the
  sum of squares `M2`;
- an extreme index (argmax) is its own combination: stage one is the pair on each chunk
  (the chunk's max `mc` and first position `ic` holding it, or its first NaN), stage
  two the pair on the chunks, `ic` as the positions: `m = max(mc)`, the least `ic`
  among chunks with `mc == m` (or NaN). Any element type splits (a max is exact).

The row's max or mean replaces the level-0 result for every other use (the
normalization that follows reads `a` again, fused with its own elementwise ops), the
combination replaces the level-1 result, and the old reductions are erased. Only f32
softmax and variance statistics split (nn-decompose computes narrow floats' statistics
in f32). The split's ops go before the earliest level-0 reduction, or for an argmax
whose positions are defined after its max (as the frontend builds them), after those,
when every other use of the pair's results follows. They are located at the level-1
reduction.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects.builtin import Float32Type, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from fuseopt.dialects import nn
from fuseopt.passes.nn_builder import NNBuilder
from fuseopt.passes.reduction_pairs import (
    INDEX,
    SOFTMAX,
    IndexCandidates,
    StatisticsPair,
    match_pair,
)
from fuseopt.passes.split_shapes import SplitPlan, reshaped

Planner = Callable[[tuple[int, ...], tuple[int, ...]], SplitPlan | None]
"""(shape, reduced axes) -> the split, or None to leave the reduction alone."""


class SplitStatistics(RewritePattern):
    """Rewrites a softmax, variance or extreme-index pair into chunk statistics and their
    combination when `plan` splits the level-0 reduction (see the module docstring)."""

    def __init__(self, plan: Planner):
        self.plan = plan

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.ReductionOp, rewriter: PatternRewriter) -> None:
        pair = match_pair(op)
        if pair is None or pair.first.axis_list != op.axis_list:
            return
        anchor = _insertion_point(pair, op)
        if anchor is None:
            return
        t = pair.source.type
        assert isinstance(t, TensorType)
        if pair.kind != INDEX and not isinstance(t.element_type, Float32Type):
            return
        shape = tuple(t.get_shape())
        plan = self.plan(shape, tuple(op.axis_list))
        if plan is None:
            return
        b = NNBuilder()
        a = reshaped(pair.source, plan, b.add, op, recompute=True)
        split_axis, chunk_axis = plan.first, plan.first + 1
        if pair.kind == SOFTMAX:
            center, total = _softmax(b, a, split_axis, chunk_axis)
        elif pair.kind == INDEX:
            center, total = _extreme_index(b, pair, a, plan, op, split_axis, chunk_axis)
        else:
            center, total = _variance(b, pair, a, split_axis, chunk_axis, plan)
        center = _as_type(b, center, pair.center)
        total = _as_type(b, total, op.results[0])
        for new in b.ops:
            new.location = op.location
        rewriter.insert(b.ops, InsertPoint.before(anchor))
        rewriter.replace_all_uses_with(pair.center, center)
        rewriter.replace_all_uses_with(op.results[0], total)
        for old in _replaced_ops(pair):
            if all(not r.uses for r in old.results):
                rewriter.erase(old)


def _softmax(b: NNBuilder, a: SSAValue, split: int, chunk: int) -> tuple[SSAValue, SSAValue]:
    """(max, sum of exp(x - max)) of each row of `a` [..., S, C], keepdim [..., 1, 1]."""
    chunk_max = b.reduce(nn.ReduceMaxOp, a, [chunk])
    finite_max = _zero_where_infinite(b, chunk_max)
    chunk_sum = b.reduce(nn.SumOp, b.unary(nn.ExpOp, b.binary(nn.SubOp, a, finite_max)), [chunk])
    row_max = b.reduce(nn.ReduceMaxOp, chunk_max, [split])
    rescale = b.unary(nn.ExpOp, b.binary(nn.SubOp, chunk_max, row_max))
    return row_max, b.reduce(nn.SumOp, b.add(nn.MulOp(chunk_sum, rescale)), [split])


def _extreme_index(
    b: NNBuilder,
    pair: StatisticsPair,
    a: SSAValue,
    plan: SplitPlan,
    op: nn.ReductionOp,
    split: int,
    chunk: int,
) -> tuple[SSAValue, SSAValue]:
    """(extreme, first position holding it) of each row of `a` [..., S, C], keepdim
    [..., 1, 1]: the pair on each chunk, then on the chunks' results."""
    cand = pair.candidates
    assert cand is not None
    kind = type(pair.first)
    index = reshaped(cand.index, plan, b.add, op)
    chunk_extreme = b.reduce(kind, a, [chunk])
    chunk_first = b.reduce(
        nn.ReduceMinOp, _index_candidates(b, cand, a, chunk_extreme, index), [chunk]
    )
    row_extreme = b.reduce(kind, chunk_extreme, [split])
    candidates = _index_candidates(b, cand, chunk_extreme, row_extreme, chunk_first)
    return row_extreme, b.reduce(nn.ReduceMinOp, candidates, [split])


def _index_candidates(
    b: NNBuilder, cand: IndexCandidates, a: SSAValue, extreme: SSAValue, index: SSAValue
) -> SSAValue:
    """`select(a != a, index, select(a == extreme, index, past))` in `a`'s shape (the
    NaN test as the pair has it)."""
    index = b.broadcast(index, a)
    it = index.type
    assert isinstance(it, TensorType)
    past = b.add(nn.ConstantOp(cand.past, it))
    hit = b.add(nn.CompareOp("eq", a, b.broadcast(extreme, a)))
    candidates = b.add(nn.SelectOp(hit, index, past))
    if cand.nan_first:
        candidates = b.add(nn.SelectOp(b.add(nn.CompareOp("ne", a, a)), index, candidates))
    return candidates


def _zero_where_infinite(b: NNBuilder, m: SSAValue) -> SSAValue:
    """`m` with -inf read as 0 (exp(-inf - 0) = 0 where exp(-inf - -inf) is NaN)."""
    ninf = b.constant(-math.inf, m)
    return b.add(nn.SelectOp(b.add(nn.CompareOp("eq", m, ninf)), b.constant(0.0, m), m))


def _variance(
    b: NNBuilder, pair: StatisticsPair, a: SSAValue, split: int, chunk: int, plan: SplitPlan
) -> tuple[SSAValue, SSAValue]:
    """(mean, variance or sum of squared deviations, as `pair.second`) of each row of
    `a` [..., S, C], keepdim [..., 1, 1]."""
    exact = pair.bounds is not None
    chunk_mean = _mean(b, a, chunk, exact)
    deviation = b.binary(nn.SubOp, a, chunk_mean)
    chunk_m2 = b.reduce(nn.SumOp, b.add(nn.MulOp(deviation, deviation)), [chunk])
    row_mean = _mean(b, chunk_mean, split, exact)
    spread = b.binary(nn.SubOp, chunk_mean, row_mean)
    between = b.reduce(nn.SumOp, b.add(nn.MulOp(spread, spread)), [split])
    within = b.reduce(nn.SumOp, chunk_m2, [split])
    m2 = b.add(nn.AddOp(within, b.add(nn.MulOp(between, b.constant(float(plan.chunk), between)))))
    if isinstance(pair.second, nn.MeanOp):
        m2 = b.add(nn.DivOp(m2, b.constant(float(plan.splits * plan.chunk), m2)))
    return row_mean, m2


def _mean(b: NNBuilder, x: SSAValue, axis: int, exact: bool) -> SSAValue:
    """The keepdim mean of `x` over `axis`; with `exact`, nn-decompose's `row_mean`
    form (the value itself where min == max)."""
    mean = b.reduce(nn.MeanOp, x, [axis])
    if not exact:
        return mean
    low, high = b.reduce(nn.ReduceMinOp, x, [axis]), b.reduce(nn.ReduceMaxOp, x, [axis])
    return b.add(nn.SelectOp(b.add(nn.CompareOp("eq", low, high)), low, mean))


def _as_type(b: NNBuilder, x: SSAValue, like: SSAValue) -> SSAValue:
    """`x` reshaped to the type of `like` (no op when it has it)."""
    return x if x.type == like.type else b.add(nn.ReshapeOp(x, like.type))


def _earliest(pair: StatisticsPair) -> Operation | None:
    """The first of the pair's level-0 reductions in the block: every use of the max or
    mean follows it, and everything the split reads precedes it (None when they are
    not all in one block: the pair is then left alone)."""
    ops: list[Operation] = [pair.first]
    if pair.bounds is not None:
        ops += [pair.bounds.low, pair.bounds.high]
    block = pair.first.parent_block()
    if block is None or any(o.parent_block() is not block for o in ops):
        return None
    return min(ops, key=block.get_operation_index)


def _insertion_point(pair: StatisticsPair, second: nn.ReductionOp) -> Operation | None:
    """The op the split's ops go before: the pair's earliest reduction, or for an
    argmax whose positions are defined after it (the frontend builds them after the
    max), the op after their definition, when every other use of the pair's results
    follows it; None when no such point exists (the pair is then left alone)."""
    earliest = _earliest(pair)
    index = pair.candidates.index.owner if pair.candidates is not None else None
    if earliest is None or not isinstance(index, Operation):
        return earliest
    block = earliest.parent_block()
    assert block is not None
    if index.parent_block() is not block:
        return None
    if block.get_operation_index(index) < block.get_operation_index(earliest):
        return earliest
    anchor = index.next_op
    assert anchor is not None  # the positions are used by the pair, after them
    at = block.get_operation_index(anchor)
    replaced = set(_replaced_ops(pair))
    for value in (pair.center, second.results[0]):
        for use in value.uses:
            user = use.operation
            if user in replaced:
                continue
            if user.parent_block() is not block or block.get_operation_index(user) < at:
                return None
    return anchor


def _replaced_ops(pair: StatisticsPair) -> list[Operation]:
    """The pair's ops, users before what they use, for erasing those left unused."""
    if pair.candidates is not None:  # selects and compares, then the broadcast extreme
        found: list[Operation] = [pair.second]
        value = pair.second.operands[0]
        while isinstance(select := value.owner, nn.SelectOp):
            found += [select, select.operands[0].owner]  # type: ignore[list-item]
            value = select.operands[2]
        return [*found, pair.candidates.extreme.owner, pair.first]  # type: ignore[list-item]
    ops: list[Operation] = [pair.second]
    value = pair.second.operands[0]
    while isinstance(value.owner, Operation) and value.owner not in ops:
        op = value.owner  # exp or square, the deviation, the broadcast of the center
        ops.append(op)
        if isinstance(op, nn.BroadcastOp):
            break
        value = op.operands[1] if isinstance(op, nn.SubOp) else op.operands[0]
    if pair.bounds is not None:
        select = pair.bounds.row_mean.owner
        assert isinstance(select, Operation)
        ops += [select, select.operands[0].owner]  # type: ignore[list-item]
        ops += [pair.bounds.low, pair.bounds.high]
    return [*ops, pair.first]
