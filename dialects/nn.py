"""The `nn` dialect: fuseopt's high-level tensor dialect.

Ops have value semantics on builtin ranked tensors of f32, f16, bf16, i1 or i64.
Elementwise operands have equal shapes (the frontend inserts explicit `nn.broadcast`).
Composite ops (softmax, norms, linear) are expanded into primitives by `nn-decompose`.
`nn.fusion` holds a group of ops that becomes one kernel.

Every op has a custom syntax shown in its docstring (declared as an IRDL assembly format,
except `nn.constant`'s typed literal), a verifier, and round-trips through the generic
form. Numerical semantics live in `fuseopt.interpreter` (the reference).
"""

from __future__ import annotations

import math
import struct
from abc import ABC
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    BFloat16Type,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    UnitAttr,
    f32,
    f64,
    i64,
)
from xdsl.ir import Attribute, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    attr_def,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_attr_def,
    opt_operand_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.pattern_rewriter import RewritePattern
from xdsl.printer import Printer
from xdsl.traits import (
    HasCanonicalizationPatternsTrait,
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    Pure,
)
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from fuseopt.dialects.syntax import (
    BareIdentifier,
    FourOperandTypes,
    IntList,
    ResultTypes,
    SharedType,
    SharedTypeOp,
    SliceSpec,
    ThreeOperandTypes,
    array_values,
    int_array,
    is_bool,
    is_float,
    parse_tensor_type,
    shape_str,
    tensor_type,
)

ELEMENT_TYPES = "f32, f16, bf16, i1, i64"

SIZE_HINT_ATTR = "nn.size_hint"
"""The module attribute (an integer) of nn IR that is a function of dynamic size fixed
at a size hint to be lowered (passes/generalize_sizes.py): a size that is a multiple of
the hint stands for the dynamic size, and a schedule that can computes what depends on
it at run time (the attention schedule's key length) instead of from the hint."""


def check_element_type(t: TensorType, what: str) -> None:
    """Reject tensors whose element type nn does not support."""
    e = t.element_type
    ok = isinstance(e, Float32Type | Float16Type | BFloat16Type) or (
        isinstance(e, IntegerType) and e.width.data in (1, 64)
    )
    if not ok:
        raise VerifyException(f"{what} has element type {e}; nn supports {ELEMENT_TYPES}")


def check_same_type(a: Attribute, b: Attribute, what: str) -> None:
    """Raise unless `a` and `b` are the same type."""
    if a != b:
        raise VerifyException(f"{what} must have the same type, got {a} and {b}")


def normalized_axis(axis: int, rank: int, what: str = "axis") -> int:
    """`axis` in [0, rank), or a VerifyException."""
    if not 0 <= axis < rank:
        raise VerifyException(f"{what} {axis} is out of range for rank {rank}")
    return axis


class NNCanonicalization(HasCanonicalizationPatternsTrait):
    """Gives each nn op the canonicalization patterns registered for its class."""

    def get_patterns(self, op: type[Operation]) -> tuple[RewritePattern, ...]:
        from fuseopt.passes.nn_canonicalization_patterns import patterns_for

        return patterns_for(op)

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return ()


# --------------------------------------------------------------------------- elementwise


class UnaryElementwiseOp(SharedTypeOp, IRDLOperation, ABC):
    """Base of `%r = nn.<op> %x : tensor<...>`: one operand, result of the same type."""

    FLOAT_ONLY: ClassVar[bool] = True

    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = lazy_traits_def(lambda: (Pure(), NNCanonicalization()))
    custom_directives = (SharedType,)
    assembly_format = "$input attr-dict `:` custom<SharedType>(type(operands), type(results))"

    def __init__(self, input: SSAValue, attributes: dict[str, Attribute] | None = None):
        super().__init__(operands=[input], result_types=[input.type], attributes=attributes)

    def verify_(self) -> None:
        t = tensor_type(self.input, "operand")
        check_element_type(t, "operand")
        check_same_type(self.input.type, self.result.type, "operand and result")
        if self.FLOAT_ONLY and not is_float(t.element_type):
            raise VerifyException(f"needs a floating-point tensor, got {t}")


@irdl_op_definition
class NegOp(UnaryElementwiseOp):
    """Negation, `-x`. Example: `%r = nn.neg %x : tensor<4xf32>`."""

    name = "nn.neg"
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class AbsOp(UnaryElementwiseOp):
    """Absolute value. Example: `%r = nn.abs %x : tensor<4xf32>`."""

    name = "nn.abs"
    FLOAT_ONLY: ClassVar[bool] = False


@irdl_op_definition
class ExpOp(UnaryElementwiseOp):
    """Natural exponential. Example: `%r = nn.exp %x : tensor<4xf32>`."""

    name = "nn.exp"


@irdl_op_definition
class Exp2Op(UnaryElementwiseOp):
    """Base-2 exponential, 2**x. Example: `%r = nn.exp2 %x : tensor<4xf32>`."""

    name = "nn.exp2"


@irdl_op_definition
class LogOp(UnaryElementwiseOp):
    """Natural logarithm. Example: `%r = nn.log %x : tensor<4xf32>`."""

    name = "nn.log"


@irdl_op_definition
class Log1pOp(UnaryElementwiseOp):
    """log(1 + x), accurate where 1 + x rounds. Example: `%r = nn.log1p %x : tensor<4xf32>`."""

    name = "nn.log1p"


@irdl_op_definition
class SqrtOp(UnaryElementwiseOp):
    """Square root. Example: `%r = nn.sqrt %x : tensor<4xf32>`."""

    name = "nn.sqrt"


@irdl_op_definition
class RsqrtOp(UnaryElementwiseOp):
    """Reciprocal square root, `1/sqrt(x)`. Example: `%r = nn.rsqrt %x : tensor<4xf32>`."""

    name = "nn.rsqrt"


@irdl_op_definition
class ReciprocalOp(UnaryElementwiseOp):
    """Reciprocal, `1/x`. Example: `%r = nn.reciprocal %x : tensor<4xf32>`."""

    name = "nn.reciprocal"


@irdl_op_definition
class TanhOp(UnaryElementwiseOp):
    """Hyperbolic tangent. Example: `%r = nn.tanh %x : tensor<4xf32>`."""

    name = "nn.tanh"


@irdl_op_definition
class SigmoidOp(UnaryElementwiseOp):
    """Logistic sigmoid, `1/(1+exp(-x))`. Example: `%r = nn.sigmoid %x : tensor<4xf32>`."""

    name = "nn.sigmoid"


@irdl_op_definition
class ReluOp(UnaryElementwiseOp):
    """Rectified linear unit, `max(x, 0)`. Example: `%r = nn.relu %x : tensor<4xf32>`."""

    name = "nn.relu"
    FLOAT_ONLY: ClassVar[bool] = False


GELU_APPROXIMATIONS = ("none", "tanh")


@irdl_op_definition
class GeluOp(UnaryElementwiseOp):
    """Gaussian error linear unit, exact (erf) or with the tanh approximation.

    Example:
        %r = nn.gelu %x : tensor<4xf32>
        %t = nn.gelu %x {approximate = "tanh"} : tensor<4xf32>
    """

    name = "nn.gelu"
    approximate = opt_attr_def(StringAttr)

    @property
    def approximation(self) -> str:
        """`"none"` (erf form) or `"tanh"`."""
        return "none" if self.approximate is None else self.approximate.data

    def verify_(self) -> None:
        super().verify_()
        if self.approximation not in GELU_APPROXIMATIONS:
            raise VerifyException(
                f"approximate must be one of {GELU_APPROXIMATIONS}, got '{self.approximation}'"
            )


