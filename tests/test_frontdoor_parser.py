"""Hostile input to the parser and verifier (issue 14): located errors, never a traceback.

- op locations come from a line index built once (parsing stays linear in the input);
- nesting past the parser's limits, huge dims, an unclosed region, and operands used
  before (or outside) their definition are each one located `CompileError`.
"""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import FileLineColLoc
from xdsl.utils.lexer import Span

import fuseopt
from fuseopt.diagnostics import (
    MAX_ATTRIBUTE_NESTING,
    MAX_OP_NESTING,
    CompileError,
    LineIndex,
    verify_module,
)
from fuseopt.dialects import nn

T4 = "tensor<4xf32>"


def chain(n: int) -> str:
    """A function of `n` chained nn.add ops (what issue 14 timed at 10^5 ops)."""
    lines = [f"func.func @f(%0: {T4}) -> {T4} {{"]
    lines += [f"  %{i} = nn.add %{i - 1}, %{i - 1} : {T4}" for i in range(1, n + 1)]
    lines += [f"  func.return %{n} : {T4}", "}", ""]
    return "\n".join(lines)


def error_of(text: str, name: str = "in.mlir") -> CompileError:
    with pytest.raises(CompileError) as info:
        fuseopt.parse(text, name)
    assert info.value.location is not None and info.value.location.file == name
    return info.value


