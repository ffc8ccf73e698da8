"""Parse/print helpers and assembly-format directives shared by fuseopt's dialects.

Ops declare their syntax with IRDL assembly formats. The forms the declarative format
has no directive for are small custom directives here, used inside the formats as
`custom<Name>(...)`:

- `IntList($attr)`: an `array<i64>` attribute written `[0, 1]`;
- `BareInteger($attr)`: an integer attribute written without its type (`axis 1`),
  parsed as i64;
- `BareIdentifier($attr)`: a string attribute written as a bare word (`lt`, `sum`);
- `IndexOperands($operands, type($operands))`: index operands written `[%i, %j]`;
- `MixedSizes($static, $dynamic, type($dynamic))`: sizes written `[%n, 320]`, each a
  number or an index operand: the numbers in an `array<i64>` attribute with
  `DYNAMIC_SIZE` where an operand stands, the operands in order;
- `SharedType(type(operands), type(results))`: one written type from which the op's
  class derives every operand and result type (`nn.add %a, %b : tensor<4xf32>`);
- `SliceSpec($start, $limit, $step)`: `[0:4, 2:8:2]`;
- `ResultTypes(type($results))`: result types written `T` for one result and
  `(T1, T2)` (or `()`) otherwise;
- `TwoOperandTypes(...)` / `ThreeOperandTypes(...)`: the types of several operands
  (optional ones only when present) as one list, a wrong count located at the list.

Only ops whose syntax needs more than a directive (a symbol with a region signature,
literals typed by the result, several optional result forms) keep a hand-written
`parse`/`print` on top of the helper functions below.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    TypeDirective,
    VariableDirective,
    VariadicOperandVariable,
    irdl_custom_directive,
)
from xdsl.parser import Parser
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


def keeps_order(perm: Sequence[int], shape: Sequence[int]) -> bool:
    """Whether permuting `shape` (result dim i = operand dim perm[i]) keeps every
    element's row-major position: the dims of size above 1 stay in order (such a
    transpose is a reshape)."""
    moved = [d for d in perm if shape[d] != 1]
    return moved == sorted(moved)


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


def print_operands(printer: Printer, operands: Sequence[SSAValue]) -> None:
    """Print operands separated by `, `."""
    printer.print_list(operands, printer.print_operand)


def parse_types(parser: Parser) -> list[Attribute]:
    """Parse a comma-separated list of types (at least one)."""
    return parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type)


def print_subscript(printer: Printer, operands: Sequence[SSAValue]) -> None:
    """Print index operands as a subscript, `[%i, %j]`."""
    printer.print_string("[")
    print_operands(printer, operands)
    printer.print_string("]")


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


def static_shape(value: SSAValue) -> tuple[int, ...]:
    """The shape of tensor value `value` (a VerifyException when it is not a tensor)."""
    return tuple(tensor_type(value, "value").get_shape())


def shape_str(shape: Sequence[int]) -> str:
    """A shape as MLIR writes it: `4x8`, or `scalar` for rank 0."""
    return "x".join(str(d) for d in shape) if shape else "scalar"


def shape_text(shape: Sequence[int]) -> str:
    """A shape as a Python tuple with `?` for a dynamic dim: `(?, 100)`."""
    dims = ["?" if n < 0 else str(n) for n in shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


# --------------------------------------------------------------------------- directives


class _Directive(CustomDirective):
    """A custom directive that is always present and never anchors an optional group."""

    def is_anchorable(self) -> bool:
        return False

    def is_present(self, op: IRDLOperation) -> bool:
        return True


@irdl_custom_directive
class IntList(_Directive):
    """`[i, j, ...]` for an `array<i64>` attribute."""

    values: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> bool:
        self.values.set(state, int_array(parse_int_list(parser)))
        return True

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        print_int_list(printer, array_values(self.values.get(op)))


@irdl_custom_directive
class BareInteger(_Directive):
    """An integer attribute written without its type, parsed as i64 (verifiers check
    the type of one written in the generic form)."""

    value: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> bool:
        self.value.set(state, IntegerAttr(parse_i64(parser), i64))
        return True

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        value = self.value.get(op)
        assert isinstance(value, IntegerAttr)
        printer.print_string(str(value.value.data))


@irdl_custom_directive
class IndexOperands(_Directive):
    """Operands of type index written `[%i, %j]` (possibly empty), without types."""

    operands: VariadicOperandVariable
    types: TypeDirective

    def parse(self, parser: Parser, state: ParsingState) -> bool:
        operands = parser.parse_comma_separated_list(
            Parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        self.operands.set(state, operands)
        self.types.set(state, [IndexType()] * len(operands))
        return True

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        print_subscript(printer, list(self.operands.get(op)))


DYNAMIC_SIZE = DYNAMIC_INDEX
"""Where an `array<i64>` of mixed sizes (`MixedSizes`) has an operand instead of a
number: MLIR's `kDynamic` (the smallest i64), what a `?` dim of a type holds too."""