@irdl_op_definition
class SiluOp(UnaryElementwiseOp):
    """Sigmoid linear unit, `x * sigmoid(x)`. Example: `%r = nn.silu %x : tensor<4xf32>`."""

    name = "nn.silu"


@irdl_op_definition
class ErfOp(UnaryElementwiseOp):
    """Gauss error function. Example: `%r = nn.erf %x : tensor<4xf32>`."""

    name = "nn.erf"


@irdl_op_definition
class SinOp(UnaryElementwiseOp):
    """Sine. Example: `%r = nn.sin %x : tensor<4xf32>`."""

    name = "nn.sin"


@irdl_op_definition
class CosOp(UnaryElementwiseOp):
    """Cosine. Example: `%r = nn.cos %x : tensor<4xf32>`."""

    name = "nn.cos"


@irdl_op_definition
class FloorOp(UnaryElementwiseOp):
    """Round down to an integer value. Example: `%r = nn.floor %x : tensor<4xf32>`."""

    name = "nn.floor"


@irdl_op_definition
class CeilOp(UnaryElementwiseOp):
    """Round up to an integer value. Example: `%r = nn.ceil %x : tensor<4xf32>`."""

    name = "nn.ceil"


@irdl_op_definition
class TruncOp(UnaryElementwiseOp):
    """Round toward zero to an integer value (-0.5 gives -0.0). Example:
    `%r = nn.trunc %x : tensor<4xf32>`."""

    name = "nn.trunc"


class BinaryElementwiseOp(SharedTypeOp, IRDLOperation, ABC):
    """Base of `%r = nn.<op> %a, %b : tensor<...>`: operands and result of one type."""

    FLOAT_ONLY: ClassVar[bool] = False

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = lazy_traits_def(lambda: (Pure(), NNCanonicalization()))
    custom_directives = (SharedType,)
    assembly_format = (
        "$lhs `,` $rhs attr-dict `:` custom<SharedType>(type(operands), type(results))"
    )

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        super().__init__(operands=[lhs, rhs], result_types=[lhs.type])

    def verify_(self) -> None:
        t = tensor_type(self.lhs, "lhs")
        check_element_type(t, "lhs")
        check_same_type(self.lhs.type, self.rhs.type, "operands")
        check_same_type(self.lhs.type, self.result.type, "operands and result")
        if self.FLOAT_ONLY and not is_float(t.element_type):
            raise VerifyException(f"needs floating-point tensors, got {t}")
        if is_bool(t.element_type):
            raise VerifyException("is not defined on i1 tensors")


@irdl_op_definition
class AddOp(BinaryElementwiseOp):
    """Addition. Example: `%r = nn.add %a, %b : tensor<4xf32>`."""

    name = "nn.add"


@irdl_op_definition
class SubOp(BinaryElementwiseOp):
    """Subtraction, `a - b`. Example: `%r = nn.sub %a, %b : tensor<4xf32>`."""

    name = "nn.sub"


@irdl_op_definition
class MulOp(BinaryElementwiseOp):
    """Multiplication. Example: `%r = nn.mul %a, %b : tensor<4xf32>`."""

    name = "nn.mul"


@irdl_op_definition
class DivOp(BinaryElementwiseOp):
    """True division, `a / b`. Example: `%r = nn.div %a, %b : tensor<4xf32>`."""

    name = "nn.div"
    FLOAT_ONLY: ClassVar[bool] = True


@irdl_op_definition
class MaxOp(BinaryElementwiseOp):
    """Elementwise maximum (NaN-propagating). Example: `%r = nn.max %a, %b : tensor<4xf32>`."""

    name = "nn.max"


@irdl_op_definition
class MinOp(BinaryElementwiseOp):
    """Elementwise minimum (NaN-propagating). Example: `%r = nn.min %a, %b : tensor<4xf32>`."""

    name = "nn.min"


@irdl_op_definition
class PowOp(BinaryElementwiseOp):
    """Power, `a ** b`. Example: `%r = nn.pow %a, %b : tensor<4xf32>`."""

    name = "nn.pow"
    FLOAT_ONLY: ClassVar[bool] = True


@irdl_op_definition
class FloorDivOp(BinaryElementwiseOp):
    """Division rounded down, PyTorch's `floor_divide` (Python's `//`). Integers: the
    quotient rounded toward negative infinity. Floats: floor(a / b) computed as PyTorch
    does, exact for quotients below 2**22: q = (a - fmod(a, b)) / b, less 1 where the
    remainder and b differ in sign, rounded to the nearest integer; a zero quotient
    takes the sign of a / b, b = 0 gives a / b (inf or NaN), an infinite a NaN, and a
    finite a over an infinite b is 0 or -1 (-1 where their signs differ). Example:
    `%r = nn.floor_div %a, %b : tensor<4xf32>`."""

    name = "nn.floor_div"


@irdl_op_definition
class TruncDivOp(BinaryElementwiseOp):
    """Division rounded toward zero, PyTorch's `div(rounding_mode="trunc")`. Integers:
    C's `/`. Floats: trunc of a / b rounded to f32, as eager (and Python's
    `int(a / b)`) computes it: 1.0 over 0.1 gives 10, though the exact quotient is just
    below it. For 16-bit floats the quotient is rounded to 16 bits before it is
    truncated, as eager's kernels do (1 / 0.1 in bf16 is 10 though the f32 quotient is
    9.99...). Eager's CUDA kernel divides by a Python-number divisor as a product with
    its reciprocal, which can land on the other side of an integer (4.5 / 0.3 gives 15
    there, 14 on the CPU and here). Example: `%r = nn.trunc_div %a, %b : tensor<4xf32>`."""

    name = "nn.trunc_div"


@irdl_op_definition
class RemainderOp(BinaryElementwiseOp):
    """Remainder with the sign of the divisor, PyTorch's `remainder` (Python's `%`):
    r = fmod(a, b), plus b where r is non-zero and its sign differs from b's. Example:
    `%r = nn.remainder %a, %b : tensor<4xf32>`."""

    name = "nn.remainder"


@irdl_op_definition
class FmodOp(BinaryElementwiseOp):
    """Remainder with the sign of the dividend, C's `fmod` and integer `%` (PyTorch's
    `fmod`): a - trunc(a / b) * b, exact. Example: `%r = nn.fmod %a, %b : tensor<4xf32>`."""

    name = "nn.fmod"


COMPARE_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")


