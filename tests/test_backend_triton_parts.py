"""Slices and concats (split dims, `analysis`) on the Triton path (issue 14):
programs that compile for CUDA compile for Triton too and match eager, with
exact-shape outputs.

- a row reduction over rows cut into parts (an RMS norm of a slice [1000, 3] ->
  [1000, 2]) used to get a non-power-of-two row block (2048 // 3 = 682 rows); every
  block the heuristics choose is now a power of two, whatever the parts;
- a looped reduction over a concat's dim (`log_softmax(cat([x, x], 2), 2)`) reads its
  row cache, whose rank is below the source's, through the source: the Triton printer
  maps shared-memory reads across ranks;
- neighbouring shapes: odd sizes, one element, three pieces, slices at offsets.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from test_triton_kernels import check_each_kernel

import fuseopt
from fuseopt.passes.convert_nn_to_tile.analysis import POINTWISE, REDUCTION, IterationSpace
from fuseopt.passes.convert_nn_to_tile.heuristics import TileOptions, choose_blocks

TILE_PIPELINE = "nn-decompose,canonicalize,cse,nn-fuse,convert-nn-to-tile,tile-promote"
"""The tile pipeline as the report ran it (no numerics passes: they do not change how a
group is tiled)."""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(cache))
    return cache


def _is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


@pytest.mark.parametrize("kind", [REDUCTION, POINTWISE])
def test_blocks_are_powers_of_two_whatever_the_parts(kind: str) -> None:
    for rows, part, parts in itertools.product(
        (1, 3, 682, 1000, 4097), (1, 2, 3, 5, 100), (1, 2, 3, 5, 7)
    ):
        space = IterationSpace(
            kind, [rows, part], reduce_dim=1 if kind == REDUCTION else None, split_dim=1,
            parts={"x": parts},  # type: ignore[dict-item]
        )  # fmt: skip
        blocks = choose_blocks(space, TileOptions())
        assert all(_is_pow2(b) for b in blocks.dims.values()), (rows, part, parts, blocks)
        assert part % blocks.dims[1] == 0  # a block never straddles two parts


def rms_of_slice(a: int, b: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """RMS norm (the report's pattern) of columns a:b."""

    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = x[:, a:b]
        return y * torch.rsqrt(torch.mean(y * y, -1, keepdim=True) + 1e-6) * w

    return f


def log_softmax_of_cat(
    pieces: int, cat_dim: int, dim: int
) -> Callable[[torch.Tensor], torch.Tensor]:
    """log_softmax over `dim` of `pieces` scaled copies concatenated along `cat_dim`."""

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(torch.cat([x * (i + 1) for i in range(pieces)], cat_dim), dim)

    return f


CASES: dict[str, tuple[Callable[..., torch.Tensor], tuple[tuple[int, ...], ...]]] = {
    # the report's two programs
    "rms_slice_1000x3_0_2": (rms_of_slice(0, 2), ((1000, 3), (2,))),
    "log_softmax_cat2_dim2": (log_softmax_of_cat(2, 2, 2), ((1, 2, 3, 100),)),
    # neighbours: offsets, odd sizes, one element, three pieces, other dims
    "rms_slice_1000x3_1_3": (rms_of_slice(1, 3), ((1000, 3), (2,))),
    "rms_slice_7x5_1_4": (rms_of_slice(1, 4), ((7, 5), (3,))),
    "rms_slice_1x1": (rms_of_slice(0, 1), ((1, 1), (1,))),
    "rms_slice_9x3_1_2": (rms_of_slice(1, 2), ((9, 3), (1,))),
    "rms_slice_33x100_10_73": (rms_of_slice(10, 73), ((33, 100), (63,))),
    "log_softmax_cat3_dim2": (log_softmax_of_cat(3, 2, 2), ((2, 3, 5),)),
    "log_softmax_cat2_last": (log_softmax_of_cat(2, 2, -1), ((2, 5, 33),)),
    "log_softmax_cat3_1x1x1": (log_softmax_of_cat(3, 2, 2), ((1, 1, 1),)),
    "log_softmax_cat3_dim1_of_3": (log_softmax_of_cat(3, 1, 1), ((4, 1, 9),)),
    "log_softmax_cat2_dim0": (log_softmax_of_cat(2, 0, 0), ((3, 7),)),
}
"""name -> (program, input shapes)."""


@pytest.mark.parametrize("name", list(CASES))
def test_split_dims_compile_for_triton_and_match_eager(name: str) -> None:
    fn, shapes = CASES[name]
    gen = torch.Generator().manual_seed(0)
    args = tuple(torch.randn(s, generator=gen).to(torch.bfloat16) for s in shapes)
    compiled = fuseopt.compile(fn, args, backend="triton", strict=True)
    got, want = compiled(*args), fn(*args)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=7e-2)


@pytest.mark.parametrize(
    "name", ["rms_slice_1000x3_0_2", "log_softmax_cat2_dim2", "rms_slice_7x5_1_4"]
)
def test_split_dim_kernels_match_the_tile_interpreter(name: str, tmp_path: Path) -> None:
    """Each kernel of the report's tiling (pipeline without numerics passes) printed as
    Triton against the tile interpreter."""
    fn, shapes = CASES[name]
    args = tuple(torch.randn(s).to(torch.bfloat16) for s in shapes)
    text = fuseopt.export(fn, args)
    check_each_kernel(fuseopt.run_pipeline(fuseopt.parse(text), TILE_PIPELINE), tmp_path)