def mixed_sizes(static: Sequence[int], dynamic: Sequence[SSAValue]) -> list[int | SSAValue]:
    """Sizes in order, numbers and operands merged (see `MixedSizes`)."""
    operands = iter(dynamic)
    return [next(operands) if s == DYNAMIC_SIZE else s for s in static]


def split_sizes(sizes: Sequence[int | SSAValue]) -> tuple[list[int], list[SSAValue]]:
    """(numbers with DYNAMIC_SIZE where an operand stands, the operands): the two
    halves of mixed `sizes` an op stores."""
    static = [DYNAMIC_SIZE if isinstance(s, SSAValue) else s for s in sizes]
    return static, [s for s in sizes if isinstance(s, SSAValue)]


@irdl_custom_directive
class MixedSizes(_Directive):
    """`[%n, 320]`: sizes that are numbers or index operands (`mixed_sizes`)."""

    static: AttributeVariable
    dynamic: VariadicOperandVariable
    types: TypeDirective

    def parse(self, parser: Parser, state: ParsingState) -> bool:
        static: list[int] = []
        dynamic = []

        def one() -> None:
            operand = parser.parse_optional_unresolved_operand()
            if operand is not None:
                dynamic.append(operand)
                static.append(DYNAMIC_SIZE)
            else:
                start = parser.pos
                value = parse_i64(parser)
                if value < 0:
                    parser.raise_error("a size is a non-negative number or an operand", start)
                static.append(value)

        parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, one)
        self.static.set(state, int_array(static))
        self.dynamic.set(state, dynamic)
        self.types.set(state, [IndexType()] * len(dynamic))
        return True

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        sizes = mixed_sizes(array_values(self.static.get(op)), list(self.dynamic.get(op)))
        printer.print_string("[")
        printer.print_list(
            sizes,
            lambda s: (
                printer.print_operand(s)
                if isinstance(s, SSAValue)
                else printer.print_string(str(s))
            ),
        )
        printer.print_string("]")


@irdl_custom_directive
class BareIdentifier(_Directive):
    """A string attribute written as a bare identifier."""

    value: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> bool:
        self.value.set(state, StringAttr(parser.parse_identifier()))
        return True

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        value = self.value.get(op)
        assert isinstance(value, StringAttr)
        printer.print_string(value.data)


class SharedTypeOp:
    """Mixin of ops whose syntax writes one type for all their values (`SharedType`):
    by default every operand and the result have that type; ops whose values differ
    (an i1 condition or result) override both methods."""

    @classmethod
    def types_from_shared(
        cls, shared: TensorType, operands: int
    ) -> tuple[list[Attribute], list[Attribute]]:
        """The operand and result types the written type stands for."""
        return [shared] * operands, [shared]

    def shared_type(self) -> Attribute:
        """The type the syntax writes."""
        assert isinstance(self, IRDLOperation)
        return self.results[0].type