def test_locations_come_from_a_line_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Locating an op must not count newlines from the start of the input (quadratic)."""

    def rescan(self: Span) -> object:
        raise AssertionError("Span.get_location rescans the input from its start")

    monkeypatch.setattr(Span, "get_location", rescan)
    module = fuseopt.parse(chain(300), "chain.mlir")
    adds = [op for op in module.walk() if isinstance(op, nn.AddOp)]
    assert len(adds) == 300
    loc = adds[-1].location
    assert isinstance(loc, FileLineColLoc)
    assert (loc.filename.data, loc.line.data, loc.column.data) == ("chain.mlir", 301, 3)


def test_line_index() -> None:
    index = LineIndex("ab\ncd\n\nx")
    assert [index.line_column(p) for p in (0, 1, 3, 6, 7)] == [
        (1, 1),
        (1, 2),
        (2, 1),
        (3, 1),
        (4, 1),
    ]
    assert LineIndex(b"a\nb").line_column(2) == (2, 1)


@pytest.mark.parametrize(
    "text",
    [
        "builtin.module {\n" * 300 + "}\n" * 300,
        "func.func @f() attributes {a = " + "[" * 300 + "]" * 300 + "} {\n  func.return\n}\n",
        "func.func @f(%x: " + "tuple<" * 300 + "f32" + ">" * 300 + ") {\n  func.return\n}\n",
        "func.func @f() attributes {a = dense<"
        + "[" * 300
        + "1.0"
        + "]" * 300
        + "> : tensor<"
        + "1x" * 300
        + "f32>} {\n  func.return\n}\n",
        "func.func @f() attributes {a = " + "[" * 5000 + "]" * 5000 + "} {\n  func.return\n}\n",
    ],
    ids=["modules", "attributes", "types", "dense", "attributes-5000"],
)
def test_deep_nesting_is_a_located_error(text: str) -> None:
    error = error_of(text)
    assert "nesting too deep" in error.message


def test_nesting_up_to_the_limits_parses() -> None:
    depth = MAX_OP_NESTING - 2  # modules, then func.func and func.return
    attrs = MAX_ATTRIBUTE_NESTING - 1
    inner = (
        "func.func @f(%x: "
        + "tuple<" * attrs
        + "f32"
        + ">" * attrs
        + ") attributes {a = "
        + "[" * attrs
        + "]" * attrs
        + "} {\n  func.return\n}\n"
    )
    module = fuseopt.parse("builtin.module {\n" * depth + inner + "}\n" * depth)
    assert str(module).count("builtin.module") == depth  # the outermost is the module


def test_unclosed_region_names_its_brace() -> None:
    text = f"func.func @f(%x: {T4}) -> {T4} {{\n  %0 = nn.exp %x : {T4}\n  func.return %0 : {T4}\n"
    error = error_of(text)
    assert str(error.location) == "in.mlir:4:1"
    assert error.message.startswith("expected '}' to close the region opened at 1:50")
    assert "end of the input" in error.message


def test_stray_token_in_a_region_is_named() -> None:
    text = f"func.func @f(%x: {T4}) -> {T4} {{\n  func.return %x : {T4}\n  )\n}}\n"
    error = error_of(text)
    assert str(error.location) == "in.mlir:3:3"
    assert "got ')'" in error.message and "region opened at 1:50" in error.message


@pytest.mark.parametrize(
    ("shape", "quoted"),
    [
        ("799999999999999999992", "dimension 799999999999999999992 is too large"),
        ("9223372036854775808x2", "dimension 9223372036854775808 is too large"),
        ("4294967296x4294967296", "shape 4294967296x4294967296 has 18446744073709551616 elements"),
    ],
)
def test_huge_shapes_are_located_and_quoted(shape: str, quoted: str) -> None:
    text = f"func.func @f(%x: tensor<{shape}xf32>) {{\n  func.return\n}}\n"
    error = error_of(text)
    assert str(error.location) == "in.mlir:1:25"
    assert quoted in error.message
    assert shape.split("x")[0] in error.context  # the user's line, with a caret


def test_largest_dimension_is_accepted() -> None:
    fuseopt.parse("func.func @f(%x: tensor<9223372036854775807xi8>) {\n  func.return\n}\n")


def test_an_op_using_its_own_result_is_rejected() -> None:
    text = f"func.func @f(%x: {T4}) -> {T4} {{\n  %0 = nn.add %0, %x : {T4}\n  func.return %0 : {T4}\n}}\n"
    error = error_of(text)
    assert str(error.location) == "in.mlir:2:3"
    assert error.message == (
        "'nn.add' op operand 0 is this op's own result: a value must be defined before it is used"
    )


def test_use_before_definition_is_rejected() -> None:
    text = (
        f"func.func @f(%x: {T4}) -> {T4} {{\n  %1 = nn.add %0, %x : {T4}\n"
        f"  %0 = nn.exp %x : {T4}\n  func.return %1 : {T4}\n}}\n"
    )
    error = error_of(text)
    assert str(error.location) == "in.mlir:2:3"
    assert "operand 0 is used before it is defined (by 'nn.exp' at in.mlir:3:3)" in error.message


def loop(body_operand: str, after: str = "") -> str:
    """A function with an scf.for whose body adds `body_operand` to its accumulator."""
    return (
        f"func.func @f(%x: {T4}) -> {T4} {{\n"
        f"  %c0 = arith.constant 0 : index\n"
        f"  %c1 = arith.constant 1 : index\n"
        f"  %y = nn.exp %x : {T4}\n"
        f"  %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%acc = %x) -> ({T4}) {{\n"
        f"    %s = nn.add %acc, {body_operand} : {T4}\n"
        f"    scf.yield %s : {T4}\n"
        f"  }}\n{after}"
        f"  func.return %r : {T4}\n}}\n"
    )


def test_use_in_a_nested_region_of_a_later_value_is_rejected() -> None:
    error = error_of(loop("%late", f"  %late = nn.exp %x : {T4}\n"))
    assert str(error.location) == "in.mlir:6:5"
    assert "operand 1 (%late) is used before it is defined (by 'nn.exp' at in.mlir:9:3)" in (
        error.message
    )


def test_use_of_the_enclosing_ops_result_is_rejected() -> None:
    error = error_of(loop("%r"))
    assert "operand 1 (%r) is a result of 'scf.for' around this op" in error.message


def test_value_of_a_sibling_region_is_rejected() -> None:
    """Made in Python (the parser's scopes cannot express it): a use outside the region
    of the definition, and a block argument of a block that does not enclose the use."""
    second_loop = (
        f"  %r2 = scf.for %j = %c0 to %c1 step %c1 iter_args(%acc2 = %x) -> ({T4}) {{\n"
        f"    %s2 = nn.add %acc2, %y : {T4}\n"
        f"    scf.yield %s2 : {T4}\n"
        f"  }}\n"
    )
    text = loop("%y", second_loop)
    module = fuseopt.parse(text)
    first, second = [op for op in module.walk() if isinstance(op, nn.AddOp)]
    second.operands = [second.operands[0], first.results[0]]
    with pytest.raises(
        CompileError, match=r"operand 1 \(%s\) is defined by 'nn.add' at <input>:6:5 in a region"
    ):
        verify_module(module)
    second.operands = [second.operands[0], first.operands[0]]
    with pytest.raises(
        CompileError, match=r"operand 1 \(%acc\) is an argument of a block that does not"
    ):
        verify_module(module)


def test_valid_ssa_forms_still_verify() -> None:
    fuseopt.parse(loop("%y"))
    fuseopt.parse(loop("%acc"))
    fuseopt.parse(loop("%x"))


def test_an_attribute_out_of_range_is_located_at_its_text() -> None:
    text = "func.func @f() attributes {a = [1, [2, 300 : i8]]} {\n  func.return\n}\n"
    error = error_of(text)
    assert str(error.location) == "in.mlir:1:40"
    assert "Integer value 300 is out of range for type i8" in error.message
    assert error.message.endswith("(in '300 : i8')")


@pytest.mark.parametrize("text", ["", "\n\n", "// only a comment\n"])
def test_empty_input_is_an_empty_module(text: str) -> None:
    """As in mlir-opt: nothing to parse is an empty module, not "Could not parse"."""
    assert not list(fuseopt.parse(text).ops)
