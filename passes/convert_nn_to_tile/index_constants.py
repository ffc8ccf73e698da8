"""The index constants of one kernel being built: each value made once, all of them
hoisted to the kernel's entry when it is done (so loops and branches built later can
use them)."""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Block, SSAValue


class IndexConstants:
    """`constants(n)` is the kernel's `arith.constant n : index`; `hoist(entry)` puts
    every one made at the start of `entry`."""

    def __init__(self) -> None:
        self._values: dict[int, SSAValue] = {}
        self._ops: list[arith.ConstantOp] = []

    def __call__(self, n: int) -> SSAValue:
        """The constant `n` (made on first use, not yet in any block)."""
        if n not in self._values:
            op = arith.ConstantOp(IntegerAttr(n, IndexType()))
            self._ops.append(op)
            self._values[n] = op.result
        return self._values[n]

    def hoist(self, entry: Block) -> None:
        """Insert the constants made so far at the start of `entry`."""
        first = entry.first_op
        for op in self._ops:
            entry.insert_op_before(op, first)  # type: ignore[arg-type]