@irdl_op_definition
class CompareOp(SharedTypeOp, IRDLOperation):
    """Elementwise comparison; the result is an i1 tensor of the operands' shape.

    Predicates: eq, ne, lt, le, gt, ge.

    Example:
        %m = nn.compare lt, %a, %b : tensor<4x8xf32>
    """

    name = "nn.compare"
    predicate = attr_def(StringAttr)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = lazy_traits_def(lambda: (Pure(), NNCanonicalization()))
    custom_directives = (BareIdentifier, SharedType)
    assembly_format = (
        "custom<BareIdentifier>($predicate) `,` $lhs `,` $rhs attr-dict `:` "
        "custom<SharedType>(type(operands), type(results))"
    )

    def __init__(self, predicate: str, lhs: SSAValue, rhs: SSAValue):
        t = tensor_type(lhs, "lhs")
        super().__init__(
            operands=[lhs, rhs],
            result_types=[TensorType(IntegerType(1), t.get_shape())],
            attributes={"predicate": StringAttr(predicate)},
        )

    def verify_(self) -> None:
        if self.predicate.data not in COMPARE_PREDICATES:
            raise VerifyException(
                f"unknown predicate '{self.predicate.data}'; expected one of "
                + ", ".join(COMPARE_PREDICATES)
            )
        t = tensor_type(self.lhs, "lhs")
        check_element_type(t, "lhs")
        check_same_type(self.lhs.type, self.rhs.type, "operands")
        r = tensor_type(self.result, "result")
        if not is_bool(r.element_type) or r.get_shape() != t.get_shape():
            raise VerifyException(f"result must be tensor<{shape_str(t.get_shape())}xi1>, got {r}")

    @classmethod
    def types_from_shared(
        cls, shared: TensorType, operands: int
    ) -> tuple[list[Attribute], list[Attribute]]:
        return [shared] * operands, [TensorType(IntegerType(1), shared.get_shape())]

    def shared_type(self) -> Attribute:
        return self.lhs.type


@irdl_op_definition
class SelectOp(SharedTypeOp, IRDLOperation):
    """Elementwise choice: `cond ? a : b`, with an i1 condition of the same shape.

    Example:
        %r = nn.select %m, %a, %b : tensor<4x8xf32>
    """

    name = "nn.select"
    condition = operand_def(TensorType)
    true_value = operand_def(TensorType)
    false_value = operand_def(TensorType)
    result = result_def(TensorType)
    traits = lazy_traits_def(lambda: (Pure(), NNCanonicalization()))
    custom_directives = (SharedType,)
    assembly_format = (
        "$condition `,` $true_value `,` $false_value attr-dict `:` "
        "custom<SharedType>(type(operands), type(results))"
    )

    def __init__(self, condition: SSAValue, true_value: SSAValue, false_value: SSAValue):
        super().__init__(
            operands=[condition, true_value, false_value], result_types=[true_value.type]
        )

    def verify_(self) -> None:
        t = tensor_type(self.true_value, "true value")
        check_element_type(t, "true value")
        check_same_type(self.true_value.type, self.false_value.type, "true and false values")
        check_same_type(self.true_value.type, self.result.type, "values and result")
        c = tensor_type(self.condition, "condition")
        if not is_bool(c.element_type) or c.get_shape() != t.get_shape():
            raise VerifyException(
                f"condition must be tensor<{shape_str(t.get_shape())}xi1>, got {c}"
            )

    @classmethod
    def types_from_shared(
        cls, shared: TensorType, operands: int
    ) -> tuple[list[Attribute], list[Attribute]]:
        condition = TensorType(IntegerType(1), shared.get_shape())
        return [condition] + [shared] * (operands - 1), [shared]

    def shared_type(self) -> Attribute:
        return self.result.type


class ConversionOp(IRDLOperation, ABC):
    """Base of `%r = nn.<op> %x ... : tensor<A> -> tensor<B>` (one operand, one result).

    Subclasses with syntax between the operand and the types declare their own
    assembly format.
    """

    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = lazy_traits_def(lambda: (Pure(), NNCanonicalization()))
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(
        self,
        input: SSAValue,
        result_type: Attribute,
        attributes: dict[str, Attribute] | None = None,
    ):
        super().__init__(operands=[input], result_types=[result_type], attributes=attributes)

    def verify_types(self) -> tuple[TensorType, TensorType]:
        """Check both types are supported tensors and return them."""
        a, r = tensor_type(self.input, "operand"), tensor_type(self.result, "result")
        check_element_type(a, "operand")
        check_element_type(r, "result")
        return a, r


@irdl_op_definition
class CastOp(ConversionOp):
    """Element-type conversion (round to nearest even; float to int truncates).

    Example:
        %r = nn.cast %x : tensor<4x8xbf16> -> tensor<4x8xf32>
    """

    name = "nn.cast"

    def verify_(self) -> None:
        a, r = self.verify_types()
        if a.get_shape() != r.get_shape():
            raise VerifyException(f"must keep the shape: {a} -> {r}")


# --------------------------------------------------------------------------- reductions


class ReductionOp(ConversionOp, ABC):
    """Base of reductions over `axes`, keeping reduced dims as size 1 with `keepdim`.

    Syntax: `%r = nn.<op> %x [axes] (keepdim)? : tensor<A> -> tensor<B>`.
    """

    FLOAT_ONLY: ClassVar[bool] = False
    axes = attr_def(DenseArrayBase)
    keepdim = opt_attr_def(UnitAttr)
    custom_directives = (IntList,)
    assembly_format = (
        "$input custom<IntList>($axes) (`keepdim` $keepdim^)? attr-dict `:` "
        "type($input) `->` type($result)"
    )

    def __init__(self, input: SSAValue, axes: Sequence[int], keepdim: bool = False):
        t = tensor_type(input, "operand")
        shape = reduced_shape(t.get_shape(), axes, keepdim)
        attrs: dict[str, Attribute] = {"axes": int_array(sorted(axes))}
        if keepdim:
            attrs["keepdim"] = UnitAttr()
        super().__init__(input, TensorType(t.element_type, shape), attrs)

    @property
    def axis_list(self) -> tuple[int, ...]:
        """The reduced axes."""
        return array_values(self.axes)

    def verify_(self) -> None:
        a, r = self.verify_types()
        if a.element_type != r.element_type:
            raise VerifyException(f"must keep the element type: {a} -> {r}")
        if self.FLOAT_ONLY and not is_float(a.element_type):
            raise VerifyException(f"needs a floating-point tensor, got {a}")
        if is_bool(a.element_type):
            raise VerifyException("is not defined on i1 tensors")
        axes = self.axis_list
        if len(set(axes)) != len(axes):
            raise VerifyException(f"axes {list(axes)} repeat an axis")
        for axis in axes:
            normalized_axis(axis, len(a.get_shape()))
        want = reduced_shape(a.get_shape(), axes, self.keepdim is not None)
        if r.get_shape() != want:
            raise VerifyException(f"result shape must be {shape_str(want)}, got {r}")


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keepdim: bool) -> tuple[int, ...]:
    """The shape left after reducing `axes` of `shape`."""
    if keepdim:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


@irdl_op_definition
class SumOp(ReductionOp):
    """Sum over axes (accumulated in at least f32 precision).

    Example:
        %r = nn.sum %x [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
    """

    name = "nn.sum"


@irdl_op_definition
class ReduceMaxOp(ReductionOp):
    """Maximum over axes.

    Example:
        %r = nn.reduce_max %x [1] : tensor<4x8xf32> -> tensor<4xf32>
    """

    name = "nn.reduce_max"


@irdl_op_definition
class ReduceMinOp(ReductionOp):
    """Minimum over axes.

    Example:
        %r = nn.reduce_min %x [0] : tensor<4x8xf32> -> tensor<8xf32>
    """

    name = "nn.reduce_min"


@irdl_op_definition
class MeanOp(ReductionOp):
    """Arithmetic mean over axes (accumulated in at least f32 precision).

    Example:
        %r = nn.mean %x [1] keepdim : tensor<4x8xbf16> -> tensor<4x1xbf16>
    """

    name = "nn.mean"
    FLOAT_ONLY: ClassVar[bool] = True


