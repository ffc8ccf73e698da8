"""The CUDA printer's static facts about index scalars (`backends/cuda/index_facts.py`)
and what the memory printer drops with them: every fact is checked against the values
the expression takes for every program, and the bounds tests and per-chunk alignment
tests stay wherever they can fail."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue

import fuseopt
from fuseopt.backends.cuda.index_facts import IndexFacts
from fuseopt.backends.cuda.printer import print_cuda
from fuseopt.dialects import tile

_OPS = {
    "add": (arith.AddiOp, lambda a, b: a + b),
    "sub": (arith.SubiOp, lambda a, b: a - b),
    "mul": (arith.MuliOp, lambda a, b: a * b),
    "div": (arith.DivSIOp, lambda a, b: int(a / b)),  # C truncation
    "rem": (arith.RemSIOp, lambda a, b: a - b * int(a / b)),
    "min": (arith.MinSIOp, min),
    "max": (arith.MaxSIOp, max),
}


def _expression(draw, depth: int) -> tuple:  # noqa: ANN001 - a hypothesis draw
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return ("pid",) if draw(st.booleans()) else ("const", draw(st.integers(-40, 300)))
    name = draw(st.sampled_from(sorted(_OPS)))
    left = _expression(draw, depth - 1)
    if name in ("div", "rem"):
        return (name, left, ("const", draw(st.integers(1, 70))))
    return (name, left, _expression(draw, depth - 1))


@st.composite
def expressions(draw) -> tuple:  # noqa: ANN001
    """A random index expression over one program id and constants."""
    return _expression(draw, 4)


def _build(expr: tuple, block: Block, pid: SSAValue) -> SSAValue:
    if expr[0] == "pid":
        return pid
    if expr[0] == "const":
        op: Operation = arith.ConstantOp(IntegerAttr(expr[1], IndexType()))
    else:
        cls, _ = _OPS[expr[0]]
        op = cls(_build(expr[1], block, pid), _build(expr[2], block, pid))
    block.add_op(op)
    return op.results[0]


def _value(expr: tuple, pid: int) -> int:
    if expr[0] == "pid":
        return pid
    if expr[0] == "const":
        return expr[1]
    _, fn = _OPS[expr[0]]
    return fn(_value(expr[1], pid), _value(expr[2], pid))


@settings(max_examples=300, deadline=None)
@given(expressions(), st.integers(1, 40))
def test_facts_hold_for_every_program(expr: tuple, grid: int) -> None:
    block = Block()
    program = tile.ProgramIdOp(0)
    block.add_op(program)
    result = _build(expr, block, program.results[0])
    ModuleOp(Region([block]))  # the ops need a parent only for printing errors
    fact = IndexFacts((grid,)).of(result)
    for pid in range(grid):
        value = _value(expr, pid)
        assert fact.low is None or fact.low <= value, (expr, pid, value, fact)
        assert fact.high is None or value <= fact.high, (expr, pid, value, fact)
        assert fact.multiple == 0 and value == 0 or value % max(fact.multiple, 1) == 0, (
            expr,
            pid,
            value,
            fact,
        )


def test_program_ids_are_unbounded_without_a_static_grid() -> None:
    program = tile.ProgramIdOp(0)
    assert IndexFacts(None).of(program.results[0]).high is None
    assert IndexFacts((7,)).of(program.results[0]).high == 6


def _kernel(
    rows: int, cols: int, block_rows: int, grid: int, view: str = "", block_cols: int = 0
) -> str:
    """A copy kernel: program p moves rows [p * block_rows, + block_rows) of a rows x
    cols bf16 buffer in tiles of `block_cols` columns (all by default; through a strided
    `view` of the input when given)."""
    block_cols = block_cols or cols
    x = f"memref<{rows}x{cols}xbf16{view}>"
    y = f"memref<{rows}x{cols}xbf16>"
    passed = f"memref<{rows * cols + 64}xbf16>" if view else x  # the viewed buffer
    return f"""
