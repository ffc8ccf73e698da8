"""Tile sizes and promotion knobs: every heuristic of the tile level, in one place.

convert-nn-to-tile asks `choose_blocks` for block sizes; tile-promote asks
`launch_knobs` for num_warps / num_stages / vector width (and, under its `warp-per-row`
option, `warp_per_row_warps` for fewer warps on whole-row reductions and looped
per-lane variances). All tile dims
are powers of two (Triton's rule). Pass options force any size (`TileOptions`);
`candidates` lists a few alternatives that an autotuner can try by re-running the pass
with them forced.

The rules (element counts are per program; H100: 4 warps x 32 threads x 8 elements of
16 bytes ~ 1024 bf16 per vectorized sweep):

- pointwise, flat: BLOCK = min(next_pow2(n), 1024);
- pointwise, 2-D (broadcasts): BLOCK_COLS = min(next_pow2(cols), 256), rows to fill
  about 1024 elements; with a transposed value, the tiled dims are the longest suffix
  every buffer holds as its last axes (`analysis._tiling_for_transposes`):
  two dims get 64 x 64 tiles (TRANSPOSE_BLOCK), three dims the innermost whole (up to
  256) and the outer ones filling 4096 elements;
- row reduction: the whole row in one program when next_pow2(row) <= max_row_block
  (8192), with several rows per program for short rows (about 2048 elements); longer
  rows loop over chunks of 2048 (one row per program; `row-chunk` sets it);
- column reduction (over a dim that is not innermost): the reduced dim whole as above
  while that leaves 16 columns or more per tile (NARROW_COLUMNS), else 64 columns
  (COLUMN_BLOCK) and 32 rows per step, looping over the reduced dim (rows of a few
  bytes waste most of every sector read); down to 16 columns when 64 would leave
  fewer than COLUMN_PROGRAMS programs;
- matmul: BM = BN = 128 (64 when the dim is <= 64, down to 16), BK = 64 (down to 16
  for short K), GROUP_M = 8 for grouped (L2-friendly) program order; a dual GEMM
  (two accumulators) caps BN at 64;
- no tile may exceed MAX_TILE_ELEMENTS (2^20) elements: forced sizes past it are a
  located error.

Backends set some of these knobs through the same options, from their target
descriptions (backends/targets.py), not rules of their own:
- Triton passes `max-row-block=32768` (TRITON): Triton has no shared-memory row cache,
  so keeping rows up to 32768 whole in one program reads them from HBM once, where
  looping would read them twice; kernels whose loop reads them once all the same (a
  normalization's statistics, per lane; a softmax's statistics stored per row, online)
  loop past `statistics-row-block=8192` (`group_options`);
- Triton asks tile-promote for `warp-per-row` (`warp_per_row_warps`);
- CUDA passes `row-cache-bytes` = tile-promote's row-cache budget: a looped reduction
  whose rows its row cache holds keeps one loop per reduction level (re-reads hit
  shared memory), longer rows compute their statistics online (`online`); and
  `row-chunk=4096` (CUDA_ROW_CHUNK).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

from xdsl.ir import Operation, SSAValue

from fuseopt.dialects import tile
from fuseopt.passes.convert_nn_to_tile.analysis import MATMUL, POINTWISE, REDUCTION, IterationSpace
from fuseopt.passes.convert_nn_to_tile.online import softmax_statistics_only
from fuseopt.passes.reduction_pairs import computes_variance

MAX_ROW_BLOCK = 8192
"""Longest row (elements, a power of two) kept whole in one program's registers."""
TRANSPOSE_BLOCK = 64
"""Rows and columns of a pointwise tile when a value is transposed across its last two
dims: 64 x 2 bytes = 128-byte runs in both the transposed and the straight buffers."""
MAX_TILE_ELEMENTS = 1 << 20
"""Most elements one tile may hold (Triton's limit on a tensor; far past what fits a
program's registers). The heuristic stays well under it; forced sizes may not."""
ROW_CHUNK = 2048
"""Column chunk of a looped (long-row) reduction."""
POINTWISE_BLOCK = 1024
"""Elements per program of a pointwise kernel."""
NARROW_COLUMNS = 16
"""Fewest columns a column reduction's tile may keep the reduced dim whole with (16 x 2
bytes: one whole 32-byte sector per row of a 16-bit tile)."""
COLUMN_PROGRAMS = 264
"""Fewest programs a column reduction's grid should have (two per SM of an H100, as
nn-split-reductions' `max_rows`): below it the column block narrows (`_column_blocks`)."""
COLUMN_BLOCK = 64
"""Columns of a column reduction's tile (a reduction over a dim that is not innermost)
when keeping the reduced dim whole would leave fewer: 64 x 2 bytes = 128-byte rows,
whole sectors (the tile loops over the reduced dim in rows of 2048 / 64)."""