# --------------------------------------------------------------------------- shape ops


@irdl_op_definition
class ReshapeOp(ConversionOp):
    """Reinterpret the elements (row-major) under a new shape of the same size.

    Example:
        %r = nn.reshape %x : tensor<4x8xf32> -> tensor<2x16xf32>
    """

    name = "nn.reshape"

    def verify_(self) -> None:
        a, r = self.verify_types()
        if a.element_type != r.element_type:
            raise VerifyException(f"must keep the element type: {a} -> {r}")
        if math.prod(a.get_shape()) != math.prod(r.get_shape()):
            raise VerifyException(f"must keep the number of elements: {a} -> {r}")


@irdl_op_definition
class TransposeOp(ConversionOp):
    """Permute dimensions: result dim i is operand dim `permutation[i]`.

    Example:
        %r = nn.transpose %x [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
    """

    name = "nn.transpose"
    permutation = attr_def(DenseArrayBase)
    custom_directives = (IntList,)
    assembly_format = (
        "$input custom<IntList>($permutation) attr-dict `:` type($input) `->` type($result)"
    )

    @property
    def perm(self) -> tuple[int, ...]:
        """The permutation as ints."""
        return array_values(self.permutation)

    def verify_(self) -> None:
        a, r = self.verify_types()
        perm = self.perm
        if sorted(perm) != list(range(len(a.get_shape()))):
            raise VerifyException(f"{list(perm)} is not a permutation of rank {len(a.get_shape())}")
        want = tuple(a.get_shape()[p] for p in perm)
        if r.get_shape() != want or r.element_type != a.element_type:
            raise VerifyException(
                f"result must be tensor<{shape_str(want)}x{a.element_type}>, got {r}"
            )


@irdl_op_definition
class CumsumOp(ConversionOp):
    """Inclusive prefix sum along `axis`: `result[..., i, ...]` is the sum of the input's
    elements 0..i on that axis (torch.cumsum). Result and input have one type (the
    frontend casts first: PyTorch sums bools and integers as i64); floats accumulate
    in f32 or wider and round each result once. Never fused: a kernel of its own.

    Example:
        %r = nn.cumsum %x axis 1 : tensor<4x8xi64> -> tensor<4x8xi64>
    """

    name = "nn.cumsum"
    axis = attr_def(IntegerAttr[I64])
    assembly_format = "$input `axis` $axis attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, axis: int):
        super().__init__(input, input.type, {"axis": IntegerAttr(axis, i64)})

    @property
    def axis_value(self) -> int:
        """The summed axis, in [0, rank)."""
        return self.axis.value.data

    def verify_(self) -> None:
        a, r = self.verify_types()
        normalized_axis(self.axis_value, max(1, len(a.get_shape())))
        if is_bool(a.element_type):
            raise VerifyException(f"cumsum of i1 is not defined; cast to i64 first: {a}")
        check_same_type(a, r, "operand and result")


