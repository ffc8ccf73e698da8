"""The errors the reference interpreter raises (instead of NumPy's own)."""

from __future__ import annotations

from xdsl.ir import Operation

from fuseopt.diagnostics import op_location


class InterpretError(ValueError):
    """Bad arguments to `interpret`: unknown function, wrong count, shape or type; or an
    op whose result is undefined on its inputs (`EmptyReductionError`)."""


class EmptyReductionError(InterpretError):
    """A max or min over an axis of size 0: no value to take, as torch.amax and
    torch.amin say (sum and mean of nothing are 0 and NaN)."""

    def __init__(self, op: Operation, axis: int):
        where = op_location(op)
        at = f"{where}: " if where is not None else ""
        super().__init__(
            f"{at}'{op.name}' reduces axis {axis}, which has size 0: a max or min of no "
            "elements is undefined (torch.amax and torch.amin raise too)"
        )
        self.axis = axis