@dataclass(frozen=True)
class TileOptions:
    """Forced tile sizes (None: use the heuristic). Values must be powers of two."""

    block: int | None = None
    """Elements per program of a flat pointwise kernel."""
    block_rows: int | None = None
    """Rows per program (2-D pointwise, row reductions)."""
    block_cols: int | None = None
    """Columns per program: the row block, or the chunk of a looped row."""
    block_m: int | None = None
    """Matmul output rows per program."""
    block_n: int | None = None
    """Matmul output columns per program."""
    block_k: int | None = None
    """Matmul reduction step."""
    group_m: int | None = None
    """Matmul programs grouped along M (for L2 reuse)."""
    max_row_block: int = MAX_ROW_BLOCK
    """Longest row kept whole before a reduction loops over chunks."""
    row_chunk: int = ROW_CHUNK
    """Column chunk of a looped row reduction (unless block-cols forces one)."""
    statistics_row_block: int | None = None
    """Longest row a kernel computing a normalization's mean and variance keeps whole
    (None: `max_row_block`); longer rows loop, accumulating the statistics per lane."""
    statistics_row_chunk: int | None = None
    """Column chunk of such a looped kernel (None: `row_chunk`)."""
    attention_block_m: int | None = None
    """The most queries per query tile of an attention kernel (halved for head dims above
    128; None: 128; see `choose_attention_blocks`)."""
    attention_block_n: int | None = None
    """The most keys per step of an attention kernel's key loop (halved for head dims
    above 128; None: 64)."""
    attention_query_tiles: int | None = None
    """Independent query tiles per attention program (1: one; None: the tiler's choice,
    `attention.takes_query_tiles`)."""
    online_stats: bool = True
    """Looped softmax/variance/argmax statistics in one pass (`online`)."""
    column_statistics: bool = True
    """A variance or an argmax over a non-innermost dim accumulates per lane in its
    first level's loop (one read of the input; `online.per_lane`); false: a loop per
    level (two reads)."""
    row_cache_bytes: int = 0
    """Shared memory per program of the backend's row cache (tile-promote's budget; 0:
    no row cache). A looped reduction whose input rows fit keeps one loop per level
    (the cache makes re-reads cheap) instead of online statistics."""
    scan: bool = True
    """`nn.cumsum` as a scan kernel (`scan.py`); false: a one-program whole-tensor
    kernel (for a backend that cannot print a scan of a tile)."""
    exp2_sums: bool = True
    """A softmax's exponentials that a kernel only sums are `exp2` of the deviation
    times log2(e) (`reduction_pairs.softmax_exponentials`); false: `exp`."""

    def check(self) -> None:
        """Raise ValueError for a forced size that is not a positive power of two (or a
        negative row-cache-bytes)."""
        if self.row_cache_bytes < 0:
            raise ValueError(f"row-cache-bytes={self.row_cache_bytes} must be >= 0")
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or f.name == "row_cache_bytes":
                continue
            if v is not None and (v < 1 or v & (v - 1)):
                raise ValueError(f"{f.name.replace('_', '-')}={v} must be a positive power of two")