@irdl_op_definition
class SliceOp(ConversionOp):
    """Strided slice: along each dim, elements start, start+step, ... below limit.

    Syntax lists `start:limit` or `start:limit:step` per dimension.

    Example:
        %r = nn.slice %x [0:4, 2:8:2] : tensor<4x8xf32> -> tensor<4x3xf32>
    """

    name = "nn.slice"
    start = attr_def(DenseArrayBase)
    limit = attr_def(DenseArrayBase)
    step = attr_def(DenseArrayBase)
    custom_directives = (SliceSpec,)
    assembly_format = (
        "$input custom<SliceSpec>($start, $limit, $step) attr-dict `:` "
        "type($input) `->` type($result)"
    )

    @property
    def bounds(self) -> list[tuple[int, int, int]]:
        """(start, limit, step) per dimension."""
        return list(
            zip(
                array_values(self.start),
                array_values(self.limit),
                array_values(self.step),
                strict=True,
            )
        )

    def verify_(self) -> None:
        a, r = self.verify_types()
        shape = a.get_shape()
        bounds = self.bounds
        n = {len(array_values(x)) for x in (self.start, self.limit, self.step)}
        if n != {len(a.get_shape())}:
            raise VerifyException(f"slice needs one start:limit:step per dim of {a}")
        want = []
        for dim, (lo, hi, st) in zip(shape, bounds, strict=True):
            if st < 1 or not 0 <= lo <= hi <= dim:
                size = "?" if dim < 0 else dim
                raise VerifyException(f"slice {lo}:{hi}:{st} is invalid for a dim of size {size}")
            want.append(-(-(hi - lo) // st))
        if r.get_shape() != tuple(want) or r.element_type != a.element_type:
            raise VerifyException(
                f"result must be tensor<{shape_str(want)}x{a.element_type}>, got {r}"
            )


@irdl_op_definition
class BroadcastOp(ConversionOp):
    """NumPy-style broadcast: dims align from the right; size-1 dims and new leading
    dims expand.

    Example:
        %r = nn.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
    """

    name = "nn.broadcast"

    def verify_(self) -> None:
        a, r = self.verify_types()
        if a.element_type != r.element_type:
            raise VerifyException(f"must keep the element type: {a} -> {r}")
        if not broadcastable(a.get_shape(), r.get_shape()):
            raise VerifyException(f"cannot broadcast {a} to {r}")


def broadcastable(src: Sequence[int], dst: Sequence[int]) -> bool:
    """Whether `src` broadcasts to `dst` under NumPy's rules."""
    if len(src) > len(dst):
        return False
    tail = dst[len(dst) - len(src) :]
    return all(s in (1, d) for s, d in zip(src, tail, strict=True))


@irdl_op_definition
class ConcatOp(IRDLOperation):
    """Concatenate tensors along `axis`; other dims must match.

    Example:
        %r = nn.concat %a, %b axis 1 : tensor<4x2xf32>, tensor<4x3xf32> -> tensor<4x5xf32>
    """

    name = "nn.concat"
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    axis = attr_def(IntegerAttr[I64])
    traits = lazy_traits_def(lambda: (Pure(), NNCanonicalization()))
    assembly_format = "$inputs `axis` $axis attr-dict `:` type($inputs) `->` type($result)"

    def __init__(self, inputs: Sequence[SSAValue], axis: int):
        types = [tensor_type(x, "operand") for x in inputs]
        shape = list(types[0].get_shape())
        shape[axis] = sum(t.get_shape()[axis] for t in types)
        super().__init__(
            operands=[inputs],
            result_types=[TensorType(types[0].element_type, shape)],
            attributes={"axis": IntegerAttr(axis, i64)},
        )

    def verify_(self) -> None:
        if not self.inputs:
            raise VerifyException("needs at least one operand")
        types = [tensor_type(x, "operand") for x in self.inputs]
        first = types[0]
        check_element_type(first, "operand")
        axis = normalized_axis(self.axis.value.data, len(first.get_shape()))
        total = 0
        for t in types:
            if t.element_type != first.element_type or len(t.get_shape()) != len(first.get_shape()):
                raise VerifyException(f"operands must have one element type and rank: {t}")
            for i, (d, e) in enumerate(zip(t.get_shape(), first.get_shape(), strict=True)):
                if i != axis and d != e:
                    raise VerifyException(f"operand dims must match off the axis: {t}")
            total += t.get_shape()[axis]
        want = list(first.get_shape())
        want[axis] = total
        r = tensor_type(self.result, "result")
        if r.get_shape() != tuple(want) or r.element_type != first.element_type:
            raise VerifyException(
                f"result must be tensor<{shape_str(want)}x{first.element_type}>, got {r}"
            )


@irdl_op_definition
class TakeOp(IRDLOperation):
    """Gather by flat position: `result[i] = input.flatten()[index[i]]` (torch.take).

    The result has the index's shape and the input's element type; the index is i64
    and every entry must lie in [0, numel(input)) (the reference raises otherwise;
    kernels read 0 there and never touch memory outside the input). Embeddings,
    `index_select`, `gather` and advanced indexing become a take under index
    arithmetic (the frontend computes each element's flat position), so the gathered
    input is read where its consumer needs it: a fused kernel loads it by address
    (`tile.gather`) and the input must come from outside the kernel.

    Example:
        %r = nn.take %w, %pos : tensor<64x32xf32>, tensor<8x32xi64> -> tensor<8x32xf32>
    """

    name = "nn.take"
    input = operand_def(TensorType)
    index = operand_def(TensorType)
    result = result_def(TensorType)
    traits = lazy_traits_def(lambda: (Pure(), NNCanonicalization()))
    assembly_format = (
        "$input `,` $index attr-dict `:` type($input) `,` type($index) `->` type($result)"
    )

    def __init__(self, input: SSAValue, index: SSAValue):
        x, i = tensor_type(input, "input"), tensor_type(index, "index")
        super().__init__(
            operands=[input, index], result_types=[TensorType(x.element_type, i.get_shape())]
        )

    def verify_(self) -> None:
        x, i = tensor_type(self.input, "input"), tensor_type(self.index, "index")
        check_element_type(x, "input")
        if not (isinstance(i.element_type, IntegerType) and i.element_type.width.data == 64):
            raise VerifyException(f"index must be a tensor of i64, got {i}")
        if not math.prod(x.get_shape()) and math.prod(i.get_shape()):
            raise VerifyException(f"cannot take from an empty input {x}")
        r = tensor_type(self.result, "result")
        if r.get_shape() != i.get_shape() or r.element_type != x.element_type:
            raise VerifyException(
                f"result must be tensor<{shape_str(i.get_shape())}x{x.element_type}>, got {r}"
            )


# --------------------------------------------------------------------------- constant


EXACT_INTEGERS = {Float32Type: 1 << 24, Float16Type: 1 << 11, BFloat16Type: 1 << 8}
"""The largest integer magnitude each float type holds exactly (with every integer
below it)."""


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A constant tensor: a splat scalar, or dense elements.

    Float splats are stored as f64; a hexadecimal splat is an f64 bit pattern, which is
    how infinities and NaNs print (`0xFFF0000000000000` is -inf).

    Example:
        %c = nn.constant 1.0 : tensor<4x8xf32>
        %d = nn.constant dense<[1.0, 2.0]> : tensor<2xbf16>
    """

    name = "nn.constant"
    value = attr_def(FloatAttr | IntegerAttr | DenseIntOrFPElementsAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, value: float | int | bool | Attribute, result_type: TensorType):
        if isinstance(value, bool | int) and not is_float(result_type.element_type):
            attr: Attribute = IntegerAttr(int(value), result_type.element_type)
        elif isinstance(value, int | float):
            attr = FloatAttr(float(value), f64)
        else:
            attr = value
        super().__init__(result_types=[result_type], attributes={"value": attr})

    @property
    def splat_value(self) -> float | int | None:
        """The scalar every element equals, if the constant is a splat."""
        v = self.value
        if isinstance(v, FloatAttr):
            return v.value.data
        if isinstance(v, IntegerAttr):
            return v.value.data
        values = v.get_values()
        if values and all(x == values[0] for x in values):
            return values[0]
        return None

    @property
    def arange(self) -> tuple[int, int] | None:
        """(start, step) when the dense values are start, start + step, ... along the
        constant's one axis longer than 1 (an index vector, as `arange`, tril/triu and
        argmax make), integers exact in the element type; else None. Kernels compute
        such a constant from their tile indices instead of reading it."""
        v = self.value
        t = tensor_type(self.result, "result")
        shape = t.get_shape()
        if not isinstance(v, DenseIntOrFPElementsAttr) or sum(n > 1 for n in shape) != 1:
            return None
        if is_bool(t.element_type):
            return None
        values = v.get_values()
        if len(values) < 2 or not all(float(x).is_integer() for x in values):
            return None
        if is_float(t.element_type) and any(math.copysign(1.0, x) < 0 for x in values if x == 0):
            return None  # -0.0 is not an integer an iota can make
        start, step = int(values[0]), int(values[1]) - int(values[0])
        exact = EXACT_INTEGERS.get(type(t.element_type))
        if exact is not None and max(abs(int(x)) for x in values) > exact:
            return None
        if step == 0 or any(int(x) != start + i * step for i, x in enumerate(values)):
            return None
        return start, step

    def verify_(self) -> None:
        t = tensor_type(self.result, "result")
        check_element_type(t, "result")
        v = self.value
        if isinstance(v, DenseIntOrFPElementsAttr):
            if v.type != t:
                raise VerifyException(f"dense value has type {v.type}, result is {t}")
        elif isinstance(v, IntegerAttr) and is_float(t.element_type):
            raise VerifyException(f"an integer splat needs an integer tensor, got {t}")
        elif isinstance(v, FloatAttr) and not is_float(t.element_type):
            raise VerifyException(f"a float splat needs a floating-point tensor, got {t}")

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        if parser.parse_optional_keyword("dense") is not None:
            # re-parse the dense literal as a typed builtin attribute
            dense = parser.parse_dense_int_or_fp_elements_attr(None)
            attrs = parser.parse_optional_attr_dict()
            op = cls.build(result_types=[dense.type], attributes={"value": dense})
            op.attributes.update(attrs)
            return op
        pos = parser.pos
        hexadecimal = "0x" in parser.lexer.input.content[pos : pos + 3].lower()
        if (b := parser.parse_optional_boolean()) is not None:
            number: float | int = int(b)
        else:
            number = parser.parse_number()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parse_tensor_type(parser)
        if is_float(t.element_type):
            if hexadecimal and isinstance(number, int):  # an f64 bit pattern (inf, nan)
                number = struct.unpack("<d", struct.pack("<Q", number & (2**64 - 1)))[0]
            attr: Attribute = FloatAttr(float(number), f64)
        elif isinstance(number, float):
            parser.raise_error(f"a float splat needs a floating-point tensor, got {t}", pos)
        else:
            attr = IntegerAttr(int(number), t.element_type)
        op = cls.build(result_types=[t], attributes={"value": attr})
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        v = self.value
        if isinstance(v, DenseIntOrFPElementsAttr):
            printer.print_attribute(v)
            printer.print_op_attributes(self.attributes, reserved_attr_names=("value",))
            return
        if isinstance(v, FloatAttr):
            printer.print_float(v.value.data, f64)
        elif is_bool(v.type):
            printer.print_string("true" if v.value.data else "false")
        else:
            printer.print_int(v.value.data)
        printer.print_op_attributes(self.attributes, reserved_attr_names=("value",))
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)


# --------------------------------------------------------------------------- matmul


@irdl_op_definition
class MatmulOp(IRDLOperation):
    """Batched matrix product with optional transposes of the last two dims.

    `a` is [B..., M, K] (or [B..., K, M] with `transpose_a`); `b` is [B..., K, N]
    (or [B..., N, K] with `transpose_b`), or rank 2 and shared by every batch.
    The result is [B..., M, N] with a's element type, or f32 (the accumulator itself, for
    16-bit operands); accumulation is in f32.

    Example:
        %r = nn.matmul %a, %w transpose_b : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
    """

    name = "nn.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    transpose_a = opt_attr_def(UnitAttr)
    transpose_b = opt_attr_def(UnitAttr)
    traits = lazy_traits_def(lambda: (Pure(), NNCanonicalization()))
    assembly_format = (
        "$lhs `,` $rhs (`transpose_a` $transpose_a^)? (`transpose_b` $transpose_b^)? "
        "attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"
    )
    FLAGS: ClassVar[tuple[str, ...]] = ("transpose_a", "transpose_b")

    def __init__(
        self, lhs: SSAValue, rhs: SSAValue, transpose_a: bool = False, transpose_b: bool = False
    ):
        a, b = tensor_type(lhs, "lhs"), tensor_type(rhs, "rhs")
        shape = matmul_shape(a.get_shape(), b.get_shape(), transpose_a, transpose_b)
        attrs = {
            n: UnitAttr()
            for n, on in zip(self.FLAGS, (transpose_a, transpose_b), strict=True)
            if on
        }
        super().__init__(
            operands=[lhs, rhs],
            result_types=[TensorType(a.element_type, shape)],
            attributes=attrs,
        )

    def verify_(self) -> None:
        a, b = tensor_type(self.lhs, "lhs"), tensor_type(self.rhs, "rhs")
        r = tensor_type(self.result, "result")
        check_element_type(a, "lhs")
        if not is_float(a.element_type):
            raise VerifyException(f"needs floating-point operands, got {a}")
        wide_result = isinstance(r.element_type, Float32Type) and is_float(a.element_type)
        if a.element_type != b.element_type or (
            r.element_type != a.element_type and not wide_result
        ):
            raise VerifyException(
                f"operands and result must share an element type (or the result is f32): "
                f"{a}, {b}, {r}"
            )
        try:
            want = matmul_shape(
                a.get_shape(),
                b.get_shape(),
                self.transpose_a is not None,
                self.transpose_b is not None,
            )
        except ValueError as e:
            raise VerifyException(str(e)) from None
        if r.get_shape() != want:
            raise VerifyException(f"result shape must be {shape_str(want)}, got {r}")


def matmul_shape(
    a: Sequence[int], b: Sequence[int], transpose_a: bool, transpose_b: bool
) -> tuple[int, ...]:
    """The result shape of `nn.matmul`, or ValueError explaining the mismatch."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"nn.matmul operands need rank >= 2, got {list(a)} and {list(b)}")
    m, k = (a[-1], a[-2]) if transpose_a else (a[-2], a[-1])
    k2, n = (b[-1], b[-2]) if transpose_b else (b[-2], b[-1])
    if k != k2:
        raise ValueError(f"contraction dims differ: {k} and {k2}")
    if len(b) != 2 and tuple(b[:-2]) != tuple(a[:-2]):
        raise ValueError(
            f"batch dims must match (or rhs be rank 2): {list(a[:-2])} and {list(b[:-2])}"
        )
    return (*a[:-2], m, n)


