"""Small parse/print helpers shared by fuseopt's dialects.

xDSL's declarative assembly format cannot express a few of the forms fuseopt uses
(integer lists such as `[0, 1]`, slice specs such as `[0:4:2]`, splat constants), so
ops with those forms write `parse`/`print` by hand on top of these helpers.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

FLOAT_ELEMENT_TYPES = (Float32Type, Float16Type, BFloat16Type, Float64Type)
"""Element types that count as floating point."""


def is_float(element_type: Attribute) -> bool:
    """True for a floating-point element type (f16, bf16, f32, f64)."""
    return isinstance(element_type, FLOAT_ELEMENT_TYPES)


def is_bool(element_type: Attribute) -> bool:
    """True for the i1 element type."""
    return isinstance(element_type, IntegerType) and element_type.width.data == 1


def int_array(values: Sequence[int]) -> DenseArrayBase:
    """An `array<i64: ...>` attribute holding `values`."""
    return DenseArrayBase.from_list(i64, list(values))


def array_values(attr: Attribute) -> tuple[int, ...]:
    """The integers of an `array<i64: ...>` attribute."""
    if not isinstance(attr, DenseArrayBase):
        raise VerifyException(f"expected an array<i64> attribute, got {attr}")
    return tuple(int(v) for v in attr.get_values())


I64_RANGE = (-(2**63), 2**63 - 1)
"""The smallest and largest i64 values."""


def parse_i64(parser: Parser) -> int:
    """Parse an integer literal that fits i64 (a located parse error otherwise)."""
    start = parser.pos
    value = parser.parse_integer()
    if not I64_RANGE[0] <= value <= I64_RANGE[1]:
        parser.raise_error(f"integer {value} does not fit i64", start, parser.pos)
    return value


def parse_int_list(parser: Parser) -> list[int]:
    """Parse `[i, j, ...]` (possibly empty) of i64 literals into a list of Python ints."""
    return parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, lambda: parse_i64(parser))


def print_int_list(printer: Printer, values: Sequence[int]) -> None:
    """Print `[i, j, ...]`."""
    printer.print_string("[" + ", ".join(str(v) for v in values) + "]")


def parse_operands(parser: Parser) -> list[UnresolvedOperand]:
    """Parse a comma-separated list of operand uses (at least one), to be resolved
    against their types with `resolve_operands` once the types are parsed."""
    return parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_unresolved_operand)


def resolve_operands(
    parser: Parser, operands: Sequence[UnresolvedOperand], types: Sequence[Attribute]
) -> list[SSAValue]:
    """Give each parsed operand its type (a located error if counts or types differ).

    A count mismatch is reported at the operands, so the error points at the op and
    not at whatever follows its types."""
    if len(operands) != len(types):
        message = f"{len(operands)} operands but {len(types)} types"
        if operands:
            parser.raise_error(message, operands[0].span.start, operands[-1].span.end)
        parser.raise_error(message)
    return [parser.resolve_operand(o, t) for o, t in zip(operands, types, strict=True)]


def print_operands(printer: Printer, operands: Sequence[SSAValue]) -> None:
    """Print operands separated by `, `."""
    printer.print_list(operands, printer.print_operand)


def parse_types(parser: Parser) -> list[Attribute]:
    """Parse a comma-separated list of types (at least one)."""
    return parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type)


def print_types(printer: Printer, types: Sequence[Attribute]) -> None:
    """Print types separated by `, `."""
    printer.print_list(types, printer.print_attribute)


def parse_tensor_type(parser: Parser) -> TensorType:
    """Parse a type, requiring a ranked tensor (a located parse error otherwise)."""
    start = parser.pos
    t = parser.parse_type()
    if not isinstance(t, TensorType):
        parser.raise_error(f"expected a ranked tensor type, got {t}", start, parser.pos)
    return t


def parse_tensor_types(parser: Parser) -> list[TensorType]:
    """Parse a comma-separated list of ranked tensor types (at least one)."""
    return parser.parse_comma_separated_list(
        Parser.Delimiter.NONE, lambda: parse_tensor_type(parser)
    )


def tensor_type(value: SSAValue | Attribute, what: str) -> TensorType:
    """The ranked tensor type of `value`, or a VerifyException naming `what`."""
    t = value.type if isinstance(value, SSAValue) else value
    if not isinstance(t, TensorType):
        raise VerifyException(f"{what} must be a ranked tensor, got {t}")
    return t


def shape_str(shape: Sequence[int]) -> str:
    """A shape as MLIR writes it: `4x8`, or `scalar` for rank 0."""
    return "x".join(str(d) for d in shape) if shape else "scalar"
