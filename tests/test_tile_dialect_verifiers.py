"""The tile dialect's `fill` contract end to end: an integer tile's fill is an integer of
its element type, which the interpreter and both printers read exactly (the located
errors for bad fills are in filecheck/dialects/tile/invalid.mlir)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    f32,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block

import fuseopt
from fuseopt.backends.cuda.printer import print_cuda
from fuseopt.backends.triton.printer import print_triton
from fuseopt.dialects import tile

I64_MIN = -(2**63)

ROW_MAX = f"""tile.kernel @k grid 1 (%x: memref<3xi64>, %y: memref<1xi64>) attributes {{
  schedule = "row_reduction", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 2 : i64
}} {{
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] fill {I64_MIN} : memref<3xi64> -> tensor<4xi64>
  %r = tile.reduce max %t axis 0 : tensor<4xi64> -> tensor<i64>
  %b = tile.broadcast %r dims [] : tensor<i64> -> tensor<1xi64>
  tile.store %b, %y[%c0] : tensor<1xi64>, memref<1xi64>
  tile.return
}}
func.func @main(%x: memref<3xi64>, %y: memref<1xi64> {{tile.output}}) {{
  tile.launch @k grid [1] (%x, %y) : memref<3xi64>, memref<1xi64>
  func.return
}}
"""


def test_an_integer_fill_is_read_exactly() -> None:
    module = fuseopt.parse(ROW_MAX)
    x = np.array([-(2**62), -5, -(2**61)], dtype=np.int64)
    assert int(np.asarray(fuseopt.interpret(module, "main", x)).reshape(-1)[0]) == -5
    assert f"other={I64_MIN}" in print_triton(module).source
    # C++ has no INT64_MIN literal (9223372036854775808LL overflows before the minus)
    cuda = "\n".join(k.source for k in print_cuda(module))
    assert "(-9223372036854775807LL - 1)" in cuda and "9223372036854775808" not in cuda


def _load(element: Attribute, fill: float | int) -> tile.LoadOp:
    """A load of an 8-element tile of `element` type with `fill`."""
    block = Block(arg_types=[MemRefType(element, [8]), IndexType()])
    return tile.LoadOp(block.args[0], [block.args[1]], [8], fill)


@pytest.mark.parametrize(
    ("element", "fill", "attr", "value"),
    [
        (i64, I64_MIN, IntegerAttr(I64_MIN, i64), I64_MIN),
        (i64, 2**64 - 1, IntegerAttr(-1, i64), -1),  # unsigned spelling, stored signed
        (i1, 1, IntegerAttr(1, i1), 1),
        (f32, -math.inf, FloatAttr(-math.inf, f64), -math.inf),
    ],
)
def test_load_builds_the_fill_of_its_element_type(
    element: Attribute, fill: float | int, attr: Attribute, value: float | int
) -> None:
    load = _load(element, fill)
    assert load.fill == attr and load.fill_value == value


@pytest.mark.parametrize(("element", "fill"), [(i64, -math.inf), (i64, 1.5), (i1, 2)])
def test_load_rejects_a_fill_its_element_type_cannot_hold(
    element: IntegerType, fill: float | int
) -> None:
    with pytest.raises(ValueError, match="fill"):
        _load(element, fill)


KERNEL_WITH = """tile.kernel @k grid 1 (%x: memref<8xf32>) attributes {{{attrs}}} {{
  tile.return
}}
"""


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        (
            "num_warps = 99999999 : i64",
            "num_warps must be a power of two from 1 to 32, got 99999999",
        ),
        ("num_warps = 0 : i64", "num_warps must be a power of two from 1 to 32, got 0"),
        ("num_stages = -3 : i64", "num_stages must be an integer from 1 to 8, got -3"),
        ("num_stages = 9 : i64", "num_stages must be an integer from 1 to 8, got 9"),
        ("vector_width = 32 : i64", "vector_width must be a power of two from 1 to 16, got 32"),
        ("shared_bytes = -1 : i64", "shared_bytes must be an integer from 0 to 2147483647, got -1"),
        ("num_warps = 4 : i32", "num_warps must be an i64 integer, got 4 : i32"),
    ],
)
def test_launch_knobs_out_of_range_are_located_errors(attrs: str, message: str) -> None:
    with pytest.raises(fuseopt.CompileError) as info:
        fuseopt.parse(KERNEL_WITH.format(attrs=attrs), "k.mlir")
    assert str(info.value).startswith(f"k.mlir:1:1: error: 'tile.kernel' op {message}")


def test_launch_knobs_in_range_verify() -> None:
    for warps in (1, 2, 4, 8, 16, 32):
        for stages in (1, 3, 8):
            attrs = f"num_warps = {warps} : i64, num_stages = {stages} : i64"
            fuseopt.parse(KERNEL_WITH.format(attrs=attrs))


def test_every_launch_knob_tile_promote_chooses_is_in_range() -> None:
    """tile-promote's heuristics stay inside the verifier's ranges (sizes up to 32768)."""
    from fuseopt.dialects.tile_verification import LAUNCH_KNOB_RANGES
    from fuseopt.passes.convert_nn_to_tile.heuristics import launch_knobs

    for kind in ("pointwise", "row_reduction", "matmul"):
        for tile_elements in (1, 64, 4096, 128 * 128, 32768, 1 << 20):
            for element_bytes in (1, 2, 4, 8):
                knobs = launch_knobs(kind, tile_elements, 64, 64, element_bytes)
                for name in ("num_warps", "num_stages", "vector_width"):
                    least, most, _ = LAUNCH_KNOB_RANGES[name]
                    assert least <= getattr(knobs, name) <= most, (kind, tile_elements, name)
