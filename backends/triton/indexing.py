"""Index arithmetic of tile kernels: what is known about each index, and masks.

Kernels compute offsets with `arith` on `index` (program ids split by `%` and `//`,
scaled by block sizes, loop induction variables). The printer folds constants and
tracks a value range per index, so a load or store whose box provably stays inside
its buffer along a dim needs no bounds check there (unmasked accesses vectorize
best), and a provably non-negative offset needs no lower-bound check.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith


@dataclass(frozen=True)
class IndexRange:
    """Known bounds of an index value: `lo <= v <= hi` (None: unknown)."""

    lo: int | None
    hi: int | None

    @staticmethod
    def exactly(value: int) -> IndexRange:
        """The range of a constant."""
        return IndexRange(value, value)

    @property
    def constant(self) -> int | None:
        """The value, when the range is a single point."""
        return self.lo if self.lo is not None and self.lo == self.hi else None

    @property
    def non_negative(self) -> bool:
        """Is the value provably >= 0?"""
        return self.lo is not None and self.lo >= 0


UNKNOWN = IndexRange(None, None)
"""Nothing is known."""


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def combine(
    op: arith.SignlessIntegerBinaryOperation | arith.MinSIOp | arith.MaxSIOp,
    a: IndexRange,
    b: IndexRange,
) -> IndexRange:
    """The range of `op` applied to operands of ranges `a` and `b`."""
    if isinstance(op, arith.AddiOp):
        return IndexRange(_add(a.lo, b.lo), _add(a.hi, b.hi))
    if isinstance(op, arith.SubiOp):
        neg = IndexRange(None if b.hi is None else -b.hi, None if b.lo is None else -b.lo)
        return IndexRange(_add(a.lo, neg.lo), _add(a.hi, neg.hi))
    if isinstance(op, arith.MuliOp):
        if a.non_negative and b.non_negative:
            hi = None if a.hi is None or b.hi is None else a.hi * b.hi
            return IndexRange(a.lo * b.lo, hi)  # type: ignore[operator]
        return UNKNOWN
    if isinstance(op, arith.DivSIOp | arith.DivUIOp | arith.FloorDivSIOp):
        c = b.constant
        if a.non_negative and c is not None and c > 0:
            return IndexRange(a.lo // c, None if a.hi is None else a.hi // c)  # type: ignore[operator]
        return UNKNOWN
    if isinstance(op, arith.CeilDivUIOp):
        c = b.constant
        if a.non_negative and c is not None and c > 0:
            return IndexRange(-(-a.lo // c), None if a.hi is None else -(-a.hi // c))  # type: ignore[operator]
        return UNKNOWN
    if isinstance(op, arith.RemSIOp | arith.RemUIOp):
        if a.non_negative and b.lo is not None and b.lo > 0:
            top = None if b.hi is None else b.hi - 1
            if a.hi is not None and (top is None or a.hi <= top) and b.constant is not None:
                return a
            return IndexRange(0, top)
        return UNKNOWN
    if isinstance(op, arith.MinSIOp):
        lo = None if a.lo is None or b.lo is None else min(a.lo, b.lo)
        his = [h for h in (a.hi, b.hi) if h is not None]
        return IndexRange(lo, min(his) if his else None)
    if isinstance(op, arith.MaxSIOp):
        los = [x for x in (a.lo, b.lo) if x is not None]
        hi = None if a.hi is None or b.hi is None else max(a.hi, b.hi)
        return IndexRange(max(los) if los else None, hi)
    return UNKNOWN


def loop_range(lower: int, upper: int, step: int) -> IndexRange:
    """The range of an `scf.for` induction variable with constant bounds."""
    if upper <= lower or step <= 0:
        return IndexRange(lower, lower)
    last = lower + (upper - 1 - lower) // step * step
    return IndexRange(lower, last)


INDEX_BINARY: dict[type, str] = {
    arith.AddiOp: "{0} + {1}",
    arith.SubiOp: "{0} - {1}",
    arith.MuliOp: "{0} * {1}",
    arith.DivSIOp: "{0} // {1}",
    arith.DivUIOp: "{0} // {1}",
    arith.FloorDivSIOp: "{0} // {1}",
    arith.CeilDivUIOp: "({0} + {1} - 1) // {1}",  # sizes and block counts: non-negative
    arith.RemSIOp: "{0} % {1}",
    arith.RemUIOp: "{0} % {1}",
    arith.MinSIOp: "tl.minimum({0}, {1})",
    arith.MaxSIOp: "tl.maximum({0}, {1})",
}
"""Index arithmetic as Python/Triton expressions."""


def fold(op: object, a: int, b: int) -> int | None:
    """Constant-fold an index op on known operands (None for a division by zero)."""
    if isinstance(op, arith.AddiOp):
        return a + b
    if isinstance(op, arith.SubiOp):
        return a - b
    if isinstance(op, arith.MuliOp):
        return a * b
    if b == 0:
        return None
    if isinstance(op, arith.DivSIOp | arith.DivUIOp):
        return _truncating_div(a, b)
    if isinstance(op, arith.FloorDivSIOp):
        return a // b
    if isinstance(op, arith.CeilDivUIOp):
        return -(-a // b)
    if isinstance(op, arith.RemSIOp | arith.RemUIOp):
        return a - b * _truncating_div(a, b)
    if isinstance(op, arith.MinSIOp):
        return min(a, b)
    if isinstance(op, arith.MaxSIOp):
        return max(a, b)
    return None


def _truncating_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def expand(name: str, axis: int, rank: int) -> str:
    """`name` (a 1-D index vector) placed along `axis` of a rank-`rank` tile."""
    if rank <= 1:
        return name
    return f"{name}[{', '.join(':' if i == axis else 'None' for i in range(rank))}]"


def strides(shape: tuple[int, ...] | list[int]) -> list[int]:
    """Row-major element strides of a contiguous buffer."""
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return out[::-1]