FORCEABLE = (
    "block",
    "block_rows",
    "block_cols",
    "block_m",
    "block_n",
    "block_k",
    "group_m",
    "max_row_block",
)
"""The TileOptions fields a user may force through a backend's options (as `block-rows`
or `block_rows`) and the autotuner varies; the others are a target's own settings."""


@dataclass(frozen=True)
class Blocks:
    """A schedule's tile sizes: `dims` maps iteration dim -> block; `looped` marks a
    row reduction whose reduce dim is looped over in chunks."""

    dims: dict[int, int]
    group_m: int = 1
    block_k: int = 0
    looped: bool = False


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def prev_pow2(n: int) -> int:
    """The largest power of two <= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (n.bit_length() - 1)


def tiled_dims(space: IterationSpace) -> list[int]:
    """The iteration dims that tiles cover (a suffix); the others are per-program dims."""
    n = len(space.sizes)
    if n == 0:
        return []
    if space.tiled is not None:  # transposes decided (analysis.py)
        return list(space.tiled)
    if space.kind == MATMUL:
        return [n - 2, n - 1]
    if space.kind == REDUCTION:
        assert space.reduce_dim is not None
        return list(range(min(space.reduce_dim, max(0, n - 2)), n))
    return list(range(max(0, n - 2), n))


def for_statistics(opts: TileOptions) -> TileOptions:
    """The options for a kernel that computes a normalization's mean and variance: its
    own longest whole row and chunk where the target sets them (the chunk no longer
    than that row: a looped row then has more than one chunk)."""
    longest = min(opts.max_row_block, opts.statistics_row_block or opts.max_row_block)
    chunk = min(opts.statistics_row_chunk or opts.row_chunk, longest)
    return replace(opts, max_row_block=longest, row_chunk=chunk)


def group_options(
    space: IterationSpace, ops: Sequence[Operation], outputs: Sequence[SSAValue], opts: TileOptions
) -> TileOptions:
    """The options a fusion group's blocks are chosen with: `for_statistics` for a
    kernel that computes a normalization's mean and variance; for one that stores only
    per-row results of a softmax's statistics (`online.softmax_statistics_only`: a loss's
    log-sum-exp), the statistics' longest whole row with the usual chunk (no longer than
    that row), where the loop computes them online (`online_stats`, no row cache); `opts`
    for the others.

    A looped softmax's statistics take one pass (online), so such a kernel reads its
    rows once whether they are whole or looped, and the whole row buys nothing: a
    program holding 32768 elements runs one per SM (32 warps). On an H200 (bf16,
    kernel us, one device call), cross-entropy before this rule and the exponentials in
    base 2 (whole rows up to 32768, else looped by 2048) / after, looped by 2048 / by
    4096: 8192 x 32000 logits 261 / 148 / 150; 4096 x 128256 391 / 286 / 296;
    16384 x 50257 719 / 551 / 724. Plain sums and maxima of such rows stay whole
    (8192 x 32000: 115 us whole, 119 looped by 4096)."""
    if computes_variance(ops):
        return for_statistics(opts)
    online = opts.online_stats and opts.row_cache_bytes == 0  # else a loop per level
    if online and softmax_statistics_only(space, ops, outputs):
        longest = min(opts.max_row_block, opts.statistics_row_block or opts.max_row_block)
        return replace(opts, max_row_block=longest, row_chunk=min(opts.row_chunk, longest))
    return opts


def choose_blocks(space: IterationSpace, opts: TileOptions) -> Blocks:
    """Block sizes for `space` (heuristic, overridden by `opts`); along a split dim
    (slices/concats) the block divides the part size, so parts never overlap."""
    blocks = _choose_blocks(space, opts)
    s = space.split_dim
    if s is None or s not in blocks.dims or space.sizes[s] % blocks.dims[s] == 0:
        return blocks
    dims = dict(blocks.dims)
    dims[s] = largest_pow2_divisor(space.sizes[s], dims[s])
    looped = blocks.looped or (s == space.reduce_dim and dims[s] < space.sizes[s])
    return Blocks(dims, blocks.group_m, blocks.block_k, looped)


def largest_tile(space: IterationSpace, blocks: Blocks) -> int:
    """Elements of the largest tile a kernel with `blocks` holds (a matmul's operand and
    accumulator tiles; else the block over the tiled dims)."""
    tiled = tiled_dims(space)
    if space.kind == MATMUL:
        m, n = blocks.dims[tiled[-2]], blocks.dims[tiled[-1]]
        return max(m * n, m * blocks.block_k, blocks.block_k * n)
    return math.prod(blocks.dims.get(d, 1) for d in tiled)


def largest_pow2_divisor(n: int, cap: int) -> int:
    """The largest power of two that divides `n` and is at most `cap`."""
    b = 1
    while b * 2 <= cap and n % (b * 2) == 0:
        b *= 2
    return b


def _choose_blocks(space: IterationSpace, opts: TileOptions) -> Blocks:
    sizes, tiled = space.sizes, tiled_dims(space)
    dims = {d: 1 for d in tiled}
    if space.kind == POINTWISE:
        if len(tiled) == 1:
            dims[tiled[0]] = opts.block or min(next_pow2(sizes[tiled[0]]), POINTWISE_BLOCK)
        elif tiled and space.layouts:  # transposes: runs long enough in every buffer
            if len(tiled) == 2:  # square tiles: 64-element rows both ways
                r, c = tiled
                dims[c] = opts.block_cols or min(next_pow2(sizes[c]), TRANSPOSE_BLOCK)
                dims[r] = opts.block_rows or min(next_pow2(sizes[r]), TRANSPOSE_BLOCK)
            else:  # the innermost dim whole (up to 256), outer dims fill the tile
                budget = TRANSPOSE_BLOCK * TRANSPOSE_BLOCK
                for i, d in enumerate(reversed(tiled)):
                    cap = (opts.block_cols or 256) if i == 0 else max(1, budget)
                    dims[d] = min(next_pow2(sizes[d]), cap)
                    budget //= dims[d]
        elif tiled:
            r, c = tiled
            dims[c] = opts.block_cols or min(next_pow2(sizes[c]), 256)
            dims[r] = opts.block_rows or min(
                next_pow2(sizes[r]), max(1, POINTWISE_BLOCK // dims[c])
            )
        return Blocks(dims)
    if space.kind == REDUCTION:
        k = space.reduce_dim
        assert k is not None
        row = next_pow2(sizes[k])
        looped = row > opts.max_row_block or (
            opts.block_cols is not None and opts.block_cols < sizes[k]
        )
        dims[k] = opts.block_cols or (min(row, opts.row_chunk) if looped else row)
        others = [d for d in tiled if d != k]
        if others:
            rows = others[-1]
            row_elements = dims[k] * max(space.parts.values(), default=1)
            # a row of 3 parts holds a non-power-of-two count: round the budget down
            budget = prev_pow2(2048 // row_elements) if not looped else 1
            dims[rows] = opts.block_rows or min(next_pow2(sizes[rows]), budget)
            if _is_narrow_column_block(space, opts, rows, dims[rows]):
                return _column_blocks(space, dims, rows)
        return Blocks(dims, looped=looped)
    m, n = tiled
    dims[m] = opts.block_m or _mm_block(sizes[m])
    dims[n] = opts.block_n or _mm_block(sizes[n])
    if len(space.matmuls) > 1 and opts.block_n is None:
        dims[n] = min(dims[n], 64)  # a dual GEMM holds two accumulators in registers
    bk = opts.block_k or min(64, max(16, next_pow2(space.k_size)))
    return Blocks(dims, group_m=opts.group_m or 8, block_k=bk)


def _is_narrow_column_block(
    space: IterationSpace, opts: TileOptions, cols: int, block: int
) -> bool:
    """Whether a reduction over a non-innermost dim (a column reduction) was given a
    column block under NARROW_COLUMNS (the reduced dim long, kept whole): each row of
    the tile is then a few bytes, and most of every sector read is wasted. Forced sizes
    and slices/concats keep their blocks."""
    k = space.reduce_dim
    forced = opts.block_rows is not None or opts.block_cols is not None
    return (
        not forced
        and not space.parts
        and k is not None
        and cols > k
        and block < NARROW_COLUMNS
        and space.sizes[cols] > block
    )


def _column_blocks(space: IterationSpace, dims: dict[int, int], cols: int) -> Blocks:
    """Column reduction blocks that read coalesced: COLUMN_BLOCK columns (fewer when
    the row is shorter) and rows to fill 2048 elements, looping over the reduced dim.
    When that leaves fewer than COLUMN_PROGRAMS programs (a few long columns: each
    program streams a long strip, and a grid of one program per SM cannot keep enough
    loads in flight), the column block halves down to NARROW_COLUMNS until it does."""
    k = space.reduce_dim
    assert k is not None
    dims = dict(dims)
    block = min(next_pow2(space.sizes[cols]), COLUMN_BLOCK)
    others = math.prod(n for d, n in enumerate(space.sizes) if d not in (k, cols))
    while (
        block > NARROW_COLUMNS
        and block <= space.sizes[cols]  # a narrower block splits full ones
        and others * -(-space.sizes[cols] // block) < COLUMN_PROGRAMS
    ):
        block //= 2
    dims[cols] = block
    dims[k] = min(next_pow2(space.sizes[k]), max(1, 2048 // dims[cols]))
    return Blocks(dims, looped=dims[k] < space.sizes[k])


COLUMN_CANDIDATES = ((32, 64), (64, 32), (16, 128), (128, 16), (64, 64))
"""(reduced rows, columns) per step that the autotuner tries on a looped column
reduction (block-cols sizes the reduced dim, block-rows the columns)."""


def _mm_block(n: int) -> int:
    return 128 if n > 64 else max(16, next_pow2(n))


def candidates(space: IterationSpace, chosen: Blocks) -> list[dict[str, int]]:
    """A few alternative configurations for an autotuner (pass options, as a dict)."""
    if space.kind == MATMUL:
        configs = [(128, 128, 64), (128, 64, 64), (64, 128, 64), (64, 64, 32), (128, 256, 64)]
        if len(space.matmuls) > 1:  # a dual GEMM: two accumulators
            configs = [(128, 64, 64), (64, 64, 64), (64, 64, 32), (128, 32, 64)]
        return [{"block-m": m, "block-n": n, "block-k": k} for m, n, k in configs]
    if space.kind == REDUCTION:
        k = space.reduce_dim
        assert k is not None
        if chosen.looped and k < tiled_dims(space)[-1]:  # a column reduction
            return [{"block-cols": r, "block-rows": c} for r, c in COLUMN_CANDIDATES]
        if chosen.looped:
            return [{"block-cols": c} for c in (1024, 2048, 4096)]
        return [{"block-rows": r} for r in (1, 2, 4, 8)]
    if len(tiled_dims(space)) == 1:
        return [{"block": b} for b in (256, 512, 1024, 2048, 4096)]
    return [{"block-rows": r, "block-cols": c} for r, c in ((4, 256), (8, 128), (16, 64))]


@dataclass(frozen=True)
class LaunchKnobs:
    """tile-promote's decisions for one kernel."""

    num_warps: int
    num_stages: int
    vector_width: int


