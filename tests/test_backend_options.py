"""Backend options and modes as objects (issue 16): both GPU backends check their options
against their target description, apply forced tile sizes through LoweringOptions, and
honour or refuse every mode; no layer below the API imports it, and no backend edits
pipeline text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import fuseopt
from fuseopt.backends.cuda.backend import CudaBackend, CudaFunction
from fuseopt.backends.cuda_graphs import CudaGraphFunction
from fuseopt.backends.targets import CUDA, TRITON
from fuseopt.diagnostics import ConfigurationError
from fuseopt.passes.convert_nn_to_tile.convert_nn_to_tile import ConvertNNToTilePass
from fuseopt.pipelines import LoweringOptions

ROOT = Path(__file__).resolve().parents[1]

ROWS = """
func.func @rows(%x: tensor<64x256xf32>) -> tensor<64x1xf32> {
  %m = nn.mean %x [1] keepdim : tensor<64x256xf32> -> tensor<64x1xf32>
  %e = nn.exp %m : tensor<64x1xf32>
  func.return %e : tensor<64x1xf32>
}
"""

TWO_KERNELS = """
func.func @two(%x: tensor<64x256xf32>) -> tensor<64x256xf32> {
  %m = nn.softmax %x axis 1 : tensor<64x256xf32>
  %t = nn.transpose %m [1, 0] : tensor<64x256xf32> -> tensor<256x64xf32>
  %s = nn.softmax %t axis 1 : tensor<256x64xf32>
  %b = nn.transpose %s [1, 0] : tensor<256x64xf32> -> tensor<64x256xf32>
  func.return %b : tensor<64x256xf32>
}
"""


def test_cuda_rejects_an_unknown_option_on_a_cpu_machine() -> None:
    compiled = fuseopt.compile(lambda x: x * 2, backend="cuda", not_an_option=1)
    with pytest.raises(ConfigurationError, match="no option.*'not_an_option'.*block_rows"):
        compiled(torch.randn(4))


@pytest.mark.parametrize("mode", ["max-autotune", "max-autotune-no-cudagraphs"])
def test_cuda_tunes_under_the_autotune_modes(mode: str) -> None:
    from fuseopt.backends.cuda.autotune import CudaAutotunedFunction

    fn = CudaBackend().compile(fuseopt.parse(ROWS), "rows", {"mode": mode})
    assert isinstance(fn, CudaAutotunedFunction)  # one launch: no graphs (tests/test_cuda_modes.py)


def test_cuda_applies_forced_tile_sizes() -> None:
    default = CudaBackend().compile(fuseopt.parse(ROWS), "rows", {})
    forced = CudaBackend().compile(fuseopt.parse(ROWS), "rows", {"block_rows": 4})
    assert isinstance(default, CudaFunction) and isinstance(forced, CudaFunction)
    grids = [x.grid for x in forced.host_code.launches]
    assert grids == [(16,)], grids  # 64 rows, 4 per program
    assert [x.grid for x in default.host_code.launches] != grids


def test_cuda_reduce_overhead_replays_graphs_of_multi_kernel_functions() -> None:
    fn = CudaBackend().compile(fuseopt.parse(TWO_KERNELS), "two", {"mode": "reduce-overhead"})
    assert isinstance(fn, CudaGraphFunction)
    assert len(fn.kernels) >= 2  # forwarded to the compiled function
    one = CudaBackend().compile(fuseopt.parse(ROWS), "rows", {"mode": "reduce-overhead"})
    assert isinstance(one, CudaFunction)  # one launch: the direct launch is cheaper


def test_bad_tile_sizes_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="must be an integer"):
        CUDA.lowering({"block_rows": "4"})
    with pytest.raises(ConfigurationError, match="unknown precision"):
        TRITON.lowering({"precision": "f8"})
    with pytest.raises(ConfigurationError, match="is not a tile size"):
        LoweringOptions().forcing({"row-cache-bytes": 4})


def test_lowering_options_build_pass_objects() -> None:
    lowering = TRITON.lowering({"block-rows": 4, "precision": "eager"})
    passes = lowering.passes()
    tiling = next(p for p in passes if isinstance(p, ConvertNNToTilePass))
    assert tiling.block_rows == 4 and tiling.max_row_block == 32768
    assert [p.name for p in passes] == ["convert-nn-to-tile", "tile-promote"]
    assert CUDA.defaults.spec() == (
        "nn-widen-intermediates,convert-nn-to-tile{row_chunk=4096 attention_block_m=64 "
        "attention_block_n=32 attention_query_tiles=1 "
        "row_cache_bytes=98304 scan=false exp2_sums=false},"
        "tile-promote{warp_per_row=true}"
    )


def test_triton_loops_normalization_statistics_past_8192() -> None:
    """The Triton target keeps softmax rows whole up to 32768 but loops a
    normalization's statistics past 8192 in chunks of 4096 (backends/targets.py); a
    forced max_row_block applies to every row, statistics included."""
    tile = TRITON.defaults.tile
    assert (tile.max_row_block, tile.statistics_row_block, tile.statistics_row_chunk) == (
        32768,
        8192,
        4096,
    )
    assert "statistics_row_block=8192" in TRITON.defaults.spec()
    forced = TRITON.lowering({"max_row_block": 32768}).tile
    assert forced.statistics_row_block is None and forced.max_row_block == 32768
    assert CUDA.defaults.tile.statistics_row_block is None


def test_summed_exponentials_in_base_2_on_triton_only() -> None:
    """A softmax's exponentials that a kernel only sums are exp2 on Triton (one ex2:
    libdevice flushes subnormals there) and stay exp on CUDA, whose exp2f keeps them
    at a cost (backends/targets.py)."""
    assert TRITON.defaults.tile.exp2_sums and not CUDA.defaults.tile.exp2_sums
    assert "exp2_sums=false" in CUDA.defaults.spec()
    assert "exp2_sums" not in TRITON.defaults.spec()


def test_triton_keeps_short_reduced_runs_in_one_warp() -> None:
    """Both targets ask tile-promote for fewer warps on whole-row reductions
    (`warp_per_row`; on CUDA a column reduction's totals stay in the lanes' registers,
    test_cuda_emulated's column statistics). A column reduction (a variance over the
    middle axis) launches on one warp under Triton, rows of 1000 on no more warps than
    a program's rows, and the results are right."""
    assert "tile-promote{warp_per_row=true}" in TRITON.defaults.spec()
    assert "tile-promote{warp_per_row=true}" in CUDA.defaults.spec()
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4, 16, 256, generator=generator)
    compiled = fuseopt.compile(lambda t: t.var(1), (x,), backend="triton", strict=True)
    assert [k.launch for k in compiled.kernels] == ["grid (8,), 1 warps, 1 stages"]
    torch.testing.assert_close(compiled(x), x.var(1), rtol=1e-5, atol=1e-5)
    rows = torch.randn(6, 1000, generator=generator)
    compiled = fuseopt.compile(
        lambda t: t.amax(-1) + t.sum(-1), (rows,), backend="triton", strict=True
    )
    assert [k.launch for k in compiled.kernels] == ["grid (3,), 2 warps, 1 stages"]
    # a sum of 1000 terms in another order: a few f32 ulps of the terms' magnitude
    expected = rows.amax(-1) + rows.sum(-1)
    torch.testing.assert_close(compiled(rows), expected, rtol=1e-5, atol=1e-4)


