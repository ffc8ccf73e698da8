"""`tile-promote`: decide what stays on chip, as attributes and shared-memory IR.

Preconditions: kernels come from convert-nn-to-tile (a `schedule` attribute, loads at
loop-invariant offsets except the loop's induction variable). Per kernel:

1. **row cache** (`row_reduction_looped`): a buffer read in several column loops (one
   per reduction level, then the store loop) is staged in shared memory when its rows
   fit `row-cache-bytes` (within `shared-bytes`): the first loop `tile.copy`s each chunk
   global -> shared, then `tile.barrier`, and every loop reads the chunk from shared
   memory, so HBM is read once. The kernel records `shared_bytes` and `row_cache`
   (parameter indices);
2. **operand staging** (`matmul`): the operand tiles the K loop loads go through shared
   memory in `num_stages` buffers (`num-stages`, fewer when they do not fit
   `shared-bytes`): `operand_staging = "shared"`. When not even one stage fits, the
   operands are not staged (`"registers"`, `num_stages = 1`, `shared_bytes = 0`). The
   budget model is the CUDA printer's allocation (`matmul_shared_bytes`), so a
   recorded decision fits when the printer obeys it;
3. **launch knobs** for every kernel: `num_warps`, `num_stages` and `vector_width`
   (elements per 16-byte access), from `heuristics.launch_knobs` (with `warp-per-row`,
   `heuristics.warp_per_row_warps` caps the warps of a whole-row reduction and of a
   looped one keeping variance statistics per lane); an attention
   kernel's stages are cut until its pipelined key and value tiles fit `shared-bytes`
   (`attention_shared_bytes`).

The CUDA backend obeys these (backends/cuda/pipeline.py); the Triton backend maps them
to num_warps / num_stages (Triton stages operands itself) and may read the source where
a cache is read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass

from fuseopt.diagnostics import CompileError
from fuseopt.dialects import nn, tile
from fuseopt.dialects.dtypes import element_bytes
from fuseopt.dialects.tile_verification import LAUNCH_KNOB_RANGES
from fuseopt.passes.convert_nn_to_tile.heuristics import launch_knobs, warp_per_row_warps

SHARED_BUDGET = 227 * 1024
"""Shared memory (bytes) one program may use by default: the most an H100 thread block
can have. A matmul program with 128x128 tiles fills an SM's registers (one program per
SM), so it may take all of it."""

ROW_CACHE_BUDGET = 96 * 1024
"""Shared memory (bytes) the row cache may take by default: half an H100 SM, so two
row-reduction programs fit (they need the occupancy to keep loads in flight)."""

OPERAND_ROW_PAD = 16
"""Bytes added to each row of a staged operand tile, so the 16 rows a WMMA load reads
fall in different banks (the CUDA printer's layout)."""

SHARED_ALIGN = 128
"""Alignment (bytes) of every shared-memory buffer the CUDA printer allocates."""


@dataclass(frozen=True)
class TilePromotePass(ModulePass):
    """Promote reused rows and matmul operands to shared memory; pick launch knobs.

    Options: `shared-bytes` (per-program shared-memory budget), `num-stages` (matmul
    pipeline depth before fitting the budget), `row-cache-bytes` (the part of the
    budget the row cache may take; the CUDA backend tiles with the same number),
    `warp-per-row` (fewer warps for whole-row reductions, column reductions and rows of
    up to 1024 elements, and for looped column variances of 16-bit inputs; the Triton
    target sets it).
    """

    name = "tile-promote"

    shared_bytes: int = SHARED_BUDGET
    """Shared memory one program may use, bytes."""
    num_stages: int = 3
    """Matmul pipeline depth before fitting the budget."""
    row_cache_bytes: int = ROW_CACHE_BUDGET
    """The part of the budget the row cache may take, bytes."""
    warp_per_row: bool = False
    """Give whole-row reductions fewer warps: one per 2048 elements of a column
    reduction's tile, no more than the tile's rows for rows of up to 1024 elements; and
    the same to a looped column reduction of a 16-bit input keeping variance statistics
    per lane (`carries_lane_statistics`, `heuristics.warp_per_row_warps`; the Triton
    target sets it)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        least, most, _ = LAUNCH_KNOB_RANGES["num_stages"]
        if (
            self.shared_bytes < 0
            or self.row_cache_bytes < 0
            or not least <= self.num_stages <= most
        ):
            raise CompileError(
                "tile-promote: shared-bytes and row-cache-bytes must be >= 0 and num-stages "
                f"from {least} to {most}"
            )
        row_budget = min(self.shared_bytes, self.row_cache_bytes)
        for kernel in [k for k in op.walk() if isinstance(k, tile.KernelOp)]:
            promote_kernel(
                kernel, self.shared_bytes, self.num_stages, row_budget, self.warp_per_row
            )


def promote_kernel(
    kernel: tile.KernelOp, budget: int, stages: int, row_budget: int, warp_per_row: bool = False
) -> None:
    """Apply the three promotion steps to one kernel (idempotent). `budget` bounds the
    kernel's shared memory, `row_budget` its row cache; `warp_per_row` as the pass's
    option."""
    kind = kernel.require_schedule()
    used = 0
    if kind == tile.Schedule.ROW_REDUCTION_LOOPED:
        if kernel.row_cache is None:
            used = _cache_rows(kernel, row_budget)
        elif kernel.shared_bytes is not None:  # promoted before: keep what it recorded
            used = kernel.shared_bytes.value.data
    tiles = [o for o in kernel.walk() if isinstance(o, tile.LoadOp | tile.StoreOp | tile.DotOp)]
    # a gather's tile counts as much as a load's: a kernel that reads only by address (a
    # ragged split's chunk) got one warp for its one-element stores and ran 20x slower
    gathers = [o for o in kernel.walk() if isinstance(o, tile.GatherOp)]
    shapes = [_tile_shape(o) for o in tiles]
    biggest = max((math.prod(s) for s in (*shapes, *map(_tile_shape, gathers))), default=1)
    # a tile of one element per row (a row reduction's result) moves no vector; the
    # others decide (each tile's layout takes gcd(vector width, its own last dim)); a
    # gather reads element by element, so its tile's last dim does not narrow the vector
    inner = [s[-1] for s in shapes if _moves_vectors(s)] or [1]
    globals_ = _vector_buffers(kernel)
    narrow = min((element_bytes(b.element_type) for b in globals_), default=4)
    inner_size = min(
        (b.get_shape()[-1] for b in globals_ if b.get_shape() and b.get_shape()[-1] > 1),
        default=1,
    )
    flat = all(len(s) <= 1 for s in shapes)
    knobs = launch_knobs(kind, biggest, min(inner), inner_size, narrow, flat and _strided(globals_))
    warps = knobs.num_warps
    lane_statistics = (
        warp_per_row
        and kind == tile.Schedule.ROW_REDUCTION_LOOPED
        and _widest_load(tiles) <= 2  # every load 16-bit: the case measured
        and carries_lane_statistics(kernel)
    )
    if warp_per_row and (kind == tile.Schedule.ROW_REDUCTION or lane_statistics):
        iteration, blocks = kernel.array_attr("iteration_sizes"), kernel.array_attr("block_sizes")
        reduce_dim = kernel.int_attr("reduce_dim")
        if iteration and blocks and reduce_dim is not None:
            warps = warp_per_row_warps(iteration, blocks, reduce_dim, warps)
    n_stages = knobs.num_stages
    if kind == tile.Schedule.MATMUL:
        n_stages = stages
        while n_stages > 1 and matmul_shared_bytes(kernel, n_stages, budget) > budget:
            n_stages -= 1
        used = matmul_shared_bytes(kernel, n_stages, budget)
        staging = "shared" if used <= budget else "registers"
        if staging == "registers":
            used = 0
        kernel.operand_staging = StringAttr(staging)
    if kind == tile.Schedule.ATTENTION:  # fewer stages where f32 or wide heads do not fit
        while n_stages > 1 and attention_shared_bytes(kernel, n_stages) > budget:
            n_stages -= 1
    kernel.num_warps = IntegerAttr(warps, i64)
    kernel.num_stages = IntegerAttr(n_stages, i64)
    kernel.vector_width = IntegerAttr(knobs.vector_width, i64)
    kernel.shared_bytes = IntegerAttr(used, i64)


def _strided(buffers: Sequence[MemRefType]) -> bool:
    """Whether one of `buffers` has a stride other than 1 along its innermost dim (of
    more than one element): a view taking every other element, a column."""
    for b in buffers:
        shape, strides = b.get_shape(), b.get_strides()
        if shape and shape[-1] > 1 and strides and strides[-1] not in (None, 1):
            return True
    return False


def _widest_load(tiles: Sequence[Operation]) -> int:
    """Bytes of the widest element the kernel's tile loads read (4 without loads)."""
    return max(
        (element_bytes(o.buffer.type.element_type) for o in tiles if isinstance(o, tile.LoadOp)),
        default=4,
    )


def carries_lane_statistics(kernel: tile.KernelOp) -> bool:
    """Whether a looped kernel's loop keeps statistics per lane (`online._lane_update`):
    a carried tile that the loop replaces by a select of a tile of the chunk's elements
    on the first step (the lane's pilot), next to the mean and M2 it updates by
    Welford's rule, several f32 ops per element loaded. A loop of plain sums (one
    carried accumulator each, any number of them) does not. With a 16-bit input the
    statistics bound the loop by its arithmetic, and a column reduction then runs
    fastest with one warp per `WARP_COLUMN_TILE` tile elements, as whole columns do (bf16
    on an H200, kernel us: a variance over the middle axis of 64 x 1024 x 1024 took 66
    with 4 warps and 42 with 1; its sum 33 with 4 and 44 with 1, so sums keep theirs)."""
    for loop in kernel.walk():
        if not isinstance(loop, scf.ForOp):
            continue
        carried = loop.body.block.args[1:]
        yielded = loop.body.block.last_op
        assert yielded is not None
        for position, arg in enumerate(carried):
            new = yielded.operands[position].owner
            if (
                isinstance(new, nn.SelectOp)
                and new.operands[2] is arg
                and isinstance(arg.type, TensorType)
                and arg.type == new.operands[1].type
                and _first_step(new.operands[0], carried)
            ):
                return True
    return False


def _first_step(condition: SSAValue, carried: Sequence[SSAValue]) -> bool:
    """Whether `condition` is `broadcast(steps) == 0` for a carried step count: the
    lane statistics' first step, not a running comparison (an argmax's `x > best`)."""
    compare = condition.owner
    if not isinstance(compare, nn.CompareOp) or compare.predicate.data != "eq":
        return False
    broadcast = compare.operands[0].owner
    return isinstance(broadcast, tile.BroadcastOp) and broadcast.operands[0] in carried


def matmul_shared_bytes(kernel: tile.KernelOp, stages: int, budget: int) -> int:
    """Shared memory a matmul kernel takes with its operands staged `stages` deep.

    It is what the CUDA printer allocates: each tile the K loop loads for a `tile.dot`
    gets `stages` buffers of its rows, each row padded by OPERAND_ROW_PAD bytes (a
    [r, c] bf16 tile: `r * (c + 8) * 2` bytes a stage), then each dot's accumulator
    gets an f32 array for the epilogue (which then runs in registers), every buffer
    aligned to SHARED_ALIGN. The accumulator arrays follow the stages when both fit
    `budget`; otherwise they reuse the stages, which are free once the K loop is done,
    and the kernel needs the larger of the two. (Reusing them when both fit was slower
    on the H100: the gated MLP's 4096x11008 kernel took 0.06% longer.) For dots off
    tensor cores (f32 operands), which the printer stages once, unpadded, with the
    accumulator in registers, it is an upper bound.
    """
    operands: list[tile.LoadOp] = []
    for dot in kernel.walk():
        if not isinstance(dot, tile.DotOp):
            continue
        for v in (dot.lhs, dot.rhs):
            owner = v.owner
            if isinstance(owner, tile.TransposeOp):
                owner = owner.input.owner
            if (
                isinstance(owner, tile.LoadOp)
                and isinstance(owner.parent_op(), scf.ForOp)
                and owner not in operands
            ):
                operands.append(owner)
    staged = []
    for load in operands:
        *lead, cols = _tile_shape(load) or (1,)
        row = cols * element_bytes(_element(load)) + OPERAND_ROW_PAD
        staged.append(stages * math.prod(lead) * row)
    accumulators = accumulator_bytes(kernel)
    together = carve_shared(accumulators, carve_shared(staged))
    if together <= budget:
        return together
    return max(carve_shared(staged), carve_shared(accumulators))


def accumulator_bytes(kernel: tile.KernelOp) -> list[int]:
    """Bytes of each dot's accumulator as an f32 array (the matmul epilogue's input)."""
    return [math.prod(_tile_shape(d)) * 4 for d in kernel.walk() if isinstance(d, tile.DotOp)]


def carve_shared(sizes: list[int], start: int = 0) -> int:
    """The end of buffers of `sizes` (bytes) laid out one after another from `start`,
    each SHARED_ALIGN-aligned, as the CUDA printer carves shared memory."""
    end = start
    for size in sizes:
        end = -(-end // SHARED_ALIGN) * SHARED_ALIGN + size
    return end


def attention_shared_bytes(kernel: tile.KernelOp, stages: int) -> int:
    """Shared memory an attention kernel's key loop takes pipelined `stages` deep (what
    Triton allocates, give or take its scratch): every tile loaded inside a key loop (a
    key block of K and V, a mask block) once per stage, in the loop that loads most
    (a causal kernel's full and diagonal loops run one after the other), and the
    tiles loaded before them (the query tiles) once. An f32 kernel with 128-wide heads
    at 3 stages needs 256 KiB, more than an H100 block may have."""
    fixed = 0
    staged: dict[Operation, int] = {}  # per outermost loop: the loops run one after another
    for op in kernel.walk():
        if not isinstance(op, tile.LoadOp):
            continue
        t = op.result.type
        assert isinstance(t, TensorType)
        size = math.prod(t.get_shape()) * element_bytes(t.element_type)
        loops = [p for p in _ancestors(op) if isinstance(p, scf.ForOp)]
        if loops:
            staged[loops[-1]] = staged.get(loops[-1], 0) + size
        else:
            fixed += size
    return fixed + stages * max(staged.values(), default=0)


def _ancestors(op: Operation) -> list[Operation]:
    found, parent = [], op.parent_op()
    while parent is not None:
        found.append(parent)
        parent = parent.parent_op()
    return found


def _moves_vectors(shape: tuple[int, ...]) -> bool:
    """Whether a tile of `shape` moves more than one element per row (a row
    reduction's result, one element per row, moves no vector)."""
    return bool(shape) and shape[-1] > 1


def _vector_buffers(kernel: tile.KernelOp) -> list[MemRefType]:
    """The global buffers whose accesses decide the vector width: those a load, store or
    row-cache copy moves more than one element per row of (a row reduction's result,
    one element per row, moves no vector: an i64 argmax or a row count of 300 narrowed
    the vector of the 32000-wide rows read beside it to 2 or 4 elements); all global
    buffers when none is."""
    moving: list[Attribute] = []
    every: list[Attribute] = []
    for op in kernel.walk():
        if isinstance(op, tile.LoadOp | tile.StoreOp):
            every.append(op.buffer.type)
            if _moves_vectors(_tile_shape(op)):
                moving.append(op.buffer.type)
        elif isinstance(op, tile.CopyOp):
            every.append(op.source.type)
            if _moves_vectors(tuple(op.shape.get_values())):
                moving.append(op.source.type)

    def global_(types: list[Attribute]) -> list[MemRefType]:
        return [
            b
            for b in types
            if isinstance(b, MemRefType) and tile.memory_space(b) == tile.MemorySpace.GLOBAL
        ]

    return global_(moving) or global_(every)


def _tile_shape(op: Operation) -> tuple[int, ...]:
    read = tile.LoadOp | tile.DotOp | tile.GatherOp
    t = op.result.type if isinstance(op, read) else op.value.type  # type: ignore[union-attr]
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def _element(op: tile.LoadOp) -> Attribute:
    t = op.result.type
    assert isinstance(t, TensorType)
    return t.element_type


def _cache_rows(kernel: tile.KernelOp, budget: int) -> int:
    """Stage buffers read by several column loops in shared memory; return bytes used."""
    entry = kernel.body.block
    loops = [o for o in entry.ops if isinstance(o, scf.ForOp)]
    reads: dict[SSAValue, list[tuple[scf.ForOp, tile.LoadOp]]] = {}
    for loop in loops:
        for op in loop.body.block.ops:
            if (
                isinstance(op, tile.LoadOp)
                and isinstance(op.buffer, BlockArgument)
                and tile.strided_layout(op.buffer.type) is None  # type: ignore[arg-type]
            ):
                reads.setdefault(op.buffer, []).append((loop, op))
    used, cached = 0, []
    zero: SSAValue | None = None
    for buf, uses in reads.items():
        plan = _row_plan(buf, uses)
        if plan is None or len({id(lp) for lp, _ in uses}) < 2:
            continue
        shape, j = plan
        bt = buf.type
        assert isinstance(bt, MemRefType)
        size = math.prod(shape) * element_bytes(bt.element_type)
        if used + size > budget:
            continue
        used += size
        cached.append(buf.index)
        if zero is None:
            zero_op = arith.ConstantOp(IntegerAttr(0, IndexType()))
            entry.insert_op_before(zero_op, entry.first_op)  # type: ignore[arg-type]
            zero = zero_op.result
        shared = tile.AllocOp(MemRefType(bt.element_type, shape, memory_space=tile.SHARED))
        entry.insert_op_after(shared, zero.owner)  # type: ignore[arg-type]
        first = uses[0][0]
        for loop, load in uses:
            iv = loop.body.block.args[0]
            dst = [iv if i == j else zero for i in range(len(shape))]
            block = loop.body.block
            if loop is first:
                box = list(_tile_shape(load))
                block.insert_op_before(
                    tile.CopyOp(buf, list(load.offsets), shared.result, dst, box), load
                )
                block.insert_op_before(tile.BarrierOp(), load)
            new = tile.LoadOp(shared.result, dst, _tile_shape(load))
            block.insert_op_before(new, load)
            load.result.replace_all_uses_with(new.result)
            block.erase_op(load)
    if cached:
        kernel.row_cache = ArrayAttr([IntegerAttr(i, i64) for i in cached])
    return used


def _row_plan(
    buf: SSAValue, uses: list[tuple[scf.ForOp, tile.LoadOp]]
) -> tuple[list[int], int] | None:
    """The shared buffer shape and chunk dim for `buf`'s loads, or None when the loads
    do not read the same rows chunk by chunk."""
    bt = buf.type
    assert isinstance(bt, MemRefType)
    first_loop, first = uses[0]
    box = _tile_shape(first)
    lead = len(first.offsets) - len(box)
    fixed = None
    chunk_dim = None
    for loop, load in uses:
        iv = loop.body.block.args[0]
        offs = list(load.offsets)
        if _tile_shape(load) != box or offs.count(iv) != 1 or offs.index(iv) < lead:
            return None
        j = offs.index(iv)
        rest = tuple(o for i, o in enumerate(offs) if i != j)
        if fixed is None:
            fixed, chunk_dim = rest, j
        elif rest != fixed or j != chunk_dim:
            return None
        if any(isinstance(o, SSAValue) and _inside(o, loop) for o in rest):
            return None
    assert chunk_dim is not None
    shape = list(box)
    shape[chunk_dim - lead] = bt.get_shape()[chunk_dim]
    return shape, chunk_dim - lead


def _inside(v: SSAValue, loop: scf.ForOp) -> bool:
    owner = v.owner
    op = owner.parent_op() if not isinstance(owner, Operation) else owner
    while op is not None:
        if op is loop:
            return True
        op = op.parent_op()
    return False
