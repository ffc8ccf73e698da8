"""Reductions over dims that are not innermost (column reductions) and over axes that
are not adjacent (issue 19): what the tiler makes of them, and their numerics through
fuseopt.compile against eager and float64 at tiny, ragged, one-element and uneven
shapes, on the interpreter and the Triton backend.

- A column reduction whose reduced dim kept whole would leave a tile of a few columns
  loops over the reduced dim in tiles of COLUMN_BLOCK columns (coalesced rows);
- `nn-split-reductions` turns a reduction over axes in several runs (first and last)
  into one reduction per run, the last first, f32 in between for sums and means
  (one whole-tensor program before)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from test_frontend_common import randn
from xdsl.dialects.builtin import TensorType, bf16

import fuseopt
from fuseopt.dialects import nn
from fuseopt.passes.convert_nn_to_tile.analysis import REDUCTION, IterationSpace
from fuseopt.passes.convert_nn_to_tile.heuristics import (
    COLUMN_BLOCK,
    TileOptions,
    candidates,
    choose_blocks,
)
from fuseopt.passes.nn_split_reductions import axis_runs


def _space(sizes: tuple[int, ...], reduce_dim: int) -> IterationSpace:
    return IterationSpace(kind=REDUCTION, sizes=sizes, reduce_dim=reduce_dim)


@pytest.mark.parametrize(
    ("sizes", "k", "expected", "looped"),
    [
        ((1024, 32768), 0, {0: 32, 1: COLUMN_BLOCK}, True),  # a column sum: coalesced
        ((64, 1024, 1024), 1, {1: 32, 2: COLUMN_BLOCK}, True),  # a middle axis
        ((300, 20), 0, {0: 64, 1: 32}, True),  # 20 columns: the whole row of 32
        ((64, 4096), 0, {0: 64, 1: 32}, False),  # 64 rows: kept whole, 32 columns
        ((128, 4096), 0, {0: 128, 1: 16}, False),  # 16 columns: whole sectors still
        ((256, 4096), 0, {0: 128, 1: 16}, True),  # 64 columns: 64 programs; 16: 256
        ((4096, 8192), 0, {0: 128, 1: 16}, True),  # argmax(0) of 4096 x 8192: 512, not 128
        ((16, 1024, 8192), 1, {1: 32, 2: COLUMN_BLOCK}, True),  # 16 x 128 programs: enough
        ((1024, 8), 0, {0: 256, 1: 8}, True),  # 8 columns in all: rows fill the tile
        ((4096, 512), 1, {1: 512, 0: 4}, False),  # a row reduction: unchanged
    ],
)
def test_column_blocks(
    sizes: tuple[int, ...], k: int, expected: dict[int, int], looped: bool
) -> None:
    blocks = choose_blocks(_space(sizes, k), TileOptions())
    assert {d: blocks.dims[d] for d in expected} == expected
    assert blocks.looped == looped


def test_forced_sizes_win_and_column_candidates() -> None:
    space = _space((1024, 32768), 0)
    forced = choose_blocks(space, TileOptions(block_rows=2))
    assert forced.dims[1] == 2
    tried = candidates(space, choose_blocks(space, TileOptions()))
    assert tried and all(set(c) == {"block-cols", "block-rows"} for c in tried)


@pytest.mark.parametrize(
    ("axes", "runs"),
    [((0, 2), [[0], [2]]), ((0, 1, 3), [[0, 1], [3]]), ((1,), [[1]]), ((0, 2, 4), [[0], [2], [4]])],
)
def test_axis_runs(axes: tuple[int, ...], runs: list[list[int]]) -> None:
    assert axis_runs(axes) == runs


def test_scattered_axes_become_a_chain() -> None:
    """sum over [0, 2] of bf16: a row sum in f32, then a column sum, then bf16."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import ModuleOp

    from fuseopt.passes.nn_split_reductions import NNSplitReductionsPass

    t = TensorType(bf16, [8, 4, 16])
    f = func.FuncOp("f", ((t,), (TensorType(bf16, [4]),)))
    s = nn.SumOp(f.body.block.args[0], [0, 2])
    f.body.block.add_ops([s, func.ReturnOp(s.results[0])])
    module = ModuleOp([f])
    NNSplitReductionsPass().apply(None, module)  # type: ignore[arg-type]
    sums = [op for op in module.walk() if isinstance(op, nn.SumOp)]
    assert [op.axis_list for op in sums] == [(2,), (0,)]


