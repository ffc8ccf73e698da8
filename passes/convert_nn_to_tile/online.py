"""Online statistics for looped reductions: one pass over the reduced dim for the max
and sum of a softmax, or the mean and variance of a normalization.

A looped reduction (a reduced dim longer than one block) runs one `scf.for` over chunks
per level of dependent reductions, then a loop that stores the outputs. Two patterns of
a level-1 reduction that reads a level-0 result (`reduction_pairs`) are merged into the
level-0 loop, so the statistics take one pass and the kernel two (statistics, then
outputs) instead of three:

- softmax, `sum(exp(a - broadcast(reduce_max(a))))` along rows: a running max `m` and
  sum `s` per row; per chunk `m' = max(m, max(chunk))`, `s' = s * exp(m - m') +
  sum(exp(chunk - m'))`, with `m' = -inf` read as 0 so that rows starting with -inf
  (masked scores) stay exact. The chunk terms are the group's own ops, emitted with
  the max replaced by `m'`, so casts and masks are the usual ones, and in f32 their
  exponentials in base 2 where the target asks (`exp2_sums`: only summed here). A row
  whose max ends -inf (all -inf) sums to NaN, as every exp(-inf - -inf) is;
- variance, `mean|sum((a - broadcast(m))^2)` with f32 statistics, where `m` is
  `mean(a)` or nn-decompose's `row_mean` (the row's value where `reduce_min(a) ==
  reduce_max(a)`, else `mean(a)`), along rows or columns. Where the chunk tile stays in
  registers (`per_lane`), each lane keeps Welford's mean and M2 of its elements minus
  a pilot (its first element, so that a large mean costs no precision), with one
  reciprocal of the step count per row; after the loop the lanes combine (Chan et
  al.), and a `row_mean`'s bounds come from the lanes' means (`absorbed`). Otherwise,
  along rows: Chan et al.'s update of the row's count `n`, mean and `M2` by each
  chunk's (`c` valid elements, mean `mc`, `M2c`): `delta = mc - mean`, `n' = n + c`,
  `mean' = mean + delta * c / n'`, `M2' = M2 + M2c + delta^2 * n * c / n'`, with a
  constant chunk's `mc` its value (exact constant rows); the row's min and max
  accumulate in the loop as any reduction does;
- extreme index, an argmax's max and first position holding it, across columns per
  lane (`online_index.py`; rows keep a loop per level, `merges`).

An infinite element makes a per-lane mean NaN (inf - inf in Welford's update, as in
Inductor's), where two passes give an infinite mean; the variance is NaN either way.

On a backend whose row cache holds the rows (`row-cache-bytes`), re-reading costs no
HBM traffic and one loop per level is cheaper than the online form's per-chunk
rescaling and block-wide combines, so the emitter merges only when `rows_fit_cache`
says no.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import Float32Type, TensorType
from xdsl.ir import Operation, SSAValue

from fuseopt.dialects import nn, tile
from fuseopt.dialects.dtypes import element_bytes
from fuseopt.passes.convert_nn_to_tile import online_index
from fuseopt.passes.convert_nn_to_tile.analysis import REDUCTION, IterationSpace
from fuseopt.passes.reduction_pairs import INDEX, SOFTMAX, VARIANCE, StatisticsPair, match_pair

if TYPE_CHECKING:
    from fuseopt.passes.convert_nn_to_tile.emitter import Context, KernelEmitter


def rows_fit_cache(em: KernelEmitter) -> bool:
    """Whether the row cache (`em.row_cache_bytes`, tile-promote's budget on a backend
    that caches rows; 0 for none) holds one program's rows of every group input the
    reduction loops read (never when one is a strided view, which it does not cache)."""
    k = em.space.reduce_dim
    if em.row_cache_bytes <= 0 or k is None:
        return False
    total = 0
    for v in em.group.inputs:
        if k not in em.space.span(v):
            continue
        if v in em.space.views:  # tile-promote does not cache strided views
            return False
        t = v.type
        assert isinstance(t, TensorType)
        rows = math.prod(em.tile_shape(v)) // em.blocks.dims[k]
        total += rows * em.space.extent(v, k) * element_bytes(t.element_type)
    return total <= em.row_cache_bytes


def reduction_phases(
    space: IterationSpace, ops: Sequence[Operation]
) -> dict[int, list[nn.ReductionOp]]:
    """The reductions of `ops` along the reduce dim, by level: level 0 reads no other
    one's result, level n + 1 reads a level-n result (a looped schedule runs one loop
    per level, less the pairs `online_pairs` merges)."""
    k = space.reduce_dim
    level: dict[SSAValue, int] = {}
    phases: dict[int, list[nn.ReductionOp]] = {}
    for op in ops:
        lv = max((level.get(x, 0) for x in op.operands), default=0)
        for r in op.results:
            level[r] = lv
        if isinstance(op, nn.ReductionOp) and k in space.span(op.operands[0]):
            phases.setdefault(lv, []).append(op)
            level[op.results[0]] = lv + 1
    return phases


def softmax_statistics_only(
    space: IterationSpace, ops: Sequence[Operation], outputs: Sequence[SSAValue]
) -> bool:
    """Whether a group reduces rows (the innermost dim, without slices or
    concatenations) to per-row results only, through a softmax's max and sum of
    exponentials that a loop computes in one pass: no output spans the row, and the
    reductions along it are two levels, every second-level one the sum of a softmax
    pair `online_pairs` merges into the first level's loop. (An argmax's rows stay
    whole: on an H200, bf16 8192 x 32000, 224 us whole against 318 looped by 2048 in
    one pass.)"""
    k = space.reduce_dim
    if space.kind != REDUCTION or k != len(space.sizes) - 1 or space.split_dim is not None:
        return False
    if any(k in space.span(v) for v in outputs):
        return False
    phases = reduction_phases(space, ops)
    if set(phases) != {0, 1}:
        return False
    pairs = online_pairs(phases[0], phases[1])
    return len(pairs) == len(phases[1]) and all(p.kind == SOFTMAX for p in pairs)


def online_pairs(
    level0: list[nn.ReductionOp], level1: list[nn.ReductionOp]
) -> list[StatisticsPair]:
    """The level-1 reductions that can run in the level-0 loop, each with its partner
    (each level-0 reduction pairs at most once)."""
    pairs, taken = [], set()
    for second in level1:
        pair = match_pair(second)
        if pair is not None and pair.first in level0 and pair.first not in taken:
            taken.add(pair.first)
            pairs.append(pair)
    return pairs


def merges(em: KernelEmitter, pair: StatisticsPair, innermost: bool) -> bool:
    """Whether a looped kernel runs `pair` in its first level's loop: along rows
    (`innermost`) a softmax or variance, across columns a pair accumulated per lane
    (`per_lane`, with `column_statistics`). An argmax's rows keep a loop per level: on
    an H200 (bf16, Triton) the second read mostly hits L2 and the one-pass loop's
    per-element index work costs more (4096 x 128256: 571 us in two loops, 620 per
    lane in one; 8192 x 32000 looped by 2048: 318 in one, against 224 whole)."""
    lane = em.column_statistics and per_lane(em, pair)
    if pair.kind == INDEX:
        return not innermost and lane
    return innermost or lane


def _row_type(em: KernelEmitter, pair: StatisticsPair) -> TensorType:
    """The f32 tile type of the per-row statistics."""
    return TensorType(em._acc_element(_element(pair.first)), em.tile_shape(pair.first.results[0]))


def _element(op: nn.ReductionOp):  # noqa: ANN202
    t = op.results[0].type
    assert isinstance(t, TensorType)
    return t.element_type


def per_lane(em: KernelEmitter, pair: StatisticsPair) -> bool:
    """Whether the pair's statistics accumulate per lane (a variance or an extreme
    index whose chunk tiles `_defers` allows: small enough to stay in registers, one
    part)."""
    if pair.kind == INDEX:
        return em._defers(pair.first) and em._defers(pair.second)
    return pair.kind == VARIANCE and em._defers(pair.first)


def absorbed(em: KernelEmitter, pairs: list[StatisticsPair]) -> set[int]:
    """ids of level-0 reductions the pairs compute themselves: a per-lane variance's
    row-mean bounds, when only its row mean reads them (the lanes' means bound it as
    well: equal for a constant row, see `_lane_finish`)."""
    ids: set[int] = set()
    k = em.space.reduce_dim
    assert k is not None
    if em.space.sizes[k] < em.blocks.dims[k]:
        return ids  # lanes outside a one-chunk row have no mean of their own
    for pair in pairs:
        if pair.bounds is None or not per_lane(em, pair):
            continue
        select = pair.bounds.row_mean.owner
        assert isinstance(select, Operation)
        compare = select.operands[0].owner
        assert isinstance(compare, Operation)
        row_mean_ops = {select, compare}
        bounds = (pair.bounds.low, pair.bounds.high)
        only_row_mean = all(
            u.operation in row_mean_ops for b in bounds for u in b.results[0].uses
        ) and all(u.operation is select and u.index == 0 for u in compare.results[0].uses)
        if only_row_mean:
            ids |= {id(b) for b in bounds}
    return ids


def _lane_type(em: KernelEmitter, pair: StatisticsPair) -> TensorType:
    """The f32 tile type of per-lane statistics: the chunk tile of the source."""
    return em.tile_type(pair.source, em._acc_element(_element(pair.first)))


def initial(em: KernelEmitter, ctx: Context, pair: StatisticsPair) -> list[SSAValue]:
    """The accumulators' initial tiles: (m, s) for softmax, (n, mean, M2) for variance,
    (m, i) for an extreme index (per row, or per lane with `per_lane`)."""
    if pair.kind == INDEX:
        return online_index.initial(em, ctx, pair)
    if per_lane(em, pair):  # steps taken (per row), then pilot, mean and M2 per lane
        zero = em.splat(ctx, 0.0, _lane_type(em, pair))
        return [em.splat(ctx, 0.0, _row_type(em, pair)), zero, zero, zero]
    t = _row_type(em, pair)
    if pair.kind == SOFTMAX:
        return [em.splat(ctx, -math.inf, t), em.splat(ctx, 0.0, t)]
    return [em.splat(ctx, 0.0, t) for _ in range(3)]


def update(
    em: KernelEmitter, ctx: Context, pair: StatisticsPair, accs: list[SSAValue]
) -> list[SSAValue]:
    """The accumulators after this chunk (emitted into the loop body `ctx`)."""
    if pair.kind == INDEX:
        return online_index.update(em, ctx, pair, accs)
    if per_lane(em, pair):
        return _lane_update(em, ctx, pair, accs)
    t = _row_type(em, pair)
    first = pair.first
    chunk = em._partial_reduce(first, em.emit(pair.source, ctx), ctx)
    if pair.kind == SOFTMAX:
        m, s = accs
        m_new = em.add(ctx, nn.MaxOp(m, chunk))
        ninf = em.splat(ctx, -math.inf, t)
        is_ninf = em.add(ctx, nn.CompareOp("eq", m_new, ninf))
        m_safe = em.add(ctx, nn.SelectOp(is_ninf, em.splat(ctx, 0.0, t), m_new))
        ctx.cache[(first.results[0], 0)] = em._finish_reduce(first, m_safe, ctx)
        terms = em._partial_reduce(pair.second, _exponentials(em, ctx, pair), ctx)
        alpha = em.add(ctx, nn.ExpOp(em.add(ctx, nn.SubOp(m, m_safe))))
        s_new = em.add(ctx, nn.AddOp(em.add(ctx, nn.MulOp(s, alpha)), terms))
        return [m_new, s_new]
    n, mean, m2 = accs
    count = _chunk_count(em, ctx, pair, t)
    chunk_mean = em.add(ctx, nn.DivOp(chunk, count))
    if pair.bounds is not None:  # a constant chunk's mean is its value, as a row's
        source = em.emit(pair.source, ctx)
        low = em._partial_reduce(pair.bounds.low, source, ctx)
        high = em._partial_reduce(pair.bounds.high, source, ctx)
        constant = em.add(ctx, nn.CompareOp("eq", low, high))
        chunk_mean = em.add(ctx, nn.SelectOp(constant, low, chunk_mean))
        ctx.cache[(pair.bounds.row_mean, 0)] = em.cast(ctx, chunk_mean, _element(first))
    ctx.cache[(first.results[0], 0)] = em.cast(ctx, chunk_mean, _element(first))
    chunk_m2 = em._partial_reduce(pair.second, em.emit(pair.second.operands[0], ctx), ctx)
    n_new = em.add(ctx, nn.AddOp(n, count))
    delta = em.add(ctx, nn.SubOp(chunk_mean, mean))
    ratio = em.add(ctx, nn.DivOp(count, n_new))
    mean_new = em.add(ctx, nn.AddOp(mean, em.add(ctx, nn.MulOp(delta, ratio))))
    spread = em.add(ctx, nn.MulOp(em.add(ctx, nn.MulOp(delta, delta)), n))
    m2_new = em.add(
        ctx,
        nn.AddOp(em.add(ctx, nn.AddOp(m2, chunk_m2)), em.add(ctx, nn.MulOp(spread, ratio))),
    )
    return [n_new, mean_new, m2_new]


def _exponentials(em: KernelEmitter, ctx: Context, pair: StatisticsPair) -> SSAValue:
    """This chunk's terms of a softmax's sum: in base 2 where they are f32 (in this
    loop they are only added up, whatever else reads the exponentials after it:
    `reduction_pairs.softmax_exponentials`)."""
    exp = pair.second.operands[0]
    t = exp.type
    assert isinstance(t, TensorType) and isinstance(exp.owner, nn.ExpOp)
    if not em.exp2_sums or not isinstance(t.element_type, Float32Type):
        return em.emit(exp, ctx)
    return em.summed_exp(ctx, em.emit(exp.owner.operands[0], ctx))


def _lane_update(
    em: KernelEmitter, ctx: Context, pair: StatisticsPair, accs: list[SSAValue]
) -> list[SSAValue]:
    """Welford's update of each lane's mean and M2 by its element of this chunk, less
    the lane's pilot (its first element): elementwise, no cross-thread reduction in the
    loop. A lane inside the row has seen every chunk so far (only the last chunk is
    ragged, and a row of more than one chunk starts with a whole one), so its count is
    the row's step count and `1 / steps` is one division per row, not per element. A
    lane outside the row (a ragged last chunk) reads its own shifted mean, which
    changes nothing (its count is one step short: `_lane_counts`)."""
    steps, pilot, mean, m2 = accs
    t = _lane_type(em, pair)
    row = _row_type(em, pair)
    taken = em._broadcast(ctx, steps, pair.first.results[0], pair.source)
    first = em.add(ctx, nn.CompareOp("eq", taken, em.splat(ctx, 0.0, t)))
    steps_new = em.add(ctx, nn.AddOp(steps, em.splat(ctx, 1.0, row)))
    weight = em.add(ctx, nn.DivOp(em.splat(ctx, 1.0, row), steps_new))
    weight = em._broadcast(ctx, weight, pair.first.results[0], pair.source)
    x = em.cast(ctx, em.emit(pair.source, ctx), t.element_type)
    mask = em.chunk_mask(pair.source, ctx)
    if mask is not None:  # outside the row: a finite pilot (0), the shifted mean
        x = em.add(ctx, nn.SelectOp(mask, x, em.splat(ctx, 0.0, t)))
    pilot_new = em.add(ctx, nn.SelectOp(first, x, pilot))
    x = em.add(ctx, nn.SubOp(x, pilot_new))
    if mask is not None:
        x = em.add(ctx, nn.SelectOp(mask, x, mean))
    delta = em.add(ctx, nn.SubOp(x, mean))
    mean_new = em.add(ctx, nn.AddOp(mean, em.add(ctx, nn.MulOp(delta, weight))))
    spread = em.add(ctx, nn.MulOp(delta, em.add(ctx, nn.SubOp(x, mean_new))))
    return [steps_new, pilot_new, mean_new, em.add(ctx, nn.AddOp(m2, spread))]


def _lane_counts(
    em: KernelEmitter, ctx: Context, pair: StatisticsPair, steps: SSAValue
) -> SSAValue:
    """Elements each lane has seen after the loop: every step's, one fewer for a lane
    outside the ragged last chunk (a mask of that chunk after the loop instead of a
    count carried per lane)."""
    n = em._broadcast(ctx, steps, pair.first.results[0], pair.source)
    mask = em.chunk_mask(pair.source, ctx, last=True)
    if mask is None:
        return n
    t = _lane_type(em, pair)
    short = em.add(ctx, nn.SelectOp(mask, em.splat(ctx, 0.0, t), em.splat(ctx, 1.0, t)))
    return em.add(ctx, nn.SubOp(n, short))


def _lane_finish(
    em: KernelEmitter, ctx: Context, pair: StatisticsPair, results: list[SSAValue]
) -> None:
    """The row's mean and M2 from its lanes' (Chan et al.): mean = sum(n * mean_l) / N,
    M2 = sum(M2_l) + sum(n * (mean_l - mean)^2) around the row mean. For a `row_mean`
    whose bounds the pair absorbed (`absorbed`), the bounds are the least and greatest
    lane mean: equal for a constant row (each lane's mean is then exactly the value), so
    its mean is exact and its M2 0; equal lane means of another row are its mean too."""
    steps, pilot, shifted, m2 = results
    axis = em.reduce_axis(pair.source)
    first = pair.first.results[0]

    def total(x: SSAValue) -> SSAValue:
        return em.add(ctx, tile.ReduceOp("sum", x, axis))

    n = _lane_counts(em, ctx, pair, steps)
    count = total(n)
    mean = em.add(ctx, nn.AddOp(pilot, shifted))
    weighted = total(em.add(ctx, nn.MulOp(n, mean)))
    ctx.cache[(first, 0)] = em.cast(
        ctx, em.add(ctx, nn.DivOp(weighted, count)), _element(pair.first)
    )
    if pair.bounds is not None and id(pair.bounds.low) in absorbed(em, [pair]):
        for bound, kind in ((pair.bounds.low, "min"), (pair.bounds.high, "max")):
            value = em.add(ctx, tile.ReduceOp(kind, mean, axis))
            ctx.cache[(bound.results[0], 0)] = em.cast(ctx, value, _element(pair.first))
    center = em._broadcast(ctx, em.emit(pair.center, ctx), first, pair.source)
    # (pilot - center) + shifted mean: the pilot and the center are close, so their
    # difference is exact, and the small shifted mean keeps its precision
    spread = em.add(ctx, nn.AddOp(em.add(ctx, nn.SubOp(pilot, center)), shifted))
    between = total(em.add(ctx, nn.MulOp(n, em.add(ctx, nn.MulOp(spread, spread)))))
    m2_row = em.add(ctx, nn.AddOp(total(m2), between))
    ctx.cache[(pair.second.results[0], 0)] = em._finish_reduce(pair.second, m2_row, ctx)


def _chunk_count(em: KernelEmitter, ctx: Context, pair: StatisticsPair, t: TensorType) -> SSAValue:
    """Valid elements per row in this chunk: the block, or (ragged) a masked count."""
    k = em.space.reduce_dim
    assert k is not None
    block = em.blocks.dims[k]
    if em.space.sizes[k] % block == 0:
        return em.splat(ctx, float(block), t)
    ones = em.splat(ctx, 1.0, em.tile_type(pair.source, t.element_type))
    return em._partial_reduce(pair.first, ones, ctx)


def finish_all(
    em: KernelEmitter, ctx: Context, finished: list[tuple[StatisticsPair, list[SSAValue]]]
) -> None:
    """`finish` each (pair, its loop results), extreme-index pairs first: a variance's
    row mean may read their extreme as its upper bound (`x.var(0)` beside
    `x.argmax(0)`, the max shared after CSE)."""
    for pair, results in sorted(finished, key=lambda f: f[0].kind != INDEX):
        finish(em, ctx, pair, results)


def finish(em: KernelEmitter, ctx: Context, pair: StatisticsPair, results: list[SSAValue]) -> None:
    """Record both reductions' values (after the loop) in `ctx`."""
    if pair.kind == INDEX:
        online_index.finish(em, ctx, pair, results)
        return
    if per_lane(em, pair):
        _lane_finish(em, ctx, pair, results)
        return
    first, second = pair.first.results[0], pair.second.results[0]
    if pair.kind == SOFTMAX:
        m, s = results
        # a row all -inf: every term exp(-inf - -inf) is NaN, so is the sum (the loop
        # read its max as 0 to keep rows that start with -inf exact)
        t = _row_type(em, pair)
        empty = em.add(ctx, nn.CompareOp("eq", m, em.splat(ctx, -math.inf, t)))
        s = em.add(ctx, nn.SelectOp(empty, em.splat(ctx, math.nan, t), s))
        ctx.cache[(first, 0)] = em._finish_reduce(pair.first, m, ctx)
        ctx.cache[(second, 0)] = em._finish_reduce(pair.second, s, ctx)
        return
    _, mean, m2 = results
    ctx.cache[(first, 0)] = em.cast(ctx, mean, _element(pair.first))
    ctx.cache[(second, 0)] = em._finish_reduce(pair.second, m2, ctx)
