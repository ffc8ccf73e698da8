"""CUDA C++ for the shape ops on tiles: reshape, broadcast and transpose.

A broadcast keeps its operand in registers where the layouts line up (a per-row value
along rows; a row repeated over rows whose length is a multiple of the block's span),
re-reads a loaded row from its (cached) source buffer, computes a broadcast index
vector (`tile.iota`) from each slot's coordinate, and otherwise exchanges the tile
through shared memory. A transpose or broadcast that only moves or adds unit dims
keeps every element's row-major position and relabels the registers (`relabel`). A
transpose that only feeds dots is never materialized: `dot.py` reads the untransposed
tile column-major.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from fuseopt.backends.cuda.index_vectors import index_along, index_expression
from fuseopt.backends.cuda.kernel_emitter import KernelEmitter
from fuseopt.backends.cuda.values import Val
from fuseopt.dialects import nn, tile
from fuseopt.dialects.syntax import array_values, keeps_order


def relabel(em: KernelEmitter, x: Val, result: SSAValue) -> None:
    """Bind `result` to `x`'s elements in the same row-major order under the result's
    shape: free where the layouts agree (a reshape, a transpose or broadcast that only
    moves or adds unit dims), else through `as_dist`."""
    t = result.type
    assert isinstance(t, TensorType)
    shape = tuple(t.get_shape())
    if x.kind in ("uniform", "array", "rowred", "colred"):
        em.values[result] = Val(x.kind, x.name, shape, x.elem, x.layout, x.array_ctype)
        return
    em.values[result] = em.as_dist(x, em.layout(shape))


def _emit_reshape(em: KernelEmitter, op: Operation) -> None:
    relabel(em, em.val(op.operands[0]), op.results[0])


def broadcast_source(
    dims: list[int], src: tuple[int, ...], dst: tuple[int, ...]
) -> list[int | None]:
    """For each result dim, the operand dim it reads (None where it is broadcast)."""
    out: list[int | None] = [None] * len(dst)
    for i, d in enumerate(dims):
        if src[i] != 1 or dst[d] == 1:
            out[d] = i
    return out


def emit_broadcast(em: KernelEmitter, x: Val, dims: list[int], result: SSAValue) -> None:
    """Bind `result` to `x` broadcast (operand dim i -> result dim dims[i])."""
    t = result.type
    assert isinstance(t, TensorType)
    shape = tuple(t.get_shape())
    if x.kind == "uniform":
        em.values[result] = Val("uniform", x.name, shape, x.elem)
        return
    if math.prod(shape) == x.n and list(dims) == sorted(dims):  # only unit dims added
        relabel(em, x, result)
        return
    source = broadcast_source(dims, x.shape, shape)
    rows_only = all(s is not None for s in source[:-1]) and (not shape or source[-1] is None)
    if x.kind == "rowred" and x.layout is not None and x.layout.shape == shape and rows_only:
        em.values[result] = Val("chunk", x.name, shape, x.elem, x.layout)
        return
    if x.kind == "colred" and _new_rows_only(x, shape, source):
        em.values[result] = Val("colred", x.name, shape, x.elem, x.layout)
        return
    lay = em.layout(shape)
    cols = shape[-1] if shape else 1
    only_last = all(s is None for s in source[:-1]) and shape and source[-1] is not None
    if (
        x.kind == "dist"
        and only_last
        and x.layout is not None
        and x.layout.v == lay.v
        and x.n == cols
        and cols % (lay.nt * lay.v) == 0
    ):
        per_row = cols // (lay.nt * lay.v)
        out = em.new_dist(shape, x.elem, "t", lay)
        em.for_slots(lay, lambda k, j: f"{em.slot(out, k, j)} = {em.slot(x, k % per_row, j)};")
        em.values[result] = out
        return
    lead = len(shape) - len(x.shape)
    if list(dims) == list(range(lead, len(shape))) and x.shape == shape[lead:]:
        from fuseopt.backends.cuda.memory import emit_broadcast_load

        out = em.new_dist(shape, x.elem, "bc", lay)
        if emit_broadcast_load(em, x, out):
            em.values[result] = out
            return
        em.lines.pop()  # the unused declaration
        em.names.taken.discard(out.name)
    em.values[result] = gather(em, x, shape, source)


def _new_rows_only(x: Val, shape: tuple[int, ...], source: list[int | None]) -> bool:
    """Whether broadcasting colred tile `x` (its C columns once) to `shape` repeats its
    columns as whole rows: trailing dims of C elements read x's non-unit dims in order,
    and every dim before them is broadcast."""
    assert x.layout is not None
    columns = x.layout.n
    if x.n != columns:
        return False
    first, inner = len(shape), 1
    while first > 0 and inner < columns:
        first -= 1
        inner *= shape[first]
    if inner != columns or any(source[d] is not None and shape[d] != 1 for d in range(first)):
        return False
    mapped = [source[d] for d in range(first, len(shape)) if shape[d] != 1]
    if any(s is None for s in mapped) or mapped != sorted(mapped):  # type: ignore[type-var]
        return False
    return [x.shape[s] for s in mapped] == [n for n in x.shape if n != 1]  # type: ignore[index]


def gather(em: KernelEmitter, x: Val, shape: tuple[int, ...], source: list[int | None]) -> Val:
    """A dist tile of `shape` whose element at coordinates c reads `x` (through shared
    memory) at the coordinates where operand dim `source[d]` takes c[d] (dims mapped to
    None are broadcast)."""
    arr = em.as_array(x)
    strides = [0] * len(x.shape)
    acc = 1
    for i in reversed(range(len(x.shape))):
        strides[i] = acc
        acc *= x.shape[i]
    lay = em.layout(shape)

    def index(k: int, j: int) -> str:
        flat = f"({lay.chunk_start(k)} + {j})"
        terms, inner = [], 1
        for d in reversed(range(len(shape))):
            s = source[d]
            if s is not None:
                terms.append(f"({flat} / {inner} % {shape[d]}) * {strides[s]}")
            inner *= shape[d]
        return " + ".join(terms) or "0"

    out = em.new_dist(shape, x.elem, "t", lay)
    em.for_slots(
        lay, lambda k, j: f"{em.slot(out, k, j)} = {em.read(arr, index(k, j))};", valid_only=True
    )
    return out


def _emit_tile_broadcast(em: KernelEmitter, op: tile.BroadcastOp) -> None:
    dims = list(array_values(op.dims))
    shape = tuple(op.result.type.get_shape())  # type: ignore[union-attr]
    length = op.input.type.get_shape()  # type: ignore[union-attr]
    along = dims[0] if len(dims) == 1 and tuple(length) == (shape[dims[0]],) else None
    if along is not None or (not dims and not length):
        # an index vector along one dim, or an index scalar everywhere: computed per
        # slot, unless the value is in one register already (broadcast as it is)
        uniform = em.val(op.input).kind == "uniform"
        element = None if uniform else index_expression(em, op.input)
        if element is not None:
            elem = op.result.type.element_type  # type: ignore[union-attr]
            em.values[op.result] = index_along(em, element, elem, shape, along)
            return
    emit_broadcast(em, em.val(op.input), dims, op.result)


def _emit_nn_broadcast(em: KernelEmitter, op: nn.BroadcastOp) -> None:
    x = em.val(op.operands[0])
    t = op.results[0].type
    assert isinstance(t, TensorType)
    lead = len(t.get_shape()) - len(x.shape)
    emit_broadcast(em, x, [lead + i for i in range(len(x.shape))], op.results[0])


def emit_transpose(em: KernelEmitter, x: Val, perm: list[int], result: SSAValue) -> None:
    """Bind `result` to `x` with dims permuted (result dim i = operand dim perm[i])."""
    t = result.type
    assert isinstance(t, TensorType)
    shape = tuple(t.get_shape())
    if x.kind == "uniform":
        em.values[result] = Val("uniform", x.name, shape, x.elem)
        return
    if keeps_order(perm, x.shape):
        relabel(em, x, result)
        return
    em.values[result] = gather(em, x, shape, list(perm))


def _emit_tile_transpose(em: KernelEmitter, op: tile.TransposeOp) -> None:
    from fuseopt.backends.cuda.dot import only_feeds_dots

    perm = list(array_values(op.permutation))
    if only_feeds_dots(op.result) and perm == [1, 0]:
        em.values[op.result] = Val(
            "lazy",
            "",
            tuple(op.result.type.get_shape()),  # type: ignore[union-attr]
            op.result.type.element_type,  # type: ignore[union-attr]
            extra={"materialize": lambda: _transpose_now(em, op), "transpose_of": op.input},
        )
        return
    emit_transpose(em, em.val(op.input), perm, op.result)


def _transpose_now(em: KernelEmitter, op: tile.TransposeOp) -> Val:
    emit_transpose(em, em.val(op.input), list(array_values(op.permutation)), op.result)
    got = em.values[op.result]
    assert isinstance(got, Val)
    return got


def _emit_nn_transpose(em: KernelEmitter, op: Operation) -> None:
    perm = list(array_values(op.attributes["permutation"]))
    emit_transpose(em, em.val(op.operands[0]), perm, op.results[0])


def shape_handlers() -> dict[type[Operation], Callable]:
    """The printer handlers of the shape ops, by op class."""
    return {
        nn.ReshapeOp: _emit_reshape,
        nn.BroadcastOp: _emit_nn_broadcast,
        nn.TransposeOp: _emit_nn_transpose,
        tile.BroadcastOp: _emit_tile_broadcast,
        tile.TransposeOp: _emit_tile_transpose,
    }