STRIDED_PER_THREAD = 4
"""Elements per thread of a flat pointwise kernel that reads or writes a buffer with a
stride other than 1 (every other column: `x[:, ::2] * x[:, 1::2]`): each element is a
load of its own, and 16 per thread left too few warps to keep them in flight. On an
H200 (bf16, 8192 x 8192 input, 1024 elements per program) the product took 75.5 us
with 2 or 4 warps and 59.4 with 8 (torch.compile 59.6); 512 per program with 4 warps
59.0."""


def launch_knobs(
    kind: str,
    tile_elements: int,
    inner_block: int,
    inner_size: int,
    element_bytes: int,
    strided: bool = False,
) -> LaunchKnobs:
    """num_warps, pipeline stages and vector width (elements per 16-byte access).

    The vector width is 16 bytes of the narrowest buffer element, limited by the
    innermost block and by the innermost dim's size (rows must stay aligned). `strided`:
    a flat pointwise kernel accessing a buffer with a stride other than 1
    (STRIDED_PER_THREAD), whose threads then take consecutive elements one at a time
    (vector width 1), so that a warp's loads of a strided buffer span consecutive
    elements: with 8 per thread the CUDA backend's even/odd product read 32-byte
    sectors for 4 useful bytes each and ran 84 us against Triton's 52.
    """
    vec = max(1, 16 // max(1, element_bytes))
    scalar = strided and kind == tile.Schedule.POINTWISE
    while vec > 1 and (inner_block % vec or inner_size % vec or scalar):
        vec //= 2
    if kind in (MATMUL, tile.Schedule.ATTENTION):
        # tensor-core tiles: 8 warps for a 128 x 128 tile, 4 below (an attention
        # kernel's largest tile is its query block times the head dim)
        warps = 8 if tile_elements >= 128 * 128 else 4
        return LaunchKnobs(warps, 3, vec)
    # about 16 elements per thread; 32 warps (1024 threads) only for tiles past 8192
    # elements (a whole 32768-wide row kept in registers, max-row-block=32768)
    per_thread = max(1, tile_elements // 32)
    most = STRIDED_PER_THREAD if scalar else 16
    warps = 1
    while warps < 32 and per_thread // warps > most:
        warps *= 2
    return LaunchKnobs(warps, 1, vec)


WARP_ROW = 1024
"""Longest reduced run (elements) of a whole-row reduction over the innermost dim that
`warp_per_row_warps` gives no more warps than the tile has rows."""
WARP_COLUMN_TILE = 2048
"""Tile elements per warp of a column reduction under `warp_per_row` (64 per thread)."""


def warp_per_row_warps(
    iteration: tuple[int, ...], blocks: tuple[int, ...], reduce_dim: int, warps: int
) -> int:
    """num_warps for a whole-row reduction kernel (`row_reduction`: no loop), or a looped
    one that keeps variance statistics per lane (tile-promote decides which), with
    these `iteration` sizes, `blocks` and `reduce_dim`, on a target that asks for few
    warps per reduced run (`warp_per_row`: Triton, which reduces across warps through
    shared memory and a barrier, once per reduce):

    - a column reduction (a dim after the reduced one is tiled): Triton spreads the
      warps over the tile's outer dims, the reduced one here, so every warp holds part
      of each column: one warp per WARP_COLUMN_TILE elements of the tile;
    - over the innermost dim, runs of at most WARP_ROW elements: no more warps than the
      tile has rows. A run is the iteration size of the reduced dim: a whole row, or
      one part of a sliced or concatenated row (whose parts the kernel reduces apart
      and adds), so a row of two 1024-element parts counts as runs of 1024;
    - longer runs keep `warps` (the rule of 16 elements per thread).

    The result is a power of two, at most `warps`. Measured on an H100 (bf16, kernel
    time, warps forced): a variance over the middle axis of 8192x16x256 took 301 us with
    4 warps and 26 with 1; cross-entropy over 65536 rows of 1000, 87 us with 4 warps and
    75 with 2; rows of 2048 and more moved by under 5 % with any count."""
    tile = math.prod(blocks)
    if any(b > 1 for b in blocks[reduce_dim + 1 :]):
        cap = tile // WARP_COLUMN_TILE
    elif iteration[reduce_dim] <= WARP_ROW:
        cap = tile // blocks[reduce_dim]
    else:
        return warps
    return min(warps, prev_pow2(max(1, cap)))