# --------------------------------------------------------------------------- composites


class RowwiseOp(SharedTypeOp, IRDLOperation, ABC):
    """Base of `%r = nn.<op> %x axis N : tensor<...>`: a same-typed op along one axis."""

    input = operand_def(TensorType)
    result = result_def(TensorType)
    axis = attr_def(IntegerAttr[I64])
    traits = lazy_traits_def(lambda: (Pure(), NNCanonicalization()))
    custom_directives = (SharedType,)
    assembly_format = (
        "$input `axis` $axis attr-dict `:` custom<SharedType>(type(operands), type(results))"
    )

    def __init__(self, input: SSAValue, axis: int):
        super().__init__(
            operands=[input], result_types=[input.type], attributes={"axis": IntegerAttr(axis, i64)}
        )

    def verify_(self) -> None:
        t = tensor_type(self.input, "operand")
        check_element_type(t, "operand")
        check_same_type(self.input.type, self.result.type, "operand and result")
        if not is_float(t.element_type):
            raise VerifyException(f"needs a floating-point tensor, got {t}")
        normalized_axis(self.axis.value.data, len(t.get_shape()))


@irdl_op_definition
class SoftmaxOp(RowwiseOp):
    """Softmax along `axis` (a composite; `nn-decompose` subtracts the max first).

    Example:
        %r = nn.softmax %x axis 1 : tensor<4x8xf32>
    """

    name = "nn.softmax"


@irdl_op_definition
class LogSoftmaxOp(RowwiseOp):
    """Log-softmax along `axis` (a composite).

    Example:
        %r = nn.log_softmax %x axis 1 : tensor<4x8xf32>
    """

    name = "nn.log_softmax"


