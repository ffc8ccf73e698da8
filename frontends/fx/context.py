"""The op table and the per-node import context its converters work with.

Converters are small functions, one per ATen op, registered with `@register(aten.X)`:

    @register(aten.exp.default)
    def exp(ctx: ImportContext, node: Node) -> SSAValue:
        return ctx.elementwise(nn.ExpOp, node.args[0])

`ImportContext` hides the bookkeeping: it maps FX nodes to SSA values, reads result
types from the node's `meta["val"]`, inserts the explicit `nn.broadcast`, `nn.cast` and
`nn.constant` ops nn needs (nn has no implicit broadcasting or promotion), and stamps
every op it emits with the FX node's source location.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes
from torch.fx import Node
from xdsl.dialects.builtin import (
    BFloat16Type,
    FileLineColLoc,
    Float16Type,
    IntAttr,
    StringAttr,
    TensorType,
    f32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from fuseopt.dialects import nn
from fuseopt.dialects.dtypes import UnsupportedTypeError, element_type, torch_dtype
from fuseopt.dialects.syntax import is_bool, is_float
from fuseopt.frontends.fx.errors import UnsupportedOpError, node_location
from fuseopt.frontends.fx.types import tensor_type

Imported = SSAValue | tuple[SSAValue | None, ...] | None
"""What a converter returns: one value, a tuple for multi-output ops, or None."""

Converter = Callable[["ImportContext", Node], Imported]
"""A converter: emits nn ops for one FX node through the context."""

OP_TABLE: dict[object, Converter] = {}
"""ATen op overload (or Python callable such as `operator.getitem`) -> converter."""


def register(*targets: object) -> Callable[[Converter], Converter]:
    """Decorator registering a converter for each of `targets` in OP_TABLE."""

    def wrap(fn: Converter) -> Converter:
        for target in targets:
            if target in OP_TABLE:
                raise ValueError(f"{target} is registered twice")
            OP_TABLE[target] = fn
        return fn

    return wrap


Scalar = int | float | bool


class ImportContext:
    """Emits the nn ops of one FX node into `block`, given the values of earlier nodes."""

    def __init__(self, block: Block, env: dict[Node, Imported], node: Node):
        self.block = block
        self.env = env
        self.node = node
        where = node_location(node)
        self.location = (
            FileLineColLoc(StringAttr(where.file), IntAttr(where.line), IntAttr(where.column))
            if where
            else None
        )

    # ------------------------------------------------------------------ basics

    def fail(self, reason: str) -> UnsupportedOpError:
        """An UnsupportedOpError for the current node (raise it)."""
        return UnsupportedOpError(self.node, reason)

    def emit(self, op: Operation) -> SSAValue:
        """Append `op` (located at the node's source line) and return its first result."""
        if self.location is not None:
            op.location = self.location
        self.block.add_op(op)
        return op.results[0]

    def value(self, arg: Any) -> SSAValue:
        """The SSA value of an FX node argument (a tensor)."""
        if not isinstance(arg, Node):
            raise self.fail(f"expected a tensor argument, got {arg!r}")
        v = self.env.get(arg)
        if not isinstance(v, SSAValue):
            raise self.fail(f"argument '{arg.name}' is not a tensor value")
        return v

    def val(self, arg: Any) -> Any:
        """The example value (`meta['val']`) of a node, or `arg` itself for literals."""
        return arg.meta.get("val") if isinstance(arg, Node) else arg

    def out_val(self, index: int | None = None) -> torch.Tensor:
        """The node's example result (one element of a tuple result with `index`)."""
        v = self.node.meta.get("val")
        if index is not None:
            v = v[index] if isinstance(v, list | tuple) else None
        if not isinstance(v, torch.Tensor):
            raise self.fail("the node has no tensor example value (meta['val'])")
        return v

    def out_type(self, index: int | None = None) -> TensorType:
        """The nn tensor type of the node's result."""
        return self.type_of(self.out_val(index))

    def type_of(self, value: torch.Tensor) -> TensorType:
        """The nn type of a tensor, or an UnsupportedOpError naming the node."""
        try:
            return tensor_type(value)
        except UnsupportedTypeError as e:
            raise self.fail(str(e)) from None

    def element(self, dtype: torch.dtype) -> Attribute:
        """The nn element type of `dtype`, or an UnsupportedOpError."""
        try:
            return element_type(dtype)
        except UnsupportedTypeError as e:
            raise self.fail(str(e)) from None

    # ------------------------------------------------------------------ coercions

    def cast(self, x: SSAValue, element: Attribute) -> SSAValue:
        """`x` converted to `element` (nothing emitted when it already is)."""
        t = _tensor(x)
        if t.element_type == element:
            return x
        return self.emit(nn.CastOp(x, TensorType(element, t.get_shape())))

    def broadcast(self, x: SSAValue, shape: Sequence[int]) -> SSAValue:
        """`x` broadcast (NumPy rules) to `shape` (nothing emitted when it has it)."""
        t = _tensor(x)
        if tuple(t.get_shape()) == tuple(shape):
            return x
        if not nn.broadcastable(t.get_shape(), shape):
            raise self.fail(f"cannot broadcast {t} to shape {list(shape)}")
        return self.emit(nn.BroadcastOp(x, TensorType(t.element_type, shape)))

    def reshape(self, x: SSAValue, shape: Sequence[int]) -> SSAValue:
        """`x` reshaped to `shape` (nothing emitted when it has it)."""
        t = _tensor(x)
        if tuple(t.get_shape()) == tuple(shape):
            return x
        return self.emit(nn.ReshapeOp(x, TensorType(t.element_type, shape)))

    def constant(self, value: Scalar, element: Attribute, shape: Sequence[int] = ()) -> SSAValue:
        """A splat constant of `element` type and `shape`."""
        if is_float(element):
            value = float(value)
        elif is_bool(element):
            value = bool(value)
        else:
            if isinstance(value, float) and not value.is_integer():
                raise self.fail(f"scalar {value} does not fit an integer tensor")
            value = int(value)
        return self.emit(nn.ConstantOp(value, TensorType(element, tuple(shape))))

    def operand(self, arg: Any, element: Attribute, shape: Sequence[int]) -> SSAValue:
        """A node or Python scalar as a tensor of `element` type broadcast to `shape`."""
        if isinstance(arg, bool | int | float):
            return self.constant(arg, element, shape)
        return self.broadcast(self.cast(self.value(arg), element), shape)

    def compute_element(self, args: Sequence[Any], result: torch.dtype) -> Attribute:
        """The element type an elementwise op computes in, as PyTorch's CPU kernels do.

        That is the result dtype, except that f16/bf16 ops with a scalar operand (a
        Python number or a 0-d tensor of another dtype) compute in f32 ("opmath"),
        so the scalar is not rounded to 16 bits first.
        """
        element = self.element(result)
        if self.opmath_element(result) == element:
            return element
        for a in args:
            v = self.val(a)
            if isinstance(a, float) and float(torch.tensor(a, dtype=result)) != a:
                return f32
            if isinstance(v, torch.Tensor) and v.dim() == 0 and v.dtype != result:
                return f32
        return element

    def opmath_element(self, result: torch.dtype) -> Attribute:
        """The element type PyTorch's kernels compute an op of dtype `result` in
        ("opmath"): f32 for f16 and bf16, the dtype itself otherwise.

        A formula of several ops (softplus, mish, elu) computes in it and rounds once,
        so its intermediates neither overflow 16 bits (exp(12) > f16's 65504) nor lose
        precision that eager keeps."""
        element = self.element(result)
        return f32 if isinstance(element, Float16Type | BFloat16Type) else element

    def elementwise(
        self,
        op: Callable[..., Operation],
        *args: Any,
        compute: Attribute | None = None,
        index: int | None = None,
    ) -> SSAValue:
        """Emit `op(*operands)` with operands cast to the compute type and broadcast to
        the result shape, then cast to the node's result dtype."""
        out = self.out_val(index)
        result = self.element(out.dtype)
        compute = compute or self.compute_element(args, out.dtype)
        shape = self.type_of(out).get_shape()
        operands = [self.operand(a, compute, shape) for a in args]
        return self.cast(self.emit(op(*operands)), result)

    def promoted(self, *args: Any) -> torch.dtype:
        """PyTorch's promoted dtype for an elementwise op on `args` (nodes or scalars)."""
        probes: list[Any] = []
        for a in args:
            v = self.val(a)
            if isinstance(v, torch.Tensor):
                probes.append(torch.empty((1,) * v.dim(), dtype=v.dtype, device="meta"))
            elif isinstance(v, bool | int | float):
                probes.append(v)
            else:
                raise self.fail(f"unexpected argument {a!r}")
        return elementwise_dtypes(
            *probes, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT
        )[1]

    # ------------------------------------------------------------------ arguments

    def arg(self, index: int, name: str, default: Any = None) -> Any:
        """Argument `index` of the node (positional, else keyword `name`, else default)."""
        if index < len(self.node.args):
            return self.node.args[index]
        return self.node.kwargs.get(name, default)

    def int_list(self, arg: Any, what: str) -> list[int]:
        """A list of Python ints (an int is a list of one), or an UnsupportedOpError."""
        values = [arg] if isinstance(arg, int) else arg
        if not isinstance(values, list | tuple) or not all(isinstance(v, int) for v in values):
            raise self.fail(f"{what} must be static integers, got {arg!r}")
        return [int(v) for v in values]

    def axes(self, arg: Any, rank: int) -> list[int]:
        """Reduction dims as sorted non-negative axes (None or [] means all dims)."""
        if arg is None or arg == []:
            return list(range(rank))
        dims = self.int_list(arg, "dims")
        return sorted({self.axis(d, max(rank, 1)) for d in dims})

    def axis(self, dim: int, rank: int) -> int:
        """`dim` normalized into [0, rank)."""
        if not -rank <= dim < rank:
            raise self.fail(f"dim {dim} is out of range for rank {rank}")
        return dim % rank


def _tensor(x: SSAValue) -> TensorType:
    assert isinstance(x.type, TensorType), x.type
    return x.type


def result_dtype(value: SSAValue) -> torch.dtype:
    """The PyTorch dtype of an nn value."""
    return torch_dtype(_tensor(value).element_type)