builtin.module {{
  tile.kernel @k grid 1 (%0: {x}, %1: {y}) attributes {{schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 8 : i64, shared_bytes = 0 : i64}} {{
    %c0 = arith.constant 0 : index
    %cb = arith.constant {block_rows} : index
    %p = tile.program_id 0
    %r = arith.muli %p, %cb : index
    %t = tile.load %0[%r, %c0] : {x} -> tensor<{block_rows}x{block_cols}xbf16>
    tile.store %t, %1[%r, %c0] : tensor<{block_rows}x{block_cols}xbf16>, {y}
    tile.return
  }}
  func.func @main(%0: {passed}, %1: {y} {{tile.output}}) {{
    tile.launch @k grid [{grid}] (%0, %1) : {passed}, {y}
    func.return
  }}
}}
"""


def _source(text: str) -> str:
    (kernel,) = print_cuda(fuseopt.parse(text))
    return kernel.source


def test_exact_tiles_drop_every_bounds_test_and_test_the_pointer_once() -> None:
    src = _source(_kernel(64, 256, 16, 4))
    assert "const bool fo_ok = true;" in src
    assert "< 64" not in src and "<= 256" not in src
    assert re.search(r"fo_aligned\(p0, ", src) and "fo_aligned(p0 + fo_g" not in src


@pytest.mark.parametrize(
    ("rows", "cols", "grid", "kept"),
    [
        pytest.param(60, 256, 4, "< 60", id="ragged-rows"),
        pytest.param(64, 250, 4, "<= 250", id="ragged-columns"),
        pytest.param(64, 256, 5, "< 64", id="grid-past-the-rows"),
    ],
)
def test_bounds_tests_stay_where_they_can_fail(rows: int, cols: int, grid: int, kept: str) -> None:
    src = _source(_kernel(rows, cols, 16, grid, block_cols=256))
    assert kept in src
    assert "const bool fo_ok = true;" not in src or kept == "<= 250"


def test_a_view_at_an_odd_offset_tests_each_chunk() -> None:
    view = ", strided<[256, 1], offset: 3>"
    src = _source(_kernel(64, 256, 16, 4, view))
    assert "fo_aligned(p0 + fo_g" in src
    assert "fo_aligned(p1, " in src  # the output is contiguous


def _row_loop(rows: int, step: int) -> str:
    """One program sums a rows x 64 f32 buffer's columns `step` rows a step."""
    x, y = f"memref<{rows}x64xf32>", "memref<64xf32>"
    return f"""
builtin.module {{
  tile.kernel @k grid 1 (%0: {x}, %1: {y}) attributes {{schedule = "row_reduction", num_warps = 1 : i64, num_stages = 1 : i64, vector_width = 4 : i64, shared_bytes = 0 : i64}} {{
    %c0 = arith.constant 0 : index
    %n = arith.constant {rows} : index
    %s = arith.constant {step} : index
    %z = nn.constant 0.0 : tensor<{step}x64xf32>
    %acc = scf.for %i = %c0 to %n step %s iter_args(%a = %z) -> (tensor<{step}x64xf32>) {{
      %t = tile.load %0[%i, %c0] : {x} -> tensor<{step}x64xf32>
      %u = nn.add %a, %t : tensor<{step}x64xf32>
      scf.yield %u : tensor<{step}x64xf32>
    }}
    %r = tile.reduce sum %acc axis 0 : tensor<{step}x64xf32> -> tensor<64xf32>
    tile.store %r, %1[%c0] : tensor<64xf32>, {y}
    tile.return
  }}
  func.func @main(%0: {x}, %1: {y} {{tile.output}}) {{
    tile.launch @k grid [1] (%0, %1) : {x}, {y}
    func.return
  }}
}}
"""


def test_a_loop_variable_is_bounded_by_its_last_value() -> None:
    """Rows 0, 32, ..., 992 of 1024: the last block ends at the buffer's end, so the
    row test goes; of 1000 rows the last block overhangs and it stays."""
    assert "const bool fo_ok = true;" in _source(_row_loop(1024, 32))
    assert "< 1000" in _source(_row_loop(1000, 32))


def test_the_scalar_tail_is_rolled_inside_loops_only() -> None:
    """In a loop the misaligned-or-ragged tail is a rolled loop (ptxas would predicate
    an unrolled one into every iteration); outside loops it stays unrolled."""
    looped = _source(_row_loop(1000, 32))
    assert "#pragma unroll 1" in looped
    straight = _source(_kernel(60, 256, 16, 4, block_cols=256))
    assert "#pragma unroll 1" not in straight and "fo_e[" not in straight
