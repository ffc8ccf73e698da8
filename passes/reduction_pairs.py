"""Two-level row statistics recognized in nn IR: a softmax's max and sum of
exponentials, a normalization's mean and variance, and an argmax's max and first index.

Each is a level-0 reduction of `a` and a level-1 reduction of a value computed from
`a` and the level-0 result:

- softmax, `sum(exp(a - broadcast(reduce_max(a))))`;
- variance, `mean|sum((a - broadcast(m))^2)` in f32, where `m` is `mean(a)` or
  nn-decompose's `row_mean` (the row's value where `reduce_min(a) == reduce_max(a)`,
  else `mean(a)`);
- extreme index, `reduce_min(select(a != a, i, select(a == broadcast(e), i, p)))` with
  `e` the reduce_max (or reduce_min) of `a`, `i` positions that do not depend on `e`
  and `p` a splat constant (the NaN test only for floats): the first position holding
  the extreme, or the first NaN, as the frontend builds argmax/argmin and max.dim.

The tiler runs such a pair in one pass over a long row, or across columns per lane
(`convert_nn_to_tile/online.py`, `merges`: an extreme index only across columns);
nn-split-reductions splits a pair over few long rows into chunk statistics and their
combination (`split_statistics.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import Float32Type, IntegerType, TensorType
from xdsl.ir import Operation, SSAValue

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import is_float

SOFTMAX, VARIANCE, INDEX = "softmax", "variance", "index"
"""Kinds of statistics pairs."""


@dataclass(frozen=True)
class MeanBounds:
    """A variance's mean that is exact for constant rows (nn-decompose's `row_mean`):
    `select(low == high, low, mean)`."""

    low: nn.ReduceMinOp
    high: nn.ReduceMaxOp
    row_mean: SSAValue
    """The selected mean (the value the deviations subtract)."""


@dataclass(frozen=True)
class IndexCandidates:
    """What an extreme-index pair's level-1 reduction takes the least of, per element:
    its `index` where the element equals the extreme (or is NaN, with `nan_first`), else
    `past`, one value for every element."""

    index: SSAValue
    past: int
    nan_first: bool
    extreme: SSAValue
    """The extreme broadcast to the elements (what they are compared with)."""
    ordered: bool = False
    """Whether the positions increase strictly along the reduced axis and stay below
    `past` (an arange, as the frontend's, plus offsets constant along it): the first
    element holding a lane's extreme is then its least candidate, so a loop keeps it by
    a comparison (`online_index._ordered_update`)."""


@dataclass(frozen=True)
class StatisticsPair:
    """A level-0 reduction and the level-1 reduction that reads its result."""

    kind: str
    first: nn.ReductionOp
    """reduce_max (softmax) or mean (variance) of `a`."""
    second: nn.ReductionOp
    """The sum of exponentials, or the mean/sum of squared deviations."""
    bounds: MeanBounds | None = None
    """For a variance around a `row_mean`: its min and max."""
    candidates: IndexCandidates | None = None
    """For an extreme index: the positions and the value of the others."""

    @property
    def source(self) -> SSAValue:
        """`a`: the value both reductions read, directly or through the first's result."""
        return self.first.operands[0]

    @property
    def center(self) -> SSAValue:
        """The value the second reduction's deviations subtract: the max, the mean or
        the row mean."""
        return self.bounds.row_mean if self.bounds is not None else self.first.results[0]


def _owner(v: SSAValue, kind: type) -> Operation | None:
    op = v.owner
    return op if isinstance(op, kind) else None


def _deviation(v: SSAValue) -> tuple[nn.ReductionOp, MeanBounds | None] | None:
    """(R, bounds) when `v` is `a - broadcast(R)` with R a reduction of `a`, or
    `a - broadcast(row_mean)` with R the mean inside the row mean (then with its
    bounds)."""
    sub = _owner(v, nn.SubOp)
    if sub is None:
        return None
    a, b = sub.operands
    bcast = _owner(b, nn.BroadcastOp)
    if bcast is None:
        return None
    m = bcast.operands[0]
    red = _owner(m, nn.ReductionOp)
    if red is not None:
        if red.operands[0] is not a or not _broadcasts_back(m, red):
            return None
        return red, None  # type: ignore[return-value]
    found = _row_mean(m, a)
    if found is None or not _broadcasts_back(m, found[0]):
        return None
    return found


def _broadcasts_back(m: SSAValue, red: nn.ReductionOp) -> bool:
    """Whether broadcasting `m` (a value of `red`'s result shape) to the shape of
    `red`'s input puts each row's value on that row: nn.broadcast aligns trailing
    dims, so `m`'s shape padded with leading 1s must be the input's with the reduced
    axes 1 (keepdim, or the reduced axes leading)."""
    source, result = red.operands[0].type, m.type
    assert isinstance(source, TensorType) and isinstance(result, TensorType)
    shape, axes = source.get_shape(), set(red.axis_list)
    padded = (1,) * (len(shape) - len(result.get_shape())) + tuple(result.get_shape())
    kept = tuple(1 if i in axes else n for i, n in enumerate(shape))
    return padded == kept


def _row_mean(m: SSAValue, a: SSAValue) -> tuple[nn.ReductionOp, MeanBounds] | None:
    """(mean, bounds) when `m` is `select(reduce_min(a) == reduce_max(a),
    reduce_min(a), mean(a))` over one set of axes (nn-decompose's `row_mean`)."""
    select = _owner(m, nn.SelectOp)
    if select is None:
        return None
    cond, low_value, mean_value = select.operands
    compare = _owner(cond, nn.CompareOp)
    if compare is None or compare.predicate.data != "eq":
        return None
    low = _owner(compare.operands[0], nn.ReduceMinOp)
    high = _owner(compare.operands[1], nn.ReduceMaxOp)
    mean = _owner(mean_value, nn.MeanOp)
    if low is None or high is None or mean is None or low_value is not low.results[0]:
        return None
    reductions: list[nn.ReductionOp] = [mean, low, high]  # type: ignore[list-item]
    if any(r.operands[0] is not a or r.axis_list != mean.axis_list for r in reductions):
        return None
    return mean, MeanBounds(low, high, m)  # type: ignore[arg-type]


def _extreme_index(second: nn.ReductionOp) -> StatisticsPair | None:
    """The extreme-index pair whose level-1 reduction is `second` (a reduce_min), or
    None (see the module docstring)."""
    outer = _owner(second.operands[0], nn.SelectOp)
    if outer is None:
        return None
    cond, index, rest = outer.operands
    nan = _owner(cond, nn.CompareOp)
    nan_first = nan is not None and nan.predicate.data == "ne" and nan.lhs is nan.rhs
    inner = _owner(rest, nn.SelectOp) if nan_first else outer
    if inner is None or inner.operands[1] is not index:
        return None
    hit = _owner(inner.operands[0], nn.CompareOp)
    past = _owner(inner.operands[2], nn.ConstantOp)
    if hit is None or hit.predicate.data != "eq" or past is None:
        return None
    a, bcast = hit.lhs, _owner(hit.rhs, nn.BroadcastOp)
    extreme = _owner(bcast.operands[0], nn.ReduceMaxOp | nn.ReduceMinOp) if bcast else None
    if extreme is None or extreme.operands[0] is not a or (nan_first and nan.lhs is not a):
        return None
    if extreme.axis_list != second.axis_list or not _broadcasts_back(bcast.operands[0], extreme):
        return None
    value = past.splat_value
    it, at = index.type, a.type
    assert isinstance(it, TensorType) and isinstance(at, TensorType)
    if not isinstance(value, int) or not isinstance(it.element_type, IntegerType):
        return None
    if is_float(at.element_type) != nan_first or _reads(index, extreme.results[0]):
        return None
    axes = second.axis_list
    positions = _positions(index, axes[0]) if len(axes) == 1 else None
    ordered = positions is not None and positions[0] == _RISING and positions[2] < value
    candidates = IndexCandidates(index, value, nan_first, hit.rhs, ordered)
    return StatisticsPair(INDEX, extreme, second, candidates=candidates)  # type: ignore[arg-type]


_FLAT, _RISING = "flat", "rising"
"""How positions run along an axis: constant, or strictly increasing."""

_I64 = (-(1 << 63), (1 << 63) - 1)
"""The range of i64 positions (a sum outside it wraps)."""


def _positions(v: SSAValue, axis: int | None) -> tuple[str, int, int] | None:
    """(how `v` runs along `axis`, a lower and an upper bound of its values) for integer
    positions built from aranges and splats (nn.constant), broadcasts, reshapes that
    add or drop unit dims, and sums that cannot wrap; None for anything else. `axis`
    None: along no axis (flat)."""
    op, t = v.owner, v.type
    assert isinstance(t, TensorType)
    shape = t.get_shape()
    if axis is not None and shape[axis] == 1:
        axis = None
    if isinstance(op, nn.ConstantOp):
        splat = op.splat_value
        if isinstance(splat, int):
            return _FLAT, splat, splat
        found = op.arange
        if found is None:
            return None
        (start, step), along = found, max(range(len(shape)), key=lambda d: shape[d])
        end = start + step * (shape[along] - 1)
        low, high = min(start, end), max(start, end)
        if along != axis:
            return _FLAT, low, high
        return (_RISING, low, high) if step > 0 else None
    if isinstance(op, nn.BroadcastOp | nn.ReshapeOp):
        src = op.operands[0].type
        assert isinstance(src, TensorType)
        at = _source_axis(op, src.get_shape(), shape, axis)
        return None if at == -1 else _positions(op.operands[0], at)
    if isinstance(op, nn.AddOp):
        a, b = _positions(op.lhs, axis), _positions(op.rhs, axis)
        if a is None or b is None:
            return None
        low, high = a[1] + b[1], a[2] + b[2]
        if low < _I64[0] or high > _I64[1]:
            return None
        return (_RISING if _RISING in (a[0], b[0]) else _FLAT), low, high
    return None


def _source_axis(
    op: Operation, src: Sequence[int], dst: Sequence[int], axis: int | None
) -> int | None:
    """The axis of a broadcast's or unit reshape's input that `axis` of its result
    reads (None: along no axis, as a broadcast along `axis`); -1 when the reshape moves
    elements between non-unit dims (then no position is known)."""
    if axis is None:
        return None
    if isinstance(op, nn.BroadcastOp):  # trailing dims align
        at = axis - (len(dst) - len(src))
        return at if at >= 0 and src[at] == dst[axis] else None
    kept_src = [d for d, n in enumerate(src) if n != 1]
    kept_dst = [d for d, n in enumerate(dst) if n != 1]
    if [src[d] for d in kept_src] != [dst[d] for d in kept_dst]:
        return -1
    return kept_src[kept_dst.index(axis)]


def _reads(v: SSAValue, target: SSAValue, limit: int = 64) -> bool:
    """Whether `v` is computed from `target` (or the walk passes `limit` ops: then
    assumed so)."""
    seen: set[int] = set()
    todo = [v]
    while todo:
        x = todo.pop()
        if x is target:
            return True
        op = x.owner
        if not isinstance(op, Operation) or id(op) in seen:
            continue
        seen.add(id(op))
        if len(seen) > limit:
            return True
        todo.extend(op.operands)
    return False


def match_pair(second: nn.ReductionOp) -> StatisticsPair | None:
    """The pair whose level-1 reduction is `second`, or None."""
    x = second.operands[0]
    if isinstance(second, nn.ReduceMinOp):
        return _extreme_index(second)
    exp = _owner(x, nn.ExpOp)
    if isinstance(second, nn.SumOp) and exp is not None:
        dev = _deviation(exp.operands[0])
        if dev is not None and isinstance(dev[0], nn.ReduceMaxOp) and dev[1] is None:
            return StatisticsPair(SOFTMAX, dev[0], second)
    mul = _owner(x, nn.MulOp)
    if isinstance(second, nn.SumOp | nn.MeanOp) and mul is not None:
        d, e = mul.operands
        dev = _deviation(d) if d is e else None
        if dev is not None and isinstance(dev[0], nn.MeanOp):
            rt = dev[0].results[0].type
            if isinstance(rt, TensorType) and isinstance(rt.element_type, Float32Type):
                return StatisticsPair(VARIANCE, dev[0], second, dev[1])
    return None


def computes_variance(ops: Sequence[Operation]) -> bool:
    """Whether `ops` (a fusion group's) compute a normalization's mean and variance:
    both reductions of a variance pair."""
    members = set(ops)
    for op in ops:
        pair = match_pair(op) if isinstance(op, nn.ReductionOp) else None
        if pair is not None and pair.kind == VARIANCE and pair.first in members:
            return True
    return False


def softmax_exponentials(ops: Sequence[Operation]) -> set[nn.ExpOp]:
    """The f32 `exp(a - broadcast(reduce_max(a)))` of `ops` whose every use is the sum
    of a softmax pair among `ops`: exponentials that are only added up, never stored.

    The tiler computes these as `exp2((a - max) * log2(e))` on targets that ask for it
    (`exp2_sums`; Triton's `exp2` is one hardware ex2, `exp` libm's polynomial, several
    times the instructions). The product's rounding moves a term's base-2 exponent by up
    to |a - max| * log2(e) * 2^-24, its value relatively by |a - max| * 2^-24 (largest
    for the smallest terms); with ex2's own couple of ulps, a sum weighted by its terms
    stays within a few times (1 + ln n) * 2^-24 of eager's for n terms. What a kernel
    stores (a softmax's probabilities) keeps `exp`."""
    members = set(ops)
    found: set[nn.ExpOp] = set()
    for op in ops:
        if not isinstance(op, nn.ExpOp):
            continue
        t = op.results[0].type
        if not isinstance(t, TensorType) or not isinstance(t.element_type, Float32Type):
            continue
        uses = list(op.results[0].uses)
        if uses and all(_is_softmax_sum(u.operation, members) for u in uses):
            found.add(op)
    return found


def _is_softmax_sum(op: Operation, members: set[Operation]) -> bool:
    if not isinstance(op, nn.SumOp) or op not in members:
        return False
    pair = match_pair(op)
    return pair is not None and pair.kind == SOFTMAX and pair.first in members
