"""A small helper for passes that expand one nn op into a sequence of new nn ops.

Patterns collect the ops they create in an `NNBuilder`, then hand `builder.ops` to
`rewriter.replace(op, builder.ops, [result])`. Each method returns the new op's result value.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import Float32Type, TensorType, f32
from xdsl.ir import Attribute, Operation, SSAValue

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import is_float


class NNBuilder:
    """Accumulates newly built nn ops, in order."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []

    def add(self, op: Operation) -> SSAValue:
        """Record `op` and return its first result."""
        self.ops.append(op)
        return op.results[0]

    def cast(self, x: SSAValue, element_type: Attribute) -> SSAValue:
        """`x` converted to `element_type` (no op when it already has it)."""
        t = _tensor(x)
        if t.element_type == element_type:
            return x
        return self.add(nn.CastOp(x, TensorType(element_type, t.get_shape())))

    def to_f32(self, x: SSAValue) -> SSAValue:
        """`x` widened to f32 if it is a narrower float (f16, bf16)."""
        t = _tensor(x)
        if is_float(t.element_type) and not isinstance(t.element_type, Float32Type):
            return self.cast(x, f32)
        return x

    def broadcast(self, x: SSAValue, like: SSAValue) -> SSAValue:
        """`x` broadcast to the shape of `like` (no op when shapes already match)."""
        t, target = _tensor(x), _tensor(like)
        if t.get_shape() == target.get_shape():
            return x
        return self.add(nn.BroadcastOp(x, TensorType(t.element_type, target.get_shape())))

    def reshape(self, x: SSAValue, shape: Sequence[int]) -> SSAValue:
        """`x` reshaped to `shape` (no op when it already has it)."""
        t = _tensor(x)
        if tuple(t.get_shape()) == tuple(shape):
            return x
        return self.add(nn.ReshapeOp(x, TensorType(t.element_type, list(shape))))

    def constant(self, value: float, like: SSAValue) -> SSAValue:
        """A splat constant with the type of `like`."""
        return self.add(nn.ConstantOp(value, _tensor(like)))

    def reduce(self, op_type: type[nn.ReductionOp], x: SSAValue, axes: Sequence[int]) -> SSAValue:
        """A keepdim reduction of `x` over `axes`."""
        return self.add(op_type(x, list(axes), keepdim=True))

    def binary(self, op_type: type[nn.BinaryElementwiseOp], a: SSAValue, b: SSAValue) -> SSAValue:
        """`op_type(a, b)` after broadcasting `b` to `a`'s shape."""
        return self.add(op_type(a, self.broadcast(b, a)))

    def unary(self, op_type: type[nn.UnaryElementwiseOp], x: SSAValue) -> SSAValue:
        """`op_type(x)`."""
        return self.add(op_type(x))


def _tensor(x: SSAValue) -> TensorType:
    assert isinstance(x.type, TensorType), x.type
    return x.type
