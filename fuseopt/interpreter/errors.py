"""The errors the reference interpreter raises (instead of NumPy's own)."""

from __future__ import annotations

from xdsl.ir import Operation

from fuseopt.diagnostics import op_location


def _located(op: Operation) -> str:
    """`file:line:col: ` of the op's source location ("" when it has none)."""
    where = op_location(op)
    return f"{where}: " if where is not None else ""


class InterpretError(ValueError):
    """Bad arguments to `interpret`: unknown function, wrong count, shape or type; or an
    op whose result is undefined on its inputs (`EmptyReductionError`)."""


class EmptyReductionError(InterpretError):
    """A max or min over an axis of size 0: no value to take, as torch.amax and
    torch.amin say (sum and mean of nothing are 0 and NaN)."""

    def __init__(self, op: Operation, axis: int):
        super().__init__(
            f"{_located(op)}'{op.name}' reduces axis {axis}, which has size 0: a max or min of no "
            "elements is undefined (torch.amax and torch.amin raise too)"
        )
        self.axis = axis


class IndexOutOfRangeError(InterpretError):
    """An `nn.take` position outside its input: PyTorch raises for an index out of
    range too (a device-side assert on the GPU)."""

    def __init__(self, op: Operation, position: int, numel: int):
        super().__init__(
            f"{_located(op)}'{op.name}' reads flat position {position} of an input of {numel} "
            "elements: an index is out of range (PyTorch raises too)"
        )
        self.position = position
