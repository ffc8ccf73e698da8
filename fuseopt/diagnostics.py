"""Located, human-readable errors: `file:line:col: error: message`.

fuseopt never shows a Python traceback for bad input. Parse errors, verifier failures
and pass failures become a `CompileError` carrying the source location of the
offending op (recorded at parse time by `LocatingParser`, or by the frontend from the
FX node), and the CLI prints it in the compiler-standard form.

Besides xDSL's own checks, parsing and verifying here reject, with a located error:
- nesting deeper than `MAX_OP_NESTING` operations or `MAX_ATTRIBUTE_NESTING`
  attributes and types (Python's recursion limit would otherwise be hit);
- a shape dimension, or a shape's element count, that does not fit a signed 64-bit
  integer (MLIR's limit), quoting the shape as written;
- a region left open at the end of the input (the `{` it needs closing is named);
- an operand used before its definition, or outside the region of its definition
  (`verify_module`; the body of `builtin.module` is a graph region, as in MLIR).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, BlockArgument, Operation, OpResult, Region
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

MAX_OP_NESTING = 32
"""Operations nested inside one another's regions, at most (deeper is rejected)."""

MAX_ATTRIBUTE_NESTING = 32
"""Attributes and types nested inside one another, at most (deeper is rejected)."""

INT64_MAX = 2**63 - 1
"""The largest dimension and element count of a shape (MLIR's sizes are int64_t)."""


@dataclass(frozen=True)
class SourceLocation:
    """A position in an input file (1-based line and column)."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class CompileError(DiagnosticException):
    """An error in the user's program, reported at a source location when one is known."""

    def __init__(self, message: str, location: SourceLocation | None = None, context: str = ""):
        super().__init__(message)
        self.message = message
        self.location = location
        self.context = context

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        text = f"{where}error: {self.message}"
        return f"{text}\n{self.context}" if self.context else text


def op_location(op: Operation) -> SourceLocation | None:
    """The source location recorded on `op`, if any."""
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return SourceLocation(loc.filename.data, loc.line.data, loc.column.data)
    return None


def error_at(op: Operation, message: str) -> CompileError:
    """A CompileError located at `op` (or its nearest located ancestor)."""
    node: Operation | None = op
    while node is not None:
        if (loc := op_location(node)) is not None:
            return CompileError(message, loc)
        node = node.parent_op()
    return CompileError(message)


def from_parse_error(error: ParseError) -> CompileError:
    """Convert xDSL's ParseError into a CompileError with the source line and a caret."""
    loc = error.span.get_location()
    context = error.span.print_with_context().split("\n", 1)[-1].rstrip("\n")
    return CompileError(error.msg, SourceLocation(loc.file, loc.line, loc.col), context)


class LineIndex:
    """The line starts of a text, found once, so that a position's line and column
    take a binary search. (xDSL's `Span.get_location` counts the newlines from the
    start of the input on every call, which made locating every op of a long input
    quadratic in its length.)"""

    def __init__(self, content: str | bytes):
        newline = "\n" if isinstance(content, str) else b"\n"
        starts = [0]
        at = content.find(newline)  # type: ignore[arg-type]
        while at >= 0:
            starts.append(at + 1)
            at = content.find(newline, at + 1)  # type: ignore[arg-type]
        self.starts = starts

    def line_column(self, position: int) -> tuple[int, int]:
        """The 1-based line and column of `position`."""
        line = bisect_right(self.starts, position)
        return line, position - self.starts[line - 1] + 1


