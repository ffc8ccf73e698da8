"""Attention programs with several independent query tiles (`attention.QUERY_TILES`):
the plan's default, and the kernel against the reference through the tile interpreter
and the Triton interpreter at every edge case of test_attention.py (ragged rows and
keys, causal, masks, packed grouped heads, split keys), with tile counts forced."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from test_attention import CASES, DTYPES, attention_text, case_text, check, make_inputs
from xdsl.dialects import scf

import fuseopt
from fuseopt.backends import targets
from fuseopt.dialects import nn, tile
from fuseopt.passes.convert_nn_to_tile.attention import QUERY_TILES, plan_attention
from fuseopt.pipelines import STANDARD


def _attention(text: str) -> nn.AttentionOp:
    return next(o for o in fuseopt.parse(text).walk() if isinstance(o, nn.AttentionOp))


@pytest.mark.parametrize(
    "q,k,causal,tiles",
    [
        ((4, 16, 2048, 128), (4, 16, 2048, 128), False, QUERY_TILES),  # long prefill
        ((16, 16, 512, 64), (16, 16, 512, 64), False, 1),  # 64-wide heads: slower
        ((4, 16, 2048, 128), (4, 16, 2048, 128), True, QUERY_TILES),  # causal
        ((4, 32, 2048, 64), (4, 32, 2048, 64), True, 1),  # causal, 64-wide: slower
        ((4, 16, 384, 128), (4, 16, 384, 128), True, 1),  # causal, 3 tiles of 128
        ((4, 16, 2048, 256), (4, 16, 2048, 256), False, 1),  # 256-wide heads
        ((1, 16, 1024, 128), (1, 16, 1024, 128), False, 1),  # too few programs
        ((8, 32, 1, 128), (8, 8, 4096, 128), False, 1),  # a decode step
        ((32, 16, 128, 128), (32, 16, 128, 128), False, 1),  # a second tile past the rows
        ((16, 16, 300, 128), (16, 16, 300, 128), False, 1),  # 3 tiles of 128: one dead
        ((16, 16, 500, 128), (16, 16, 500, 128), False, QUERY_TILES),  # ragged, none dead
    ],
)
def test_plan_takes_query_tiles_for_long_attention(
    q: tuple[int, ...], k: tuple[int, ...], causal: bool, tiles: int
) -> None:
    """Two tiles where the programs still fill the GPU with 128-row tiles of 128-wide
    heads, no mask operand and no program with a tile past the last row; one elsewhere
    (and no key split with two). Causal kernels step 64 keys with two tiles, 128 with
    one."""
    plan = plan_attention(_attention(attention_text(q, k, k[-1], "bf16", causal)))
    assert plan.blocks.query_tiles == tiles
    masked = attention_text(q, k, k[-1], "bf16", causal, ((q[0], 1, 1, k[2]), "i1"))
    assert plan_attention(_attention(masked)).blocks.query_tiles == 1  # not measured
    assert plan.blocks.program_rows == plan.blocks.block_m * tiles
    assert tiles == 1 or plan.splits == 1
    if causal and q[-1] == 128:
        assert plan.blocks.block_n == (64 if tiles > 1 else 128)


def test_forced_query_tiles_and_the_cuda_target() -> None:
    """A forced count is taken as it is (split plans included); the CUDA target keeps
    one tile per program even with the block sizes that would qualify."""
    op = _attention(attention_text((2, 8, 1, 32), (2, 2, 600, 32), 32, "bf16", False))
    assert plan_attention(op, 16, 16, 4).blocks.query_tiles == 4
    long = _attention(attention_text((4, 16, 2048, 128), (4, 16, 2048, 128), 128, "bf16"))
    for target, tiles in ((targets.CUDA, 1), (targets.TRITON, QUERY_TILES)):
        forced = target.defaults.tile.attention_query_tiles or 0
        assert plan_attention(long, 128, 64, forced).blocks.query_tiles == tiles


def _forced(tiles: int, bm: int = 16, bn: int = 16) -> str:
    return STANDARD.replace(
        "convert-nn-to-tile",
        f"convert-nn-to-tile{{attention-block-m={bm} attention-block-n={bn} "
        f"attention-query-tiles={tiles}}}",
    )


@pytest.mark.parametrize("tiles", [2, 4])
@pytest.mark.parametrize("case", sorted(CASES))
def test_query_tiles_match_in_the_tile_interpreter(case: str, tiles: int) -> None:
    """Every edge case computes the same with 2 or 4 query tiles of 16 rows per program:
    tiles past the last query row, a causal diagonal crossing several tiles, masks read
    per tile, packed grouped heads and key chunks."""
    module = fuseopt.parse(case_text(case, "f32"))
    inputs = [x.numpy() for x in make_inputs(case, torch.float32)]
    (expected,) = fuseopt.interpret(module, "main", *inputs)
    tiled = fuseopt.run_pipeline(module.clone(), _forced(tiles))
    kernel = next(op for op in tiled.walk() if isinstance(op, tile.KernelOp))
    assert kernel.array_attr("block_sizes") == (1, 1, 16 * tiles, 16)
    carried = []  # the query tiles each key loop updates ((m, l, acc) each)
    for loop in (op for op in kernel.walk() if isinstance(op, scf.ForOp)):
        carried.append(len(loop.iter_args) // 3)
        dots = [op for op in loop.walk() if isinstance(op, tile.DotOp)]
        assert len(dots) == 2 * carried[-1]  # q @ k^T and p @ v per tile
    if CASES[case][3]:  # causal: the whole blocks, then tile t's band for tiles t onwards
        assert carried == [tiles, *range(tiles, 0, -1)]
    else:
        assert set(carried) == {tiles}
    (actual,) = fuseopt.interpret(tiled, "main", *inputs)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


TRITON_CASES = [
    ("causal_ragged_gqa", "bf16"),
    ("additive_row_mask", "f32"),
    ("split_decode_gqa", "bf16"),
    ("plain", "f32"),
]


@pytest.mark.parametrize("case,element", TRITON_CASES, ids=[f"{c}-{e}" for c, e in TRITON_CASES])
def test_query_tiles_match_through_triton(
    case: str, element: str, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:  # noqa: ANN001 - pytest's tmp_path
    """The Triton printer's kernel with two query tiles of 16 rows (Triton's interpreter)."""
    from fuseopt.backends.triton import backend as triton_backend

    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(tmp_path))
    two = replace(targets.TRITON, attention_blocks=(16, 16), attention_query_tiles=2)
    monkeypatch.setattr(triton_backend, "TRITON", two)
    dtype = DTYPES[element]
    inputs = make_inputs(case, dtype)
    compiled = fuseopt.load_mlir(case_text(case, element), backend="triton")
    (got,) = compiled(*inputs)
    check(case, dtype, got, inputs)