def test_triton_gives_a_looped_bf16_column_variance_one_warp() -> None:
    """tile-promote recognizes the per-lane statistics that convert-nn-to-tile emits for a
    looped column variance (`carries_lane_statistics`: the loop's first-step select of a
    pilot) and, for a 16-bit input, gives the Triton kernel one warp; the f32 variance
    and a plain column sum keep four."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(1, 2048, 16, generator=generator).to(torch.bfloat16)
    variance = fuseopt.compile(lambda t: t.var(1), (x,), backend="triton", strict=True)
    assert [k.schedule for k in variance.kernels] == ["row_reduction_looped"]
    assert "1 warps" in variance.kernels[0].launch
    as_f32 = fuseopt.compile(lambda t: t.var(1), (x.float(),), backend="triton", strict=True)
    assert "4 warps" in as_f32.kernels[0].launch
    total = fuseopt.compile(lambda t: t.sum(1), (x,), backend="triton", strict=True)
    assert "4 warps" in total.kernels[0].launch
    expected = x.double().var(1)
    torch.testing.assert_close(variance(x).double(), expected, rtol=1e-2, atol=1e-3)


def _sources(*folders: str) -> list[Path]:
    return [p for f in folders for p in (ROOT / f).rglob("*.py")]


def test_nothing_below_the_api_imports_it() -> None:
    """Backends, passes, frontends and dialects import down: never `fuseopt.api`; and
    backends, passes and dialects import no frontend."""
    api = re.compile(r"^\s*(from fuseopt\.api import|import fuseopt\.api|from fuseopt import api)")
    front = re.compile(r"^\s*(from|import) fuseopt\.frontends")
    for path in _sources("backends", "passes", "frontends", "dialects"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            assert not api.match(line), f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
            if path.parts[len(ROOT.parts)] != "frontends":
                assert not front.match(line), f"{path.relative_to(ROOT)}:{n}: {line.strip()}"


def test_no_backend_splices_pipeline_text() -> None:
    """Backends build their tile stage from pass objects: no `.replace` on pipeline
    text (a pass name inside a replace call)."""
    splice = re.compile(r"\.replace\(\s*[\"'](convert-nn-to-tile|tile-promote|nn-fuse)")
    for path in _sources("backends"):
        text = path.read_text()
        assert not splice.search(text), path.relative_to(ROOT)


def test_named_pipelines_are_pass_objects_matching_their_text() -> None:
    from fuseopt.pipelines import (
        FUSE,
        PIPELINES,
        STANDARD,
        pipeline_passes,
        pipeline_spec,
        run_pipeline,
    )

    assert pipeline_spec(pipeline_passes("fuse")) == FUSE
    assert pipeline_spec(pipeline_passes("standard")) == STANDARD
    assert set(PIPELINES) == {"fuse", "standard"}
    cuda = pipeline_spec(pipeline_passes("standard", CUDA.defaults))
    # the CUDA target does not turn written-out attention into its (slow) kernel
    assert cuda == FUSE.removeprefix("nn-match-attention,") + "," + CUDA.defaults.spec()
    with pytest.raises(fuseopt.CompileError, match="no pipeline named 'tile'"):
        pipeline_passes("tile")
    by_name = run_pipeline(fuseopt.parse(TWO_KERNELS), "standard")
    by_text = run_pipeline(fuseopt.parse(TWO_KERNELS), STANDARD)
    assert str(by_name) == str(by_text)


def test_targets_declare_their_facts_once() -> None:
    from fuseopt.passes.convert_nn_to_tile.heuristics import MAX_ROW_BLOCK, TileOptions
    from fuseopt.passes.tile_promote import ROW_CACHE_BUDGET, SHARED_BUDGET

    assert (TRITON.max_row_block, TRITON.row_chunk, TRITON.row_cache_bytes) == (32768, 2048, 0)
    assert (CUDA.max_row_block, CUDA.row_chunk) == (MAX_ROW_BLOCK, 4096)
    assert CUDA.row_cache_bytes == ROW_CACHE_BUDGET
    assert TRITON.shared_bytes == CUDA.shared_bytes == SHARED_BUDGET
    for target in (TRITON, CUDA):
        tile = target.defaults.tile
        assert (tile.max_row_block, tile.row_chunk, tile.row_cache_bytes) == (
            target.max_row_block,
            target.row_chunk,
            target.row_cache_bytes,
        )
    # the pass's options are TileOptions' fields: one list
    from dataclasses import fields

    tiler = {f.name for f in fields(ConvertNNToTilePass)} - {"name"}
    assert tiler == {f.name for f in fields(TileOptions)}
    for path in _sources("backends", "passes"):
        for line in path.read_text().splitlines():
            assert not re.match(r"\s*MAX_ROW_BLOCK\s*=", line) or path.name == "heuristics.py"


def test_no_autotuner_edits_generated_source() -> None:
    """Tuning variants are re-lowered or re-printed, never edited as text."""
    for path in (ROOT / "backends" / "autotune.py", ROOT / "backends" / "cuda" / "autotune.py"):
        assert ".replace(" not in path.read_text(), path.relative_to(ROOT)
