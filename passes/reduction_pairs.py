"""Two-level row statistics recognized in nn IR: a softmax's max and sum of
exponentials, and a normalization's mean and variance.

Both are a level-0 reduction of `a` and a level-1 reduction of a value computed from
`a` and the level-0 result:

- softmax, `sum(exp(a - broadcast(reduce_max(a))))`;
- variance, `mean|sum((a - broadcast(m))^2)` in f32, where `m` is `mean(a)` or
  nn-decompose's `row_mean` (the row's value where `reduce_min(a) == reduce_max(a)`,
  else `mean(a)`).

The tiler runs such a pair in one pass over a long row (`convert_nn_to_tile/online.py`);
nn-split-reductions splits a pair over few long rows into chunk statistics and their
combination (`split_statistics.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import Float32Type, TensorType
from xdsl.ir import Operation, SSAValue

from fuseopt.dialects import nn

SOFTMAX, VARIANCE = "softmax", "variance"
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
class StatisticsPair:
    """A level-0 reduction and the level-1 reduction that reads its result."""

    kind: str
    first: nn.ReductionOp
    """reduce_max (softmax) or mean (variance) of `a`."""
    second: nn.ReductionOp
    """The sum of exponentials, or the mean/sum of squared deviations."""
    bounds: MeanBounds | None = None
    """For a variance around a `row_mean`: its min and max."""

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


def match_pair(second: nn.ReductionOp) -> StatisticsPair | None:
    """The pair whose level-1 reduction is `second`, or None."""
    x = second.operands[0]
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
