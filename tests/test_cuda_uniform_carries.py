"""The CUDA printer carries a loop's uniform tiles in one register (`uniform_carries`).

A step count carried as a tile of equal elements (a per-lane variance's) stays a scalar:
its broadcasts into the chunk tiles need no shared memory and the loop no barrier. A
carry that reads a loaded tile, directly or through another carry, stays a register
tile. Each kernel runs emulated (g++) against the reference interpreter.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

import fuseopt
from fuseopt.backends.cuda.backend import CudaFunction
from fuseopt.backends.cuda.emulation import EmulatedFunction, emulator_available
from fuseopt.backends.cuda.printer import print_cuda

ATTRIBUTES = (
    'schedule = "row_reduction_looped", iteration_sizes = array<i64: 6, 64>, '
    "block_sizes = array<i64: 1, 64>, reduce_dim = 0 : i64, num_warps = 2 : i64, "
    "num_stages = 1 : i64, vector_width = 4 : i64, shared_bytes = 0 : i64"
)


X, Y, ROW = "memref<6x64xf32>", "memref<1x64xf32>", "tensor<1x64xf32>"
"""The kernels' input, output and row tile types."""


def _module(body: str) -> str:
    """Kernel @k over x [6, 64] -> y [1, 64] (`body`: its ops after the index constants
    %c0 and %c1, up to its store) and the @main that launches it."""
    return f"""
builtin.module {{
  tile.kernel @k grid 1 (%0: {X}, %1: {Y}) attributes {{{ATTRIBUTES}}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
{body}
    tile.return
  }}
  func.func @main(%0: {X}, %1: {Y} {{tile.output}}) {{
    tile.launch @k grid [1] (%0, %1) : {X}, {Y}
    func.return
  }}
}}
"""


def _kernel(step_update: str, weight_source: str) -> str:
    """Rows of x [6, 64] weighted by 1 / steps and summed: `steps` starts at 0 and is
    updated by `step_update` (`%n` the carried steps, `%x` the loaded row); the sum's
    weight is 1 / steps with `weight_source` in place of the steps."""
    return _module(f"""    %c6 = arith.constant 6 : index
    %zero = nn.constant 0.0 : {ROW}
    %steps, %total = scf.for %i = %c0 to %c6 step %c1 iter_args(%n = %zero, %s = %zero) -> ({ROW}, {ROW}) {{
      %x = tile.load %0[%i, %c0] : {X} -> {ROW}
      %one = nn.constant 1.0 : {ROW}
      %n2 = {step_update}
      %w = nn.div %one, {weight_source} : {ROW}
      %term = nn.mul %x, %w : {ROW}
      %s2 = nn.add %s, %term : {ROW}
      scf.yield %n2, %s2 : {ROW}, {ROW}
    }}
    %out = nn.add %total, %steps : {ROW}
    tile.store %out, %1[%c0, %c0] : {ROW}, {Y}""")


UNIFORM = _kernel("nn.add %n, %one : tensor<1x64xf32>", "%n2")
"""steps + 1 each step: uniform (a scalar carry)."""

FROM_LOAD = _kernel("nn.add %n, %x : tensor<1x64xf32>", "%n2")
"""steps + x: not uniform (reads the loaded row)."""

THROUGH_CARRY = _kernel("nn.add %n, %s : tensor<1x64xf32>", "%one")
"""steps + the running sum, which reads the loaded row: not uniform either (the sum's
carry is dropped first, then this one)."""


def _compile(text: str) -> tuple[CudaFunction, str]:
    module = fuseopt.parse(text)
    source = print_cuda(module)
    return CudaFunction(module, "main", source), source[0].source


def _check_numerics(text: str, fn: CudaFunction, tmp_path: Path) -> None:
    if not emulator_available():
        pytest.skip("g++ is not installed")
    x = np.random.default_rng(3).standard_normal((6, 64)).astype(np.float32) + 2.0
    (expected,) = fuseopt.interpret(fuseopt.parse(text), "main", x)
    (got,) = EmulatedFunction(fn, tmp_path)(torch.from_numpy(x))
    np.testing.assert_allclose(got.numpy(), np.asarray(expected), rtol=1e-5)


def test_a_step_count_is_one_register_and_the_loop_has_no_barrier(tmp_path: Path) -> None:
    fn, source = _compile(UNIFORM)
    assert re.search(r"^\s*float acc = c;", source, re.M)  # the steps: one register
    assert re.search(r"^\s*alignas\(16\) float acc_1\[", source, re.M)  # the sum: a tile
    loop = source.split("for (long long iv")[1].split("\n  }\n")[0]
    assert "__syncthreads" not in loop
    _check_numerics(UNIFORM, fn, tmp_path)


def test_a_carry_reading_a_load_stays_a_tile(tmp_path: Path) -> None:
    fn, source = _compile(FROM_LOAD)
    assert re.search(r"^\s*alignas\(16\) float acc\[", source, re.M)
    _check_numerics(FROM_LOAD, fn, tmp_path)


def test_a_carry_reading_a_tile_carry_stays_a_tile(tmp_path: Path) -> None:
    fn, source = _compile(THROUGH_CARRY)
    assert re.search(r"^\s*alignas\(16\) float acc\[", source, re.M)
    assert re.search(r"^\s*alignas\(16\) float acc_1\[", source, re.M)
    _check_numerics(THROUGH_CARRY, fn, tmp_path)


def _rotation(kind: str, yielded: str, body: str = "") -> str:
    """Two carries a (init 1) and b (init 2) of `kind` ("uniform": splats; "tile": b starts
    from a load, so it is a register tile) over 5 steps yielding `yielded`; stores 10 a + b."""
    init_b = "%two" if kind == "uniform" else "%loaded"
    return _module(f"""    %c5 = arith.constant 5 : index
    %one = nn.constant 1.0 : {ROW}
    %two = nn.constant 2.0 : {ROW}
    %ten = nn.constant 10.0 : {ROW}
    %loaded = tile.load %0[%c0, %c0] : {X} -> {ROW}
    %ra, %rb = scf.for %i = %c0 to %c5 step %c1 iter_args(%a = %one, %b = {init_b}) -> ({ROW}, {ROW}) {{
      {body}
      scf.yield {yielded} : {ROW}, {ROW}
    }}
    %t = nn.mul %ra, %ten : {ROW}
    %out = nn.add %t, %rb : {ROW}
    tile.store %out, %1[%c0, %c0] : {ROW}, {Y}""")


@pytest.mark.parametrize("kind", ["uniform", "tile"])
@pytest.mark.parametrize(
    ("yielded", "body"),
    [
        ("%b, %a", ""),  # a swap
        ("%a2, %a", "%a2 = nn.add %a, %one : tensor<1x64xf32>"),  # the previous value
        (
            "%a2, %prev",  # the previous value through a broadcast, which keeps a register
            "%a2 = nn.add %a, %one : tensor<1x64xf32>\n"
            "      %prev = tile.broadcast %a dims [0, 1] : tensor<1x64xf32> -> tensor<1x64xf32>",
        ),
    ],
    ids=["swap", "previous", "previous_relabeled"],
)
def test_a_yield_assigns_all_carries_at_once(
    kind: str, yielded: str, body: str, tmp_path: Path
) -> None:
    """A carry yielded as another (or a broadcast of a uniform one, which keeps its
    register) is read before any carry takes its new value (uniform or tile carries)."""
    text = _rotation(kind, yielded, body)
    fn, _ = _compile(text)
    _check_numerics(text, fn, tmp_path)