CASES: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], tuple[int, ...]]] = {
    "sum_first": (lambda x: x.sum(0), (300, 70)),
    "sum_first_one_column": (lambda x: x.sum(0), (513, 1)),
    "sum_middle": (lambda x: x.sum(1), (3, 130, 67)),
    "mean_middle_keepdim": (lambda x: x.mean(1, keepdim=True), (2, 100, 33)),
    "amax_first": (lambda x: x.amax(0), (129, 65)),
    "amin_middle": (lambda x: x.amin(1), (2, 77, 5)),
    "var_first": (lambda x: x.var(0), (200, 9)),
    "softmax_first": (lambda x: torch.softmax(x, 0), (150, 40)),
    "log_softmax_middle": (lambda x: torch.log_softmax(x, 1), (2, 90, 70)),
    "sum_first_last": (lambda x: x.sum((0, 2)), (40, 6, 33)),
    "sum_first_last_keepdim": (lambda x: x.sum((0, 2), keepdim=True), (3, 5, 7)),
    "mean_scattered_4d": (lambda x: x.mean((0, 2, 3)), (6, 3, 5, 4)),  # batch-norm statistics
    "amax_first_last": (lambda x: x.amax((0, 2)), (70, 3, 9)),
    "amin_one_element": (lambda x: x.amin((0, 2)), (1, 1, 1)),
    "sum_0_2_4": (lambda x: (x * 2).sum((0, 2, 4)), (3, 2, 4, 3, 5)),
    "sum_with_unit_axes": (lambda x: x.sum((0, 1, 3, 4)), (3, 1, 4, 1, 5)),
}

TRITON_CASES = [
    "sum_first",
    "sum_middle",
    "amax_first",
    "softmax_first",
    "sum_first_last",
    "mean_scattered_4d",
    "var_first",
]


@pytest.mark.parametrize(
    ("name", "dtype", "backend"),
    [(n, d, "interpret") for n in sorted(CASES) for d in (torch.float32, torch.bfloat16)]
    + [(n, d, "triton") for n in TRITON_CASES for d in (torch.float32, torch.bfloat16)],
    ids=str,
)
def test_column_and_scattered_reductions_match_eager(
    name: str, dtype: torch.dtype, backend: str
) -> None:
    fn, shape = CASES[name]
    x = randn(*shape, dtype=dtype, seed=3) * 2 + 0.25
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend=backend, strict=True)
        got, expected = compiled(x), fn(x)
        reference = fn(x.double())
    assert got.dtype == expected.dtype and got.shape == expected.shape
    scale = max(reference.abs().max().item(), x.double().abs().mean().item(), 1.0)
    error = (got.double() - reference).abs().max().item()
    eager_error = (expected.double() - reference).abs().max().item()
    ulp = 2**-7 if dtype == torch.bfloat16 else 2**-21
    assert error <= max(2 * eager_error, 2 * ulp * scale), (error, eager_error, scale)
    assert compiled.kernels and not compiled.fallbacks
    assert all(k.schedule != "whole_tensor" for k in compiled.kernels), [
        (k.name, k.schedule) for k in compiled.kernels
    ]


def test_size_one_axes_do_not_split_a_reduction() -> None:
    """`torch.instance_norm` called directly (F.instance_norm gets fuseopt's substitute)
    reduces (1, N*C, L) over axes 0 and 2: axis 0 has size 1, so this is one row
    reduction, fused with the normalization into one row kernel (not a chain of
    reductions and a kernel per statistic)."""
    weight, bias = randn(16, seed=4) + 1, randn(16, seed=5)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.instance_norm(x, weight, bias, None, None, True, 0.1, 1e-5, False)

    x = randn(4, 16, 40, seed=6)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="triton", strict=True)
        torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-5)
    rows = [k for k in compiled.kernels if k.schedule.startswith("row_reduction")]
    assert len(rows) == 1, [(k.name, k.schedule) for k in compiled.kernels]
