"""Located, human-readable errors: `file:line:col: error: message`.

fuseopt never shows a Python traceback for bad input. Parse errors, verifier failures
and pass failures become a `CompileError` carrying the source location of the
offending op (recorded at parse time by `LocatingParser`, or by the frontend from the
FX node), and the CLI prints it in the compiler-standard form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.utils.lexer import Span


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


class LocatingParser(Parser):
    """An xDSL parser that records each operation's source position as its location,
    so verifier failures can point at the op (MLIR does the same)."""

    def __init__(self, ctx: Context, text: str | bytes, name: str, line_offset: int = 0):
        super().__init__(ctx, text, name)
        self._file_name = name
        self._line_offset = line_offset
        self.open_ops: list[Span] = []
        """The start of each operation being parsed, innermost last (where an error that
        xDSL raises without a position is reported)."""

    def parse_operation(self) -> Operation:
        span = self._current_token.span
        self.open_ops.append(span)
        op = super().parse_operation()
        self.open_ops.pop()
        if not isinstance(op.location, FileLineColLoc):
            loc = span.get_location()
            op.location = FileLineColLoc(
                StringAttr(self._file_name),
                IntAttr(loc.line + self._line_offset),
                IntAttr(loc.col),
            )
        return op


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


def _with_offset(span, line_offset: int):  # noqa: ANN001, ANN202 - xDSL's Span is generic
    from dataclasses import replace

    return replace(span, line_offset=line_offset)


def verify_module(module: Operation) -> None:
    """Verify every op, raising a CompileError located at the first op that fails."""
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except DiagnosticException as e:
            message = _first_line(e)
            where = _redefinition(op, message) or op
            raise error_at(where, f"'{op.name}' op {message}") from None
        except (ValueError, TypeError, AssertionError) as e:
            raise error_at(op, f"'{op.name}' op is malformed: {e}") from None


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
    text = str(error)
    text = text.removeprefix("Operation does not verify: ")
    return text.split("\n", 1)[0]
