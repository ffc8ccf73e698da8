"""What the CUDA printer knows statically about a kernel's index scalars.

Each index value (a program id, an `scf.for` induction variable, `arith` arithmetic on
them, a constant) gets an `IndexFact`: the interval it lies in and a number it is a
multiple of, derived from its definition (interval arithmetic, gcds). The memory
printer (`memory.ChunkAccess`) uses them to drop bounds tests that hold for every
program and to test a vector's alignment once per buffer instead of once per chunk.

Program ids are bounded by the launch grid when every launch of the kernel has a
static grid; a value the analysis does not understand (a loop-carried scalar, a
dynamic size) is unbounded, a multiple of 1: every fact is sound, never guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import BlockArgument, Operation, SSAValue

from fuseopt.dialects import tile


@dataclass(frozen=True)
class IndexFact:
    """`low <= value <= high` (None: unbounded on that side), and the value is a
    multiple of `multiple` (0: the value is 0, a multiple of everything)."""

    low: int | None
    high: int | None
    multiple: int = 1

    def divisible_by(self, n: int) -> bool:
        """Whether the value is a multiple of `n` for every program."""
        return self.multiple % n == 0

    def fits(self, extent: int, n: int | str) -> bool:
        """Whether the value plus any coordinate below `extent` stays below `n` (a
        static size; a dynamic one, a C name, never fits) for every program."""
        return isinstance(n, int) and self.high is not None and self.high + extent <= n


UNKNOWN = IndexFact(None, None, 1)


def constant(c: int) -> IndexFact:
    """The fact of the constant `c`."""
    return IndexFact(c, c, abs(c))


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _neg(a: int | None) -> int | None:
    return None if a is None else -a


def _sum(a: IndexFact, b: IndexFact) -> IndexFact:
    return IndexFact(_add(a.low, b.low), _add(a.high, b.high), math.gcd(a.multiple, b.multiple))


def _difference(a: IndexFact, b: IndexFact) -> IndexFact:
    return IndexFact(
        _add(a.low, _neg(b.high)), _add(a.high, _neg(b.low)), math.gcd(a.multiple, b.multiple)
    )


def _product(a: IndexFact, b: IndexFact) -> IndexFact:
    multiple = a.multiple * b.multiple
    if None in (a.low, a.high, b.low, b.high):
        nonnegative = a.low is not None and b.low is not None and a.low >= 0 and b.low >= 0
        return IndexFact(0 if nonnegative else None, None, multiple)
    corners = [x * y for x in (a.low, a.high) for y in (b.low, b.high)]  # type: ignore[operator]
    return IndexFact(min(corners), max(corners), multiple)


def _quotient(a: IndexFact, c: int, floor: bool) -> IndexFact:
    """`a / c` for a positive constant `c` (C's truncation, or floor division): both
    are monotone in `a`."""

    def div(x: int | None) -> int | None:
        if x is None:
            return None
        return x // c if floor or x >= 0 else -(-x // c)

    multiple = a.multiple // c if a.multiple % c == 0 else 1
    return IndexFact(div(a.low), div(a.high), multiple)


def _remainder(a: IndexFact, c: int) -> IndexFact:
    """`a % c` for a positive constant `c` (C's sign of the dividend)."""
    multiple = math.gcd(a.multiple, c)
    if a.low is not None and a.low >= 0:
        high = c - 1 if a.high is None else min(a.high, c - 1)
        return IndexFact(0, high, multiple)
    return IndexFact(-(c - 1), c - 1, multiple)


def _extreme(a: IndexFact, b: IndexFact, pick) -> IndexFact:  # noqa: ANN001 - min or max
    def both(x: int | None, y: int | None, unbounded_wins: bool) -> int | None:
        if x is None or y is None:
            return None if unbounded_wins else (y if x is None else x)
        return pick(x, y)

    lows_min = pick is min
    return IndexFact(
        both(a.low, b.low, lows_min),
        both(a.high, b.high, not lows_min),
        math.gcd(a.multiple, b.multiple),
    )


class IndexFacts:
    """The facts of one kernel's index values, computed on demand and memoized.
    `grid` is the largest grid any launch of the kernel uses along each axis (None:
    program ids are unbounded above)."""

    def __init__(self, grid: tuple[int, ...] | None):
        self.grid = grid
        self._known: dict[SSAValue, IndexFact] = {}

    def of(self, v: SSAValue) -> IndexFact:
        """The fact of index value `v`."""
        got = self._known.get(v)
        if got is None:
            got = self._known[v] = self._derive(v)
        return got

    def _derive(self, v: SSAValue) -> IndexFact:
        if isinstance(v, BlockArgument):
            return self._block_argument(v)
        op = v.owner
        assert isinstance(op, Operation)
        if isinstance(op, arith.ConstantOp):
            value = op.value
            return constant(value.value.data) if isinstance(value, IntegerAttr) else UNKNOWN
        if isinstance(op, tile.ProgramIdOp):
            axis = op.axis.value.data
            if self.grid is None or axis >= len(self.grid):
                return IndexFact(0, None, 1)
            return IndexFact(0, self.grid[axis] - 1, 1)
        if isinstance(op, arith.IndexCastOp):
            return self.of(op.input)
        if len(op.operands) != 2:
            return UNKNOWN
        a, b = (self.of(x) for x in op.operands)
        return _binary(op, a, b)

    def _block_argument(self, v: BlockArgument) -> IndexFact:
        """An `scf.for` induction variable runs lb, lb + step, ... below ub."""
        loop = v.owner.parent_op()
        if v.index != 0 or not isinstance(loop, scf.ForOp):
            return UNKNOWN
        lb, ub, step = self.of(loop.lb), self.of(loop.ub), self.of(loop.step)
        if step.low is None or step.low <= 0 or lb.low is None:
            return IndexFact(lb.low if step.low and step.low > 0 else None, None, 1)
        high = None if ub.high is None else ub.high - 1
        if high is not None and lb.low == lb.high and step.low == step.high and high >= lb.low:
            high = lb.low + (high - lb.low) // step.low * step.low  # the last value taken
        return IndexFact(lb.low, high, math.gcd(lb.multiple, step.multiple))


def _positive_constant(f: IndexFact) -> int | None:
    if f.low is not None and f.low == f.high and f.low > 0:
        return f.low
    return None


def _binary(op: Operation, a: IndexFact, b: IndexFact) -> IndexFact:
    """The fact of a binary arith op's result from its operands' facts."""
    if isinstance(op, arith.AddiOp):
        return _sum(a, b)
    if isinstance(op, arith.SubiOp):
        return _difference(a, b)
    if isinstance(op, arith.MuliOp):
        return _product(a, b)
    if isinstance(op, arith.MinSIOp | arith.MinUIOp):
        return _extreme(a, b, min)
    if isinstance(op, arith.MaxSIOp | arith.MaxUIOp):
        return _extreme(a, b, max)
    c = _positive_constant(b)
    if c is None:
        return UNKNOWN
    if isinstance(op, arith.DivSIOp | arith.DivUIOp):
        return _quotient(a, c, floor=False)
    if isinstance(op, arith.FloorDivSIOp):
        return _quotient(a, c, floor=True)
    if isinstance(op, arith.RemSIOp | arith.RemUIOp):
        return _remainder(a, c)
    return UNKNOWN


__all__ = ["UNKNOWN", "IndexFact", "IndexFacts", "constant"]