class NormOp(IRDLOperation, ABC):
    """Base of normalizations over the trailing `normalized_rank` dims (default 1),
    with optional affine `weight` (and `bias`) of that trailing shape.

    Syntax: `%r = nn.<op> %x (weight %w)? (bias %b)? {eps = ...} : <input type> -> <type>`.
    """

    input = operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)
    eps = attr_def(FloatAttr)
    normalized_rank = opt_attr_def(IntegerAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = lazy_traits_def(lambda: (Pure(), NNCanonicalization()))
    custom_directives = (ThreeOperandTypes,)
    assembly_format = (
        "$input (`weight` $weight^)? (`bias` $bias^)? attr-dict `:` "
        "custom<ThreeOperandTypes>(type($input), type($weight), type($bias)) "
        "`->` type($result)"
    )
    HAS_BIAS: ClassVar[bool] = True

    def __init__(
        self,
        input: SSAValue,
        weight: SSAValue | None,
        bias: SSAValue | None,
        eps: float,
        normalized_rank: int = 1,
    ):
        attrs: dict[str, Attribute] = {"eps": FloatAttr(eps, f64)}
        if normalized_rank != 1:
            attrs["normalized_rank"] = IntegerAttr(normalized_rank, i64)
        super().__init__(
            operands=[input, [weight] if weight else [], [bias] if bias else []],
            result_types=[input.type],
            attributes=attrs,
        )

    @property
    def norm_rank(self) -> int:
        """How many trailing dims are normalized."""
        return 1 if self.normalized_rank is None else self.normalized_rank.value.data

    def verify_(self) -> None:
        t = tensor_type(self.input, "input")
        check_element_type(t, "input")
        check_same_type(self.input.type, self.result.type, "input and result")
        if not is_float(t.element_type):
            raise VerifyException(f"needs a floating-point tensor, got {t}")
        k = self.norm_rank
        if not 1 <= k <= len(t.get_shape()):
            raise VerifyException(f"normalized_rank {k} is out of range for {t}")
        if self.bias is not None and not self.HAS_BIAS:
            raise VerifyException("takes no bias")
        trailing = t.get_shape()[len(t.get_shape()) - k :]
        for name, v in (("weight", self.weight), ("bias", self.bias)):
            if v is None:
                continue
            vt = tensor_type(v, name)
            if vt.get_shape() != trailing or vt.element_type != t.element_type:
                raise VerifyException(
                    f"{name} must be tensor<{shape_str(trailing)}x{t.element_type}>, got {vt}"
                )
        if self.eps.value.data < 0:
            raise VerifyException("eps must be non-negative")


@irdl_op_definition
class RmsNormOp(NormOp):
    """RMS normalization: `x * rsqrt(mean(x^2) + eps) * weight` over the trailing dims.

    Example:
        %r = nn.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<2x8xbf16>, tensor<8xbf16> -> tensor<2x8xbf16>
    """

    name = "nn.rms_norm"
    HAS_BIAS: ClassVar[bool] = False


@irdl_op_definition
class LayerNormOp(NormOp):
    """Layer normalization: `(x - mean) * rsqrt(var + eps) * weight + bias` over the
    trailing dims (biased variance, as PyTorch).

    Example:
        %r = nn.layer_norm %x weight %w bias %b {eps = 1.0e-05 : f64} : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x8xf32>
    """

    name = "nn.layer_norm"


@irdl_op_definition
class LinearOp(IRDLOperation):
    """`x @ weight^T + bias`, as `torch.nn.functional.linear`: x is [..., in], weight
    [out, in], bias [out].

    Example:
        %r = nn.linear %x, %w, %b : tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<4x16xf32>
    """

    name = "nn.linear"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)
    traits = lazy_traits_def(lambda: (Pure(), NNCanonicalization()))
    assembly_format = "operands attr-dict `:` type(operands) `->` type($result)"

    def __init__(self, input: SSAValue, weight: SSAValue, bias: SSAValue | None = None):
        x, w = tensor_type(input, "input"), tensor_type(weight, "weight")
        shape = (*x.get_shape()[:-1], w.get_shape()[0])
        super().__init__(
            operands=[input, weight, [bias] if bias else []],
            result_types=[TensorType(x.element_type, shape)],
        )

    def verify_(self) -> None:
        x, w = tensor_type(self.input, "input"), tensor_type(self.weight, "weight")
        check_element_type(x, "input")
        if not is_float(x.element_type) or w.element_type != x.element_type:
            raise VerifyException(f"needs floating-point operands of one type: {x}, {w}")
        in_features = x.get_shape()[-1] if x.get_shape() else None
        if len(w.get_shape()) != 2 or w.get_shape()[1] != in_features:
            raise VerifyException(f"weight must be [out, {x.get_shape()[-1]}], got {w}")
        out = w.get_shape()[0]
        if self.bias is not None:
            b = tensor_type(self.bias, "bias")
            if b.get_shape() != (out,) or b.element_type != x.element_type:
                raise VerifyException(f"bias must be tensor<{out}x{x.element_type}>, got {b}")
        want = TensorType(x.element_type, (*x.get_shape()[:-1], out))
        check_same_type(self.result.type, want, "result and expected")


@irdl_op_definition
class AttentionOp(IRDLOperation):
    """Scaled dot-product attention, `softmax(q @ k^T * scale + mask) @ v` per (batch,
    head), as `torch.nn.functional.scaled_dot_product_attention` in eval mode.

    `query` is [B, Hq, L, E], `key` [B, Hkv, S, E], `value` [B, Hkv, S, Ev], one
    floating-point type; Hq is a multiple of Hkv (grouped-query attention: query head h
    reads key/value head h // (Hq / Hkv), never repeated in memory). The result is
    [B, Hq, L, Ev] of that type. `causal` keeps key j for query i when j <= i (top-left
    aligned, PyTorch's `is_causal`). The optional `mask` has rank 4 and each dim 1 or the
    full size of [B, Hq, L, S]: i1 keeps the keys where it is true, a float mask (the
    query's type or f32) is added to the scores. Scores, the softmax and the products
    accumulate in f32; a query row with no key kept yields zeros (PyTorch's
    `_safe_softmax`), not NaN.

    Example:
        %o = nn.attention %q, %k, %v causal {scale = 0.125 : f64} : tensor<1x8x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16> -> tensor<1x8x128x64xbf16>
    """

    name = "nn.attention"
    query = operand_def(TensorType)
    key = operand_def(TensorType)
    value = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    result = result_def(TensorType)
    scale = attr_def(FloatAttr)
    causal = opt_attr_def(UnitAttr)
    traits = lazy_traits_def(lambda: (Pure(), NNCanonicalization()))
    custom_directives = (FourOperandTypes,)
    assembly_format = (
        "$query `,` $key `,` $value (`mask` $mask^)? (`causal` $causal^)? attr-dict `:` "
        "custom<FourOperandTypes>(type($query), type($key), type($value), type($mask)) "
        "`->` type($result)"
    )

    def __init__(
        self,
        query: SSAValue,
        key: SSAValue,
        value: SSAValue,
        mask: SSAValue | None,
        scale: float,
        causal: bool = False,
    ):
        q, v = tensor_type(query, "query"), tensor_type(value, "value")
        shape = (*q.get_shape()[:-1], v.get_shape()[-1]) if v.get_shape() else q.get_shape()
        attrs: dict[str, Attribute] = {"scale": FloatAttr(scale, f64)}
        if causal:
            attrs["causal"] = UnitAttr()
        super().__init__(
            operands=[query, key, value, [mask] if mask is not None else []],
            result_types=[TensorType(q.element_type, shape)],
            attributes=attrs,
        )

    @property
    def is_causal(self) -> bool:
        """Whether key j is kept for query i only when j <= i."""
        return self.causal is not None

    @property
    def scale_value(self) -> float:
        """The factor applied to q @ k^T."""
        return self.scale.value.data

    def verify_(self) -> None:
        q = tensor_type(self.query, "query")
        k, v = tensor_type(self.key, "key"), tensor_type(self.value, "value")
        r = tensor_type(self.result, "result")
        if not is_float(q.element_type) or not (q.element_type == k.element_type == v.element_type):
            raise VerifyException(
                f"query, key and value need one floating-point type: {q}, {k}, {v}"
            )
        if not (len(q.get_shape()) == len(k.get_shape()) == len(v.get_shape()) == 4):
            raise VerifyException(
                f"query, key and value must be rank 4 [batch, heads, seq, dim]: {q}, {k}, {v}"
            )
        b, hq, lq, e = q.get_shape()
        bk, hk, s, ek = k.get_shape()
        bv, hv, sv, ev = v.get_shape()
        if (bk, bv) != (b, b) or ek != e or (hv, sv) != (hk, s):
            raise VerifyException(
                f"key must be [{b}, H, S, {e}] and value [{b}, H, S, Ev] with the key's H "
                f"and S: {k}, {v}"
            )
        if hk == 0 or hq % hk:
            raise VerifyException(f"{hq} query heads are not a multiple of {hk} key/value heads")
        check_same_type(r, TensorType(q.element_type, (b, hq, lq, ev)), "result and expected")
        if self.mask is not None:
            m = tensor_type(self.mask, "mask")
            full = (b, hq, lq, s)
            if len(m.get_shape()) != 4 or any(
                d not in (1, f) for d, f in zip(m.get_shape(), full, strict=True)
            ):
                raise VerifyException(
                    f"mask must be rank 4 with each dim 1 or that of {shape_str(full)}, got {m}"
                )
            if not (is_bool(m.element_type) or m.element_type in (q.element_type, f32)):
                raise VerifyException(
                    f"mask must be i1 (keep where true) or {q.element_type} / f32 (added), got {m}"
                )
        if not math.isfinite(self.scale_value):
            raise VerifyException(f"scale must be finite, got {self.scale_value}")


