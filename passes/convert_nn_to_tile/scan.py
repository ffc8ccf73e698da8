"""The scan schedule: `nn.cumsum` as a grid of programs, each scanning a block of lines
(`schedule = "scan"`).

The input is seen as [outer, length, inner] around the scanned axis:

- a last-axis scan (inner = 1) gives each program SCAN_ROW_ELEMENTS / chunk rows; it
  walks its rows chunk by chunk (a chunk is the whole row when it fits SCAN_CHUNK),
  scans each [rows, chunk] tile along its columns and adds the carry, the sum of the
  chunks before it;
- a scan over another axis (inner > 1) gives each program one outer index and a block
  of up to SCAN_COLUMNS inner columns (coalesced rows); it walks the scanned axis in
  [chunk, columns] tiles the same way.

Floats are scanned in f32 (the carry too) and rounded once, as `nn.cumsum` says;
integers in their own type. Loads past the edge read 0, which adds nothing. Every
line is scanned by one program in order: a few very long lines (4 rows of a million
elements) get few programs; a scan split across programs (chunk sums, then their
prefix) is not built yet.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, MemRefType, StringAttr, TensorType, f32
from xdsl.ir import Block, Operation, SSAValue

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


def scan_kernel(name: str, op: nn.CumsumOp) -> tuple[tile.KernelOp, int]:
    """The scan kernel of `op` (see the module docstring) and its number of programs.
    Its parameters are the input and the result, each as [outer, length, inner] (or
    [outer, length] for a last-axis scan)."""
    t = op.input.type
    assert isinstance(t, TensorType)
    dims = list(t.get_shape()) or [1]
    axis = op.axis_value if t.get_shape() else 0
    outer, length = math.prod(dims[:axis]), dims[axis]
    inner = math.prod(dims[axis + 1 :])
    element = t.element_type
    acc = f32 if is_float(element) else element
    if inner == 1:
        chunk = min(next_pow2(length), SCAN_CHUNK)
        rows = max(1, min(next_pow2(outer), SCAN_ROW_ELEMENTS // chunk))
        shape, box, scan_axis = [outer, length], [rows, chunk], 1
        programs = -(-outer // rows)
    else:
        columns = min(next_pow2(inner), SCAN_COLUMNS)
        chunk = min(next_pow2(length), max(1, SCAN_ROW_ELEMENTS // columns))
        shape, box, scan_axis = [outer, length, inner], [chunk, columns], 0
        programs = outer * -(-inner // columns)
    param = MemRefType(element, shape)
    kernel = tile.KernelOp(name, 1, [param, param])
    kernel.schedule = StringAttr(tile.Schedule.SCAN.value)
    entry = kernel.body.block
    x, y = entry.args
    index = IndexConstants()

    def add(block: Block, new: Operation) -> SSAValue:
        block.add_op(new)
        return new.results[0]

    pid = add(entry, tile.ProgramIdOp(0))
    if inner == 1:
        row0 = add(entry, arith.MuliOp(pid, index(box[0])))

        def at(pos: SSAValue) -> list[SSAValue]:
            return [row0, pos]

    else:
        blocks = -(-inner // box[1])
        out_i = add(entry, arith.DivSIOp(pid, index(blocks)))
        block_i = add(entry, arith.RemSIOp(pid, index(blocks)))
        col0 = add(entry, arith.MuliOp(block_i, index(box[1])))

        def at(pos: SSAValue) -> list[SSAValue]:
            return [out_i, pos, col0]

    # the carry is kept spread over the whole tile: a 1-D carry plus a reduction in the
    # loop is the pattern Triton 3.6's TritonGPUOptimizeThreadLocality rewrites, and it
    # asserts when the loop's result is unused (it always is here)
    tile_t = TensorType(acc, box)
    body = Block(arg_types=[IndexType(), tile_t])
    pos, carry = body.args
    loaded = add(body, tile.LoadOp(x, at(pos), box))
    values = loaded if element == acc else add(body, nn.CastOp(loaded, tile_t))
    scanned = add(body, nn.CumsumOp(values, scan_axis))
    total = add(body, nn.AddOp(scanned, carry))
    result = total if element == acc else add(body, nn.CastOp(total, TensorType(element, box)))
    body.add_op(tile.StoreOp(result, y, at(pos)))
    chunk_sum = add(body, tile.ReduceOp("sum", values, scan_axis))
    spread = add(body, tile.BroadcastOp(chunk_sum, [1 - scan_axis], tile_t))
    body.add_op(scf.YieldOp(add(body, nn.AddOp(carry, spread))))
    zero = add(entry, nn.ConstantOp(0.0 if is_float(acc) else 0, tile_t))
    entry.add_op(scf.ForOp(index(0), index(length), index(box[scan_axis]), [zero], body))
    entry.add_op(tile.ReturnOp())
    index.hoist(entry)
    kernel.iteration_sizes = int_array(shape)
    kernel.block_sizes = int_array(box if inner == 1 else [1, *box])
    return kernel, programs
