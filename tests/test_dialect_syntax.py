"""The dialects' syntax is declared: every nn and tile op has an IRDL assembly format,
except the few whose syntax a format cannot express, and those keep the same text.

The round trip of every op's printed form is the FileCheck suite's
(filecheck/dialects/*/ops.mlir); this file checks which ops are declared and that the
custom directives give the errors a user needs.
"""

from __future__ import annotations

import pytest

import fuseopt
from fuseopt.diagnostics import CompileError
from fuseopt.dialects import nn, tile

HAND_WRITTEN = {
    "nn.constant": "a literal (splat number, bool or dense) typed by the result type after it",
    "tile.kernel": "a symbol with a signature that names the body's block arguments",
    "tile.load": "a `fill` literal typed by the element type of the result after it",
}
"""The ops that keep hand-written parse/print, and why a format cannot express them."""


def _declared(op: type) -> bool:
    return op.get_irdl_definition().assembly_format is not None


@pytest.mark.parametrize("op", [*nn.NN.operations, *tile.TILE.operations], ids=lambda o: o.name)
def test_every_op_has_a_format_or_a_reason(op: type) -> None:
    if op.name in HAND_WRITTEN:
        assert not _declared(op), f"{op.name} has a format now: drop it from HAND_WRITTEN"
    else:
        assert _declared(op), f"{op.name} has no assembly format and no listed reason"


def test_the_exceptions_still_exist() -> None:
    names = {op.name for op in (*nn.NN.operations, *tile.TILE.operations)}
    assert set(HAND_WRITTEN) <= names


def _error(text: str) -> str:
    with pytest.raises(CompileError) as info:
        fuseopt.parse(text)
    return str(info.value)


def test_a_missing_operand_type_is_reported_at_the_types() -> None:
    text = """tile.kernel @k grid 1 (%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %a = nn.constant 1.0 : tensor<8xf32>
  tile.store %a, %x[%c0] : tensor<8xf32>
  tile.return
}
"""
    message = _error(text)
    assert "2 operands but 1 types" in message
    assert ":4:" in message.splitlines()[0]  # the store's line, not the next one


def test_norm_types_follow_the_present_operands() -> None:
    base = "func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<2x8xf32> {{\n  {}\n  func.return %r : tensor<2x8xf32>\n}}\n"
    ok = "%r = nn.layer_norm %x weight %w {eps = 1.000000e-05 : f64} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>"
    module = fuseopt.parse(base.format(ok))
    assert ok in str(module)
    extra = ok.replace("tensor<8xf32> ->", "tensor<8xf32>, tensor<8xf32> ->")
    assert "2 operands but 3 types" in _error(base.format(extra))


def test_a_shared_type_must_be_a_ranked_tensor() -> None:
    text = "func.func @f(%x: tensor<4xf32>) {\n  %r = nn.exp %x : f32\n  func.return\n}\n"
    assert "expected a ranked tensor type, got f32" in _error(text)


def test_an_integer_list_rejects_values_beyond_i64() -> None:
    text = (
        "func.func @f(%x: tensor<4x8xf32>) {\n"
        "  %r = nn.transpose %x [1, 99999999999999999999] : tensor<4x8xf32> -> tensor<8x4xf32>\n"
        "  func.return\n}\n"
    )
    assert "does not fit i64" in _error(text)


@pytest.mark.parametrize(
    "line",
    [
        "%r = nn.compare lt, %x, %x : tensor<4xf32>",
        "%r = nn.select %m, %x, %x : tensor<4xf32>",
        "%r = nn.slice %x [0:4:2] : tensor<4xf32> -> tensor<2xf32>",
        "%r = nn.sum %x [0] keepdim : tensor<4xf32> -> tensor<1xf32>",
    ],
)
def test_directive_forms_print_as_written(line: str) -> None:
    text = f"func.func @f(%x: tensor<4xf32>, %m: tensor<4xi1>) {{\n  {line}\n  func.return\n}}\n"
    assert line in str(fuseopt.parse(text))