# --------------------------------------------------------------------------- fusion


@irdl_op_definition
class TorchCallOp(IRDLOperation):
    """A PyTorch op fuseopt does not lower, kept as a call: `target` names the ATen op,
    `call` its arguments (JSON with single quotes, tensors as operand references: see
    `fuseopt.dialects.torch_call`). A fusion barrier: nn-fuse never groups it; the
    backends and the reference interpreter run it with PyTorch. `fuseopt.export` writes
    one for every op without an nn lowering, so any model exports.

    Example:
        %s = nn.torch_call "aten.flip.default"(%x) {call = "{'args':[{'operand':0},[1]],'kwargs':{}}"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    """

    name = "nn.torch_call"
    target = attr_def(StringAttr)
    call = attr_def(StringAttr)
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    assembly_format = "$target `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs)"

    def __init__(
        self, target: str, call: str, inputs: Sequence[SSAValue], result_types: Sequence[Attribute]
    ):
        super().__init__(
            operands=[inputs],
            result_types=[result_types],
            attributes={"target": StringAttr(target), "call": StringAttr(call)},
        )

    def verify_(self) -> None:
        from fuseopt.dialects import torch_call

        try:
            torch_call.check(self.target.data, self.call.data, len(self.inputs))
        except ValueError as e:
            raise VerifyException(str(e)) from None
        for v in (*self.inputs, *self.outputs):
            check_element_type(tensor_type(v, "a value"), "a value")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Terminator of `nn.fusion`: the values the group returns.

    Example:
        nn.yield %r, %s : tensor<4x8xf32>, tensor<4xf32>
    """

    name = "nn.yield"
    values = var_operand_def()
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(FusionOp), Pure()))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue):
        super().__init__(operands=[values])


class FusionKind(StrEnum):
    """The iteration space of a fusion group (nn-fuse's `kind` attribute)."""

    POINTWISE = "pointwise"
    REDUCTION = "reduction"
    MATMUL = "matmul"


class Route(StrEnum):
    """How a fusion group is lowered (nn-fuse's `route` attribute, from its cost model):
    a generated kernel, a library GEMM with its epilogue, or its ops one at a time."""

    KERNEL = "kernel"
    LIBRARY_GEMM = "library_gemm"
    UNFUSED = "unfused"


@irdl_op_definition
class FusionOp(IRDLOperation):
    """A fusion group: ops that become one kernel, intermediates kept on chip.

    The region is isolated from above: its block arguments stand for the `ins` operands,
    and `nn.yield` returns the group's results. Attributes (a name, a route chosen by
    the cost model, ...) follow `attributes`.

    Example:
        %r = nn.fusion ins(%x, %b : tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
        ^bb0(%a: tensor<4x8xf32>, %c: tensor<4x8xf32>):
          %s = nn.add %a, %c : tensor<4x8xf32>
          %e = nn.exp %s : tensor<4x8xf32>
          nn.yield %e : tensor<4x8xf32>
        }
    """

    name = "nn.fusion"
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    # set by nn-fuse
    kind = opt_attr_def(StringAttr)
    route = opt_attr_def(StringAttr)
    kernel_name = opt_attr_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove())
    custom_directives = (ResultTypes,)
    assembly_format = (
        "`ins` `(` ($inputs^ `:` type($inputs))? `)` `->` custom<ResultTypes>(type($outputs)) "
        "attr-dict-with-keyword $body"
    )

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        body: Region,
        attributes: dict[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[inputs], result_types=[result_types], regions=[body], attributes=attributes
        )

    @property
    def route_kind(self) -> Route:
        """How the group is lowered: its `route`; a group nn-fuse did not route (written
        by hand) is a generated kernel, the only lowering every group has."""
        return Route.KERNEL if self.route is None else Route(self.route.data)

    def verify_(self) -> None:
        for name, values in (("kind", FusionKind), ("route", Route)):
            attr = getattr(self, name)
            if attr is not None and attr.data not in values.__members__.values():
                known = ", ".join(f'"{v.value}"' for v in values)
                raise VerifyException(f"{name} must be one of {known}, got {attr}")
        block = self.body.block
        arg_types = [a.type for a in block.args]
        in_types = [v.type for v in self.inputs]
        if arg_types != in_types:
            raise VerifyException(
                "block arguments must match the ins operands: "
                f"({', '.join(map(str, arg_types))}) vs ({', '.join(map(str, in_types))})"
            )
        term = block.last_op
        if not isinstance(term, YieldOp):
            raise VerifyException("body must end in nn.yield")
        yielded = [v.type for v in term.values]
        out = [r.type for r in self.outputs]
        if yielded != out:
            raise VerifyException(
                f"nn.yield types ({', '.join(map(str, yielded))}) differ from results "
                f"({', '.join(map(str, out))})"
            )


NN = Dialect(
    "nn",
    [
        NegOp,
        AbsOp,
        ExpOp,
        Exp2Op,
        LogOp,
        Log1pOp,
        SqrtOp,
        RsqrtOp,
        ReciprocalOp,
        TanhOp,
        SigmoidOp,
        ReluOp,
        GeluOp,
        SiluOp,
        ErfOp,
        SinOp,
        CosOp,
        FloorOp,
        CeilOp,
        TruncOp,
        AddOp,
        SubOp,
        MulOp,
        DivOp,
        MaxOp,
        MinOp,
        PowOp,
        FloorDivOp,
        TruncDivOp,
        RemainderOp,
        FmodOp,
        CompareOp,
        SelectOp,
        CastOp,
        SumOp,
        ReduceMaxOp,
        ReduceMinOp,
        MeanOp,
        MatmulOp,
        ConstantOp,
        ReshapeOp,
        TransposeOp,
        SliceOp,
        ConcatOp,
        TakeOp,
        CumsumOp,
        BroadcastOp,
        SoftmaxOp,
        LogSoftmaxOp,
        RmsNormOp,
        LayerNormOp,
        LinearOp,
        AttentionOp,
        TorchCallOp,
        FusionOp,
        YieldOp,
    ],
    [],
)
"""The nn dialect object registered with xDSL contexts."""

UNARY_OPS: tuple[type[UnaryElementwiseOp], ...] = tuple(
    op for op in NN.operations if issubclass(op, UnaryElementwiseOp)
)
BINARY_OPS: tuple[type[BinaryElementwiseOp], ...] = tuple(
    op for op in NN.operations if issubclass(op, BinaryElementwiseOp)
)
REDUCTION_OPS: tuple[type[ReductionOp], ...] = tuple(
    op for op in NN.operations if issubclass(op, ReductionOp)
)
COMPOSITE_OPS = (SoftmaxOp, LogSoftmaxOp, RmsNormOp, LayerNormOp, LinearOp)
"""Ops that `nn-decompose` expands into primitives."""

ELEMENTWISE_OPS: tuple[type[IRDLOperation], ...] = (
    UnaryElementwiseOp,
    BinaryElementwiseOp,
    CompareOp,
    SelectOp,
    CastOp,
)
"""Ops applied element by element (operands and result of one shape): what fusion
groups chain, and the nn ops a tiled kernel applies to tiles of any shape."""