@irdl_custom_directive
class SharedType(_Directive):
    """One written ranked tensor type standing for the types of the given operands
    (`type(operands)` or one `type($operand)`) and results, as the op's class (a
    `SharedTypeOp`) derives them."""

    operand_types: TypeDirective
    result_types: TypeDirective

    def parse(self, parser: Parser, state: ParsingState) -> bool:
        shared = parse_tensor_type(parser)
        op_type = state.op_type
        assert issubclass(op_type, SharedTypeOp)
        inner = self.operand_types.inner
        if isinstance(inner, VariableDirective):
            count = len(state.operands[inner.index] or ())
        else:  # `operands`
            count = sum(len(o) for o in state.operands if o is not None)
        operand_types, result_types = op_type.types_from_shared(shared, count)
        self.operand_types.set(state, operand_types)
        self.result_types.set(state, result_types)
        return True

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        assert isinstance(op, SharedTypeOp)
        state.print_whitespace(printer)
        printer.print_attribute(op.shared_type())


@irdl_custom_directive
class SliceSpec(_Directive):
    """`[start:limit, start:limit:step, ...]`, one entry per dim (step 1 not written)."""

    start: AttributeVariable
    limit: AttributeVariable
    step: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> bool:
        def parse_dim() -> tuple[int, int, int]:
            lo = parse_i64(parser)
            parser.parse_punctuation(":")
            hi = parse_i64(parser)
            st = parse_i64(parser) if parser.parse_optional_punctuation(":") else 1
            return lo, hi, st

        dims = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parse_dim)
        for directive, i in ((self.start, 0), (self.limit, 1), (self.step, 2)):
            directive.set(state, int_array([d[i] for d in dims]))
        return True

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        bounds = zip(
            *(array_values(d.get(op)) for d in (self.start, self.limit, self.step)), strict=True
        )
        parts = [f"{lo}:{hi}" + (f":{st}" if st != 1 else "") for lo, hi, st in bounds]
        printer.print_string("[" + ", ".join(parts) + "]")


class _OperandTypeList(_Directive):
    """The types of several operand groups (each one operand, or an absent or present
    optional one) written as one list of the present operands' types; a list of the
    wrong length is a located error at the list."""

    def _groups(self) -> list[TypeDirective]:
        return [getattr(self, name) for name in self.parameters]

    def parse(self, parser: Parser, state: ParsingState) -> bool:
        start = parser.pos
        types = parse_types(parser)
        groups = self._groups()
        counts = [len(state.operands[group.inner.index] or ()) for group in groups]  # type: ignore[attr-defined]
        if len(types) != sum(counts):
            parser.raise_error(f"{sum(counts)} operands but {len(types)} types", start, parser.pos)
        remaining = iter(types)
        for group, count in zip(groups, counts, strict=True):
            group.set(state, [next(remaining) for _ in range(count)])
        return True

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        print_types(printer, [t for group in self._groups() for t in group.get(op)])


@irdl_custom_directive
class TwoOperandTypes(_OperandTypeList):
    """`type($a), type($b)` as one located list."""

    first: TypeDirective
    second: TypeDirective


@irdl_custom_directive
class ThreeOperandTypes(_OperandTypeList):
    """`type($a), type($b), type($c)` as one located list; optional operands that are
    absent have no type in it (`%x weight %w : T, W` for a norm without bias)."""

    first: TypeDirective
    second: TypeDirective
    third: TypeDirective


@irdl_custom_directive
class FourOperandTypes(_OperandTypeList):
    """`type($a), type($b), type($c), type($d)` as one located list (absent optional
    operands have no type in it)."""

    first: TypeDirective
    second: TypeDirective
    third: TypeDirective
    fourth: TypeDirective


@irdl_custom_directive
class ResultTypes(_Directive):
    """Result types written `T` for exactly one result, `(T1, ...)` otherwise."""

    types: TypeDirective

    def parse(self, parser: Parser, state: ParsingState) -> bool:
        if parser.parse_optional_punctuation("(") is None:
            self.types.set(state, [parse_tensor_type(parser)])
            return True
        types: list[TensorType] = []
        if parser.parse_optional_punctuation(")") is None:
            types = parse_tensor_types(parser)
            parser.parse_punctuation(")")
        self.types.set(state, types)
        return True

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        state.print_whitespace(printer)
        types = list(self.types.get(op))
        if len(types) == 1:
            printer.print_attribute(types[0])
            return
        printer.print_string("(")
        print_types(printer, types)
        printer.print_string(")")
