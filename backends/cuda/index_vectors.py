"""Index vectors the CUDA printer computes in every slot instead of exchanging them.

A broadcast of a 1-D tile along the rows or columns of a 2-D one moves each element to
the threads holding that row or column: through shared memory, with a barrier before
and after. When the 1-D tile is an *index expression* (a `tile.iota`, a scalar iota
broadcast, integer sums, differences and products of those and of splat constants: the
positions a split argmax compares, `chunk * 512 + i`), each slot of the broadcast
computes its own element from its coordinate instead (`index_along`), with no exchange.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects.builtin import TensorType, i64
from xdsl.ir import Attribute, SSAValue

from fuseopt.backends.cuda import op_table
from fuseopt.backends.cuda.kernel_emitter import KernelEmitter
from fuseopt.backends.cuda.values import Val
from fuseopt.dialects import nn, tile
from fuseopt.dialects.syntax import array_values

Expression = Callable[[str], str]
"""The C expression (a 64-bit integer) of an index vector's element at a position."""

OPERATORS = {nn.AddOp: "+", nn.SubOp: "-", nn.MulOp: "*"}
"""The integer ops an index expression may combine its parts with."""


def index_expression(em: KernelEmitter, value: SSAValue, depth: int = 0) -> Expression | None:
    """`value`'s element at a position as C, when `value` (a 0-d or 1-d tile of 64-bit
    integers) is an index expression (module doc); else None."""
    t = value.type
    if depth > 8 or not isinstance(t, TensorType) or len(t.get_shape()) > 1:
        return None
    op = value.owner
    if isinstance(op, tile.IotaOp):
        return iota_expression(em, op)
    if t.element_type != i64:  # 64-bit like the C expression: no wrapping to mimic
        return None
    if isinstance(op, tile.BroadcastOp) and not array_values(op.dims) and not _rank(op.input):
        return index_expression(em, op.input, depth + 1)
    if isinstance(op, nn.ConstantOp) and isinstance(op.splat_value, int):
        value_text = op_table.int_literal(op.splat_value)
        return lambda _: value_text
    symbol = OPERATORS.get(type(op))  # type: ignore[arg-type]
    if symbol is not None:
        a, b = (index_expression(em, x, depth + 1) for x in op.operands)  # type: ignore[union-attr]
        if a is not None and b is not None:
            return lambda p: f"({a(p)} {symbol} {b(p)})"
    return None


def iota_expression(em: KernelEmitter, op: tile.IotaOp) -> Expression:
    """`start + step * (offset + position)` of iota `op`, in 64-bit integers (its offset
    alone for a 0-d iota)."""
    start = op_table.int_literal(op.start_value)
    step = op_table.int_literal(op.step_value)
    off = em.scalar(op.offset)
    if not op.result.type.get_shape():  # type: ignore[attr-defined]
        return lambda _: f"({start} + {step} * (long long)({off}))"
    return lambda p: f"({start} + {step} * ((long long)({off}) + {p}))"


def _rank(value: SSAValue) -> int:
    t = value.type
    return len(t.get_shape()) if isinstance(t, TensorType) else -1


def index_along(
    em: KernelEmitter,
    element: Expression,
    elem: Attribute,
    shape: tuple[int, ...],
    dim: int | None,
) -> Val:
    """An index vector in a tile of `shape`, its one dim at `dim` (a 1-d tile itself, or
    broadcast along the others; None: a 0-d one broadcast everywhere): each slot
    computes `element(its coordinate along dim)` (no exchange through shared memory),
    converted to `elem`."""
    out = em.new_dist(shape, elem, "iota")
    lay = out.layout
    assert lay is not None
    inner = math.prod(shape[dim + 1 :]) if dim is not None else 1
    for k in range(lay.chunks):
        for j in range(lay.v):
            flat = f"({lay.chunk_start(k)} + {j})"
            position = "0"
            if dim is not None and len(shape) == 1:
                position = flat
            elif dim is not None:
                position = f"({flat} / {inner} % {shape[dim]})"
            converted = op_table.cast(element(position), i64, elem)
            em.line(f"{out.name}[{k * lay.v + j}] = {converted};")
    return out
