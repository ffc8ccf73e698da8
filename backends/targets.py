"""What each backend's target is, as objects: the facts its lowering depends on.

A `TargetDescription` declares, once per backend, the target facts that tiling and
memory promotion read: the longest row a program keeps whole, the chunk a looped row
reduction reads per step, the shared memory a program may use and the part of it the
row cache holds. A backend builds its tile stage from `lowering(options)`: the
target's `LoweringOptions` (`defaults`) with the user's forced tile sizes and numerics
policy applied, run as pass objects (`fuseopt.pipelines.pipeline_passes`). No pipeline
text is edited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from fuseopt.diagnostics import ConfigurationError
from fuseopt.passes.convert_nn_to_tile.heuristics import (
    FORCEABLE,
    MAX_ROW_BLOCK,
    ROW_CHUNK,
    TileOptions,
)
from fuseopt.passes.tile_promote import ROW_CACHE_BUDGET, SHARED_BUDGET
from fuseopt.pipelines import PRECISIONS, LoweringOptions


@dataclass(frozen=True)
class TargetDescription:
    """A backend's target (`name`) and its facts:

    - `max_row_block`: the longest row (elements, a power of two) one program keeps
      whole before a row reduction loops over chunks;
    - `row_chunk`: columns per step of such a loop;
    - `statistics_row_block`, `statistics_row_chunk`: the same two for kernels that
      compute a normalization's mean and variance (0: as other rows); the first also
      for kernels that store only a softmax's per-row statistics (a loss's
      log-sum-exp, `heuristics.group_options`);
    - `row_cache_bytes`: shared memory per program the target's row cache holds (0: no
      row cache); the tiler keeps one loop per reduction level for rows that fit;
    - `shared_bytes`: shared memory one program may use (memory promotion's budget);
    - `attention_blocks`: queries per query tile and keys per step of attention kernels
      ((0, 0): the tiler's heuristic);
    - `attention_query_tiles`: query tiles per attention program (0: the tiler's
      heuristic, two for long attention with 128-wide heads; the CUDA target keeps one, its
      printer's kernel was not measured with two);
    - `scan`: whether the target lowers `nn.cumsum` to scan kernels (the CUDA printer
      prints those only as its line-per-thread scan, no faster than its whole-tensor
      kernel, so the CUDA target keeps the whole-tensor lowering);
    - `warp_per_row`: whether tile-promote gives whole-row reductions (and looped
      per-lane variances of 16-bit inputs) fewer warps
      (`heuristics.warp_per_row_warps`: Triton reduces across warps through shared
      memory and a barrier once per reduce, and spreads warps over a tile's outer dims,
      which a column reduction reduces; the CUDA printer's column reductions go
      through shared memory anyway);
    - `exp2_sums`: whether a softmax's exponentials that a kernel only sums are `exp2`
      of the deviation in base 2 (one hardware ex2 where the printer's `exp2` is
      that; `heuristics.TileOptions.exp2_sums`);
    - `attention`: the frontend's default `attention` option on this target ("fused":
      PyTorch's SDPA becomes nn.attention and this target's kernel; "eager": PyTorch's
      own kernel runs it).
    """

    name: str
    max_row_block: int = MAX_ROW_BLOCK
    row_chunk: int = ROW_CHUNK
    statistics_row_block: int = 0
    statistics_row_chunk: int = 0
    row_cache_bytes: int = 0
    shared_bytes: int = SHARED_BUDGET
    attention_blocks: tuple[int, int] = (0, 0)
    attention_query_tiles: int = 0
    attention: str = "fused"
    scan: bool = True
    warp_per_row: bool = False
    exp2_sums: bool = True

    @property
    def defaults(self) -> LoweringOptions:
        """How this target lowers when the user forces nothing."""
        tile = TileOptions(
            max_row_block=self.max_row_block,
            row_chunk=self.row_chunk,
            statistics_row_block=self.statistics_row_block or None,
            statistics_row_chunk=self.statistics_row_chunk or None,
            row_cache_bytes=self.row_cache_bytes,
            attention_block_m=self.attention_blocks[0] or None,
            attention_block_n=self.attention_blocks[1] or None,
            attention_query_tiles=self.attention_query_tiles or None,
            scan=self.scan,
            exp2_sums=self.exp2_sums,
        )
        return LoweringOptions(
            tile,
            shared_bytes=self.shared_bytes,
            warp_per_row=self.warp_per_row,
            match_attention=self.attention == "fused",
        )

    def option_names(self) -> set[str]:
        """The backend options that set the lowering: `precision` and the forced tile
        sizes, each as `block-rows` and `block_rows`."""
        return {"precision", *FORCEABLE, *(n.replace("_", "-") for n in FORCEABLE)}

    def lowering(self, options: Mapping[str, Any]) -> LoweringOptions:
        """The defaults with the lowering options among `options` applied (others are
        ignored here: the backend checks unknown keys)."""
        precision = options.get("precision", self.defaults.precision)
        if precision not in PRECISIONS:
            raise ConfigurationError(
                f"unknown precision {precision!r}; precisions are: {', '.join(PRECISIONS)}"
            )
        sizes = {k: v for k, v in options.items() if k.replace("-", "_") in FORCEABLE}
        for k, v in sizes.items():
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigurationError(f"tile size {k}={v!r} must be an integer")
        return replace(self.defaults, precision=str(precision)).forcing(sizes)


TRITON = TargetDescription(
    "triton",
    max_row_block=32768,
    statistics_row_block=8192,
    statistics_row_chunk=4096,
    warp_per_row=True,
)
"""Triton: rows up to 32768 elements stay whole in one program's registers (up to 32
warps). Triton has no shared-memory row cache, so the looped schedule (the tiler's
default past 8192) reads a row from HBM once per pass (three for softmax); one pass
reads it once.

Whole-row reductions get fewer warps (`warp_per_row`): variances over the middle axis
of 1024x64x512, 256x128x1024 and 8192x16x256 took 27.5, 29.7 and 26.1 us of kernel time
with one warp, 105, 85 and 301 us with four (H100, bf16, 2026-11-27, a development
sweep with warps forced; the committed on/off record is
benchmarks/results/nvidia-h200/warp_per_row_02efa32).

A normalization's statistics loop past 8192 all the same, in chunks of 4096: per lane
(Welford) they cost no cross-thread reduction per chunk, and the store loop's re-read
mostly hits L2. bf16 layer norms on an H200 (2026-11-26, kernel us, whole row / looped
by 4096 / torch.compile): 8192 x 16384 249 / 162 / 132; 4096 x 12000 120 / 61 / 91;
2048 x 32768 94 / 96 / 105; group norm 32 x 256 x 56 x 56 statistics 59 / 60 / 29.
So does a kernel that stores only a softmax's per-row statistics (a cross-entropy's
log-sum-exp), in the usual chunks of 2048: online, its loop reads the row once too, and
four warps a program where a whole 32000-wide row held one 32-warp program per SM
(cross-entropy over 8192 x 32000 bf16 logits on an H200: 262 -> 144 us with the
exponentials summed in base 2, `heuristics.group_options`)."""

CUDA_ROW_CHUNK = 4096
"""Columns per step of a looped row reduction on CUDA (the tiler's default is 2048). With
the row cached in shared memory (64 KiB for a 32768-wide bf16 row) only three programs
fit an SM, so each needs more threads: 4096-column chunks give 8 warps instead of 4. On
an H200 (2026-11-22, same run): 32768-wide softmax 95.2 -> 74.5 us (1k rows), 328.3 ->
253.3 (4k rows); 1024x131072 online softmax 301.3 -> 290.1, layernorm 263.1 -> 263.2."""

CUDA = TargetDescription(
    "cuda",
    row_chunk=CUDA_ROW_CHUNK,
    row_cache_bytes=ROW_CACHE_BUDGET,
    attention_blocks=(64, 32),
    attention_query_tiles=1,
    attention="eager",
    scan=False,
    warp_per_row=True,
    exp2_sums=False,
)
"""CUDA: a looped row reduction whose rows fit tile-promote's shared-memory row cache
(`row_cache_bytes`, the same number as tile-promote's ROW_CACHE_BUDGET) keeps one loop
per reduction level: HBM is read once either way, and each loop folds its reduction per
thread and combines across the block once, while the online form needs a block-wide
combine per chunk (on the H100, 32768-wide bf16 softmax rows took 109 us instead of
101 us with it, 4096 rows 359 instead of 329). Longer rows, which the cache cannot hold,
compute their statistics online: one read fewer from HBM (1024x131072 softmax: 324 us
online, 378 us with three loops). Looped rows go in chunks of CUDA_ROW_CHUNK. Attention
kernels take 64 queries and 32 keys a step: the printer stages every dot operand and
accumulator in shared memory, and the Triton sizes (128 x 64) need more than a block
may have. At those sizes the kernel is correct but slow (about 30 TFLOP/s at head dim
128 on an H200, against 460-490 for the Triton kernel and 600+ for cuDNN), so the
frontend leaves SDPA to PyTorch's kernel on this target (`attention="eager"`; pass
`attention="fused"` to compile it): with the fused kernel the model suite's Llama
prefill took 6.7 ms instead of 2.3. A variance over a non-innermost dim keeps its
statistics per lane in one pass, as on Triton: with its step count one uniform register
(`cuda/uniform_carries.py`) the loop has no barrier (H200, bf16, kernel us, one device
call: `x.var(0)` of 65536 x 1024 107 -> 64, `x.var(1)` of 64 x 1024 x 1024 104 -> 60,
against a loop per level that reads the input twice). Whole-row reductions get fewer
warps (`warp_per_row`), as on Triton, since a column reduction's totals stay in the
lanes' registers (`reduce.py`'s colred) and one warp needs no shared memory at all:
H200, bf16, kernel us, one device call (benchmarks/results/nvidia-h200/
cuda_chunk_addressing_086db57, call 3 at 5ea1c47), four warps -> warp_per_row: `x.var(1)` of
1024 x 64 x 512 56.4 -> 24.9, `x.sum(1)` of the same 27.1 -> 20.5, `x.var(0)` of
65536 x 1024 66.2 -> 60.3, `x.sum(0)` of 64 x 1024 x 1024 52.7 -> 46.1. A softmax's summed
exponentials stay `expf` (`exp2_sums=False`): this printer's `exp2f` keeps subnormal
results, which nvcc compiles to a compare, a predicated scaling and the ex2 per element
sharing one predicate register, a chain that made the looped cross-entropy kernels
slower although shorter (H200, bf16, kernel us, one device call, `expf` -> `exp2f`:
4096 x 128256 logits 584 -> 695, 2048 x 151936 357 -> 426, 8192 x 32000 275 -> 267)."""

TARGETS = {t.name: t for t in (TRITON, CUDA)}
"""The GPU backends' targets, by backend name."""
