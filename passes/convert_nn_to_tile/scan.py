"""The scan schedule: `nn.cumsum` as a grid of programs, each scanning a block of lines
(`schedule = "scan"`).

The input is seen as [outer, length, inner] around the scanned axis:

- a last-axis scan (inner = 1) gives each program SCAN_ROW_ELEMENTS / chunk rows; it
  walks its rows chunk by chunk (a chunk is the whole row when it fits SCAN_CHUNK),
  scans each [rows, chunk] tile along its columns and adds the carry, the sum of the
  chunks before it;
- a scan over another axis (inner > 1) gives each program one outer index and a block
  of up to SCAN_COLUMNS inner columns (coalesced rows; down to NARROW_SCAN_COLUMNS
  while that adds programs, `plan_scan`); it walks the scanned axis in [chunk,
  columns] tiles the same way. With fewer than MIN_COLUMN_SCAN_PROGRAMS programs and
  more than one step (a few long columns) there is no scan kernel: the op stays a
  whole-tensor kernel.

Floats are scanned in f32 (the carry too) and rounded once, as `nn.cumsum` says;
integers in their own type. Loads past the edge read 0, which adds nothing.

A last-axis scan whose lines would leave fewer than SPLIT_PROGRAMS programs (a few
long lines: 4 rows of a million elements) is split instead (`split_scan_kernels`):
a first kernel sums every chunk of every line into a [lines, chunks] buffer of
partial sums, a second gives each chunk a program that adds up the partials before
it (one masked load and a sum) and scans its chunk from there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, MemRefType, StringAttr, TensorType, f32, i1, i64
from xdsl.ir import Attribute, Block, Operation, SSAValue

from fuseopt.dialects import nn, tile
from fuseopt.dialects.syntax import int_array, is_float
from fuseopt.passes.convert_nn_to_tile.heuristics import next_pow2
from fuseopt.passes.convert_nn_to_tile.index_constants import IndexConstants

SCAN_CHUNK = 1024
"""Longest stretch of a line one step scans (elements, a power of two)."""
SCAN_ROW_ELEMENTS = 4096
"""About how many elements one step of a last-axis scan holds (rows x chunk)."""
SCAN_COLUMNS = 64
"""Most inner columns one program of a non-last-axis scan takes (64 x 2 bytes: whole
128-byte rows of a 16-bit tensor)."""
NARROW_SCAN_COLUMNS = 16
"""Fewest inner columns a program of a non-last-axis scan narrows to (16 x 2 bytes: a
whole 32-byte sector per row of a 16-bit tensor)."""
MIN_COLUMN_SCAN_PROGRAMS = 32
"""Fewest programs a non-last-axis scan with several steps per column runs on; below,
the whole-tensor kernel (no split scan along such an axis yet)."""
SPLIT_PROGRAMS = 264
"""Fewest programs a last-axis scan should have (two per SM of an H100, as the column
reductions' COLUMN_PROGRAMS): below it, and with more than one chunk per line, the
scan is split across programs."""
MAX_CHUNKS = 8192
"""Most chunks per line of a split scan (the second kernel loads a line's partial sums
as one tile); longer lines take longer chunks."""


@dataclass(frozen=True)
class ScanLaunch:
    """One kernel of a scan and what its launch passes: `args` names each buffer,
    "input", "partials" (a split scan's [lines, chunks] sums) or "result"."""

    kernel: tile.KernelOp
    programs: int
    args: tuple[str, ...]


@dataclass(frozen=True)
class ScanPlan:
    """How a one-pass scan covers `op`'s input, seen as [outer, length, inner]."""

    outer: int
    length: int
    inner: int
    box: tuple[int, int]
    """The tile one step reads: [rows, chunk] (last axis) or [chunk, columns]."""
    programs: int

    @property
    def last_axis(self) -> bool:
        """Whether the scanned axis is the innermost (inner == 1)."""
        return self.inner == 1


def plan_scan(op: nn.CumsumOp) -> ScanPlan:
    """The one-pass scan of `op`: SCAN_ROW_ELEMENTS per step; a scan over another axis
    than the last narrows its column block (64 down to 16, as long as blocks stay
    full) until it has SPLIT_PROGRAMS programs."""
    t = op.input.type
    assert isinstance(t, TensorType)
    dims = list(t.get_shape()) or [1]
    axis = op.axis_value if t.get_shape() else 0
    outer, length, inner = math.prod(dims[:axis]), dims[axis], math.prod(dims[axis + 1 :])
    if inner == 1:
        chunk = min(next_pow2(length), SCAN_CHUNK)
        rows = max(1, min(next_pow2(outer), SCAN_ROW_ELEMENTS // chunk))
        return ScanPlan(outer, length, inner, (rows, chunk), -(-outer // rows))
    columns = min(next_pow2(inner), SCAN_COLUMNS)
    while (
        columns > NARROW_SCAN_COLUMNS
        and columns <= inner
        and outer * -(-inner // columns) < SPLIT_PROGRAMS
    ):
        columns //= 2
    chunk = min(next_pow2(length), max(1, SCAN_ROW_ELEMENTS // columns))
    return ScanPlan(outer, length, inner, (chunk, columns), outer * -(-inner // columns))


def scan_launches(
    names: Callable[[str], str], op: nn.CumsumOp
) -> tuple[list[ScanLaunch], MemRefType | None]:
    """The kernels that compute `op` (named by `names(suffix)`) and the type of the
    partial-sums buffer they share (None when there is none): one scan kernel, or a
    split scan's two (see the module docstring). No kernel (an empty list) when a scan
    over another axis than the last would run on fewer than MIN_COLUMN_SCAN_PROGRAMS
    programs with more than one step each (a few long columns: the caller lowers it
    as a whole-tensor kernel instead, PyTorch's cumsum on Triton)."""
    plan = plan_scan(op)
    t = op.input.type
    assert isinstance(t, TensorType)
    if plan.last_axis and plan.length > plan.box[1] and plan.programs < SPLIT_PROGRAMS:
        return split_scan_kernels(names, t.element_type, plan.outer, plan.length)
    few_long_columns = plan.length > plan.box[0] and plan.programs < MIN_COLUMN_SCAN_PROGRAMS
    if not plan.last_axis and few_long_columns:
        return [], None
    kernel = scan_kernel(names(""), t.element_type, plan)
    return [ScanLaunch(kernel, plan.programs, ("input", "result"))], None


def split_scan_kernels(
    names: Callable[[str], str], element: Attribute, lines: int, length: int
) -> tuple[list[ScanLaunch], MemRefType]:
    """A last-axis scan of `lines` lines of `length` split across programs: the chunk
    sums, then each chunk scanned from the sum of the partials before it."""
    acc = f32 if is_float(element) else element
    chunk = SCAN_CHUNK
    while -(-length // chunk) > MAX_CHUNKS:
        chunk *= 2
    chunks = -(-length // chunk)
    wide = next_pow2(chunks)
    programs = lines * chunks
    data = MemRefType(element, [lines, length])
    partial_t = MemRefType(acc, [lines, chunks])
    index = IndexConstants()

    def start(kernel: tile.KernelOp) -> tuple[Block, SSAValue, SSAValue, SSAValue]:
        entry = kernel.body.block
        kernel.schedule = StringAttr(tile.Schedule.SCAN.value)
        kernel.iteration_sizes = int_array([lines, length])
        kernel.block_sizes = int_array([1, chunk])
        pid = _add(entry, tile.ProgramIdOp(0))
        line = _add(entry, arith.DivSIOp(pid, index(chunks)))
        which = _add(entry, arith.RemSIOp(pid, index(chunks)))
        return entry, line, which, _add(entry, arith.MuliOp(which, index(chunk)))

    def widened(block: Block, x: SSAValue) -> SSAValue:
        return x if element == acc else _add(block, nn.CastOp(x, TensorType(acc, [1, chunk])))

    sums = tile.KernelOp(names("_partials"), 1, [data, partial_t])
    entry, line, which, col0 = start(sums)
    source, into = sums.body.block.args
    values = widened(entry, _add(entry, tile.LoadOp(source, [line, col0], [1, chunk])))
    total = _add(entry, tile.ReduceOp("sum", values, 1))
    entry.add_op(tile.StoreOp(total, into, [line, which]))
    entry.add_op(tile.ReturnOp())
    index.hoist(entry)

    index = IndexConstants()
    scan = tile.KernelOp(names(""), 1, [data, partial_t, data])
    entry, line, which, col0 = start(scan)
    x, partials, y = scan.body.block.args
    zero = index(0)
    before = _add(entry, tile.LoadOp(partials, [line, zero], [1, wide]))
    # position - which < 0 marks the chunks before this one
    shifted = _add(entry, arith.SubiOp(zero, which))
    position = _add(entry, tile.IotaOp(shifted, 0, 1, TensorType(i64, [wide])))
    earlier = _add(
        entry, nn.CompareOp("lt", position, _add(entry, nn.ConstantOp(0, TensorType(i64, [wide]))))
    )
    row_t = TensorType(acc, [1, wide])
    spread = _add(entry, tile.BroadcastOp(earlier, [1], TensorType(i1, [1, wide])))
    none = _add(entry, nn.ConstantOp(0.0 if is_float(acc) else 0, row_t))
    offset = _add(entry, tile.ReduceOp("sum", _add(entry, nn.SelectOp(spread, before, none)), 1))
    values = widened(entry, _add(entry, tile.LoadOp(x, [line, col0], [1, chunk])))
    scanned = _add(entry, nn.CumsumOp(values, 1))
    tile_t = TensorType(acc, [1, chunk])
    result = _add(entry, nn.AddOp(scanned, _add(entry, tile.BroadcastOp(offset, [0], tile_t))))
    if element != acc:
        result = _add(entry, nn.CastOp(result, TensorType(element, [1, chunk])))
    entry.add_op(tile.StoreOp(result, y, [line, col0]))
    entry.add_op(tile.ReturnOp())
    index.hoist(entry)
    return [
        ScanLaunch(sums, programs, ("input", "partials")),
        ScanLaunch(scan, programs, ("input", "partials", "result")),
    ], partial_t


def _add(block: Block, new: Operation) -> SSAValue:
    block.add_op(new)
    return new.results[0]


def scan_kernel(name: str, element: Attribute, plan: ScanPlan) -> tile.KernelOp:
    """The one-pass scan kernel of `plan` over elements of type `element` (see the module
    docstring; it runs on `plan.programs` programs). Its parameters are the input and
    the result, each as [outer, length, inner] (or [outer, length] for a last-axis
    scan)."""
    outer, length, inner = plan.outer, plan.length, plan.inner
    acc = f32 if is_float(element) else element
    box = list(plan.box)
    if inner == 1:
        shape, scan_axis = [outer, length], 1
    else:
        shape, scan_axis = [outer, length, inner], 0
    param = MemRefType(element, shape)
    kernel = tile.KernelOp(name, 1, [param, param])
    kernel.schedule = StringAttr(tile.Schedule.SCAN.value)
    entry = kernel.body.block
    x, y = entry.args
    index = IndexConstants()
    pid = _add(entry, tile.ProgramIdOp(0))
    if inner == 1:
        row0 = _add(entry, arith.MuliOp(pid, index(box[0])))

        def at(pos: SSAValue) -> list[SSAValue]:
            return [row0, pos]

    else:
        blocks = -(-inner // box[1])
        out_i = _add(entry, arith.DivSIOp(pid, index(blocks)))
        block_i = _add(entry, arith.RemSIOp(pid, index(blocks)))
        col0 = _add(entry, arith.MuliOp(block_i, index(box[1])))

        def at(pos: SSAValue) -> list[SSAValue]:
            return [out_i, pos, col0]

    # the carry is kept spread over the whole tile: a 1-D carry plus a reduction in the
    # loop is the pattern Triton 3.6's TritonGPUOptimizeThreadLocality rewrites, and it
    # asserts when the loop's result is unused (it always is here)
    tile_t = TensorType(acc, box)
    body = Block(arg_types=[IndexType(), tile_t])
    pos, carry = body.args
    loaded = _add(body, tile.LoadOp(x, at(pos), box))
    values = loaded if element == acc else _add(body, nn.CastOp(loaded, tile_t))
    scanned = _add(body, nn.CumsumOp(values, scan_axis))
    total = _add(body, nn.AddOp(scanned, carry))
    result = total if element == acc else _add(body, nn.CastOp(total, TensorType(element, box)))
    body.add_op(tile.StoreOp(result, y, at(pos)))
    chunk_sum = _add(body, tile.ReduceOp("sum", values, scan_axis))
    spread = _add(body, tile.BroadcastOp(chunk_sum, [1 - scan_axis], tile_t))
    body.add_op(scf.YieldOp(_add(body, nn.AddOp(carry, spread))))
    zero = _add(entry, nn.ConstantOp(0.0 if is_float(acc) else 0, tile_t))
    entry.add_op(scf.ForOp(index(0), index(length), index(box[scan_axis]), [zero], body))
    entry.add_op(tile.ReturnOp())
    index.hoist(entry)
    kernel.iteration_sizes = int_array(shape)
    kernel.block_sizes = int_array(box if inner == 1 else [1, *box])
    return kernel