class LocatingParser(Parser):
    """An xDSL parser that records each operation's source position as its location,
    so verifier failures can point at the op (MLIR does the same), and that rejects
    input its recursive descent cannot take (see the module docstring) with a located
    error."""

    def __init__(self, ctx: Context, text: str | bytes, name: str, line_offset: int = 0):
        super().__init__(ctx, text, name)
        self._file_name = name
        self._line_offset = line_offset
        self._lines = LineIndex(self.lexer.input.content)
        self.open_ops: list[Span] = []
        """The start of each operation being parsed, innermost last (where an error that
        xDSL raises without a position is reported)."""
        self.open_regions: list[Span] = []
        """The `{` of each region being parsed, innermost last."""
        self._attribute_depth = 0

    def where(self, span: Span) -> str:
        """`line:col` of the start of `span` in the input file."""
        line, column = self._lines.line_column(span.start)
        return f"{line + self._line_offset}:{column}"

    def parse_operation(self) -> Operation:
        span = self._current_token.span
        if len(self.open_ops) >= MAX_OP_NESTING:
            self.raise_error(
                f"nesting too deep: operations nest at most {MAX_OP_NESTING} levels "
                "inside one another's regions",
                span,
            )
        self.open_ops.append(span)
        op = super().parse_operation()
        self.open_ops.pop()
        if not isinstance(op.location, FileLineColLoc):
            line, column = self._lines.line_column(span.start)
            op.location = FileLineColLoc(
                StringAttr(self._file_name), IntAttr(line + self._line_offset), IntAttr(column)
            )
        return op

    def parse_optional_region(self, arguments=None) -> Region | None:  # noqa: ANN001 - xDSL's
        if self._current_token.kind != MLIRTokenKind.L_BRACE:
            return super().parse_optional_region(arguments)
        self.open_regions.append(self._current_token.span)
        try:
            return super().parse_optional_region(arguments)
        finally:
            self.open_regions.pop()

    def _parse_block(self) -> Block:
        # xDSL expects a block label wherever a region's operations stop; a region cut
        # short (a missing `}`) would be reported as " in block definition"
        token = self._current_token
        if token.kind != MLIRTokenKind.CARET_IDENT and self.open_regions:
            opened = self.where(self.open_regions[-1])
            got = "the end of the input" if token.kind == MLIRTokenKind.EOF else f"'{token.text}'"
            self.raise_error(
                f"expected '}}' to close the region opened at {opened} (or an operation, or "
                f"a block label ^name), got {got}",
                token.span,
            )
        return super()._parse_block()

    @contextmanager
    def _nested_attribute(self) -> Iterator[None]:
        if self._attribute_depth >= MAX_ATTRIBUTE_NESTING:
            self.raise_error(
                f"nesting too deep: attributes and types nest at most {MAX_ATTRIBUTE_NESTING} "
                "levels"
            )
        self._attribute_depth += 1
        try:
            yield
        finally:
            self._attribute_depth -= 1

    @contextmanager
    def _located_constructor(self) -> Iterator[None]:
        """An attribute's or type's own check that fails while it is built (an integer
        out of its type's range) is located at its text, which it quotes."""
        start = self._current_token.span.start
        try:
            yield
        except ParseError:
            raise
        except (DiagnosticException, ValueError) as e:
            end = max(self.pos, start + 1)
            text = str(self.lexer.input.content[start:end]).strip()
            self.raise_error(f"{_first_line(e)} (in '{text}')", start, end)

    def parse_optional_attribute(self) -> Attribute | None:
        with self._nested_attribute(), self._located_constructor():
            return super().parse_optional_attribute()

    def parse_optional_type(self):  # noqa: ANN201 - xDSL's TypeAttribute | None
        with self._nested_attribute(), self._located_constructor():
            return super().parse_optional_type()

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        if self._current_token.kind == MLIRTokenKind.EOF:
            return ModuleOp([])  # nothing but whitespace and comments, as in mlir-opt
        return super().parse_module(allow_implicit_module)

    def _parse_tensor_literal(self):  # noqa: ANN202 - xDSL's private tuple type
        with self._nested_attribute():
            return super()._parse_tensor_literal()

    def parse_shape_dimension(self, allow_dynamic: bool = True) -> int:
        token = self._current_token
        dim = super().parse_shape_dimension(allow_dynamic)
        if dim > INT64_MAX:
            self.raise_error(
                f"dimension {token.text} is too large: sizes are 64-bit (at most {INT64_MAX})",
                token.span,
            )
        return dim

    def parse_dimension_list(self) -> list[int]:
        start = self._current_token.span.start
        dims = super().parse_dimension_list()
        elements = math.prod(d for d in dims if d >= 0)
        if elements > INT64_MAX:
            text = str(self.lexer.input.content[start : self.pos]).rstrip()
            self.raise_error(
                f"shape {text} has {elements} elements, more than a 64-bit size can count "
                f"(at most {INT64_MAX})",
                start,
                self.pos,
            )
        return dims


def parse_module(
    ctx: Context, text: str | bytes, name: str = "<input>", line_offset: int = 0
) -> ModuleOp:
    """Parse MLIR text into a verified module, raising CompileError on any problem."""
    parser = None
    try:
        parser = LocatingParser(ctx, text, name, line_offset)
        module = parser.parse_module()
    except ParseError as e:
        e.span = _with_offset(e.span, line_offset)
        raise from_parse_error(e) from None
    except UnicodeDecodeError as e:
        message = f"{name}: input is not UTF-8 text (bad byte at offset {e.start})"
        raise CompileError(message) from None
    except RecursionError:
        # a construct the nesting limits do not count (an unregistered dialect's
        # attribute body, say) nested past Python's recursion limit
        if parser is None:
            raise
        where = ParseError(
            _with_offset(parser._current_token.span, line_offset),
            "nesting too deep for the parser (Python's recursion limit)",
        )
        raise from_parse_error(where) from None
    except (DiagnosticException, ValueError) as e:
        # an attribute constructor's own check fired while parsing (`300 : i8`): xDSL
        # raises it without a position, so point at the op being parsed
        if parser is None:
            raise
        span = parser.open_ops[-1] if parser.open_ops else parser._current_token.span
        where = ParseError(_with_offset(span, line_offset), _first_line(e))
        raise from_parse_error(where) from None
    verify_module(module)
    return module


def _with_offset(span: Span, line_offset: int) -> Span:
    return replace(span, line_offset=line_offset)


def verify_module(module: Operation) -> None:
    """Verify every op, raising a CompileError located at the first op that fails.

    Before an op's own verifier, its operands must be visible where it uses them
    (`check_operand_order`)."""
    defined: set[Operation] = set()
    for op in module.walk():
        if (message := check_operand_order(op, defined)) is not None:
            raise error_at(op, f"'{op.name}' op {message}")
        defined.add(op)
        try:
            op.verify(verify_nested_ops=False)
        except DiagnosticException as e:
            message = _first_line(e)
            where = _redefinition(op, message) or op
            raise error_at(where, f"'{op.name}' op {message}") from None
        except (ValueError, TypeError, AssertionError) as e:
            raise error_at(op, f"'{op.name}' op is malformed: {e}") from None


def check_operand_order(op: Operation, defined: set[Operation]) -> str | None:
    """Why an operand of `op` is not visible at `op`, or None when all are.

    A value is visible at `op` when its block encloses `op` (it is `op`'s block or the
    block of an op around it) and, for an op's result, that op comes earlier in the
    block. `defined` holds the ops visited so far in a pre-order walk (`Operation.walk`),
    which puts every earlier op of an enclosing block in it. Not checked: values of
    graph regions (the body of `builtin.module`, as in MLIR) and uses across the blocks
    of one region (branches, which need a dominance analysis).
    """
    for i, value in enumerate(op.operands):
        if isinstance(value, BlockArgument):
            owner, block = None, value.block
        elif isinstance(value, OpResult):
            owner, block = value.op, value.op.parent_block()
        else:
            continue
        if block is None:
            continue
        name = f"operand {i}" + (f" (%{value.name_hint})" if value.name_hint else "")
        user: Operation | None = op
        while user is not None and user.parent_block() is not block:
            user = user.parent_op()
        if user is None:
            if _shares_a_region(op, block):
                continue
            if owner is None:
                return f"{name} is an argument of a block that does not enclose this op"
            return (
                f"{name} is defined by '{owner.name}'{_at_text(owner)} in a region that "
                "does not enclose this op"
            )
        if owner is None or isinstance(block.parent_op(), ModuleOp):
            continue
        if owner is user:
            what = "this op's own result" if owner is op else f"a result of '{owner.name}'"
            what += "" if owner is op else " around this op"
            return f"{name} is {what}: a value must be defined before it is used"
        if owner not in defined:
            return f"{name} is used before it is defined (by '{owner.name}'{_at_text(owner)})"
    return None


def _shares_a_region(op: Operation, block: Block) -> bool:
    """Whether `block` is in the region of a block enclosing `op` (another block of it)."""
    region = block.parent
    node: Operation | None = op
    while node is not None:
        parent = node.parent_block()
        if parent is not None and parent.parent is region:
            return True
        node = node.parent_op()
    return False


def _at_text(op: Operation) -> str:
    loc = op_location(op)
    return f" at {loc}" if loc is not None else ""


def _redefinition(scope: Operation, message: str) -> Operation | None:
    """For a symbol table's "Redefinition of symbol" error: the second op of `scope`
    that defines the name (the module itself has no source location)."""
    match = re.match(r'Redefinition of symbol "(.*)"', message)
    if match is None or not scope.regions:
        return None
    seen = 0
    for op in scope.regions[0].ops:
        name = op.properties.get("sym_name") or op.attributes.get("sym_name")
        if getattr(name, "data", None) == match.group(1):
            seen += 1
            if seen == 2:
                return op
    return None


def _first_line(error: Exception) -> str:
    """The message of a verifier error on one line. IRDL's constraint errors say which
    operand "does not verify:" on one line and why on the next: both are kept."""
    text = str(error)
    text = text.removeprefix("Operation does not verify: ")
    lines = text.split("\n")
    if lines[0].endswith("does not verify:") and len(lines) > 1:
        return f"{lines[0]} {lines[1].strip()}"
    return lines[0]


class ConfigurationError(CompileError):
    """A user setting is wrong: an unknown or unavailable backend, an unknown option, a
    bad `mode`. Always raised to the user, never turned into an eager fallback."""


class BackendUnavailableError(ConfigurationError):
    """The named backend does not exist, or is not available in this build."""


class DeviceUnavailableError(BackendUnavailableError):
    """The backend compiled the model, but this machine lacks the device to run it (the
    kernels exist: `kernels`, `save()`); raised when the compiled model is called."""
