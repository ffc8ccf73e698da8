"""CUDA C++ for `tile.reduce`: warp-shuffle and shared-memory block reductions.

Three strategies, chosen from the input's dist layout (`values.Layout`), for a
reduction along the last dim of a tile of R rows of L elements (`cpr = L / v` chunks
per row, `nt` threads):

- **block** (`R == 1`, or `cpr` a multiple of `nt`: every thread holds part of every
  row): each thread combines its chunks per row, then `fo_group_allreduce<32>` within
  each warp, then the warps' partials meet in shared memory; every thread ends with
  the row totals;
- **group** (`cpr` divides `nt`: a row is held by `cpr` consecutive threads): one
  shuffle all-reduce over aligned lane groups of width `cpr` (up to a warp), or a
  warp all-reduce plus shared memory across the row's warps;
- **columns** (an axis with only unit dims before it, R rows of C = G * v elements
  after it, G chunks a row dividing `nt`: each thread holds the same v columns in
  every chunk): each thread folds its chunks in registers, lanes holding the same
  columns combine by shuffles (G < 32), and the partials of the warps (or of the
  threads G apart) meet in shared memory; each thread then holds its columns' totals
  in registers (a `colred` value: no exchange at all when one warp, or one thread
  per column chunk, holds them already);
- **generic** (another axis, odd shapes): the tile goes to shared memory and each
  thread reduces whole output elements serially.

Sums of f16/bf16 accumulate in f32 and round once (the nn reference's rule).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects import scf
from xdsl.dialects.builtin import Float32Type, TensorType
from xdsl.ir import Operation

from fuseopt.backends.cuda import op_table
from fuseopt.backends.cuda.values import Layout, Val
from fuseopt.dialects import nn, tile

COMBINE = {"sum": "({0} + {1})", "max": "fo_max({0}, {1})", "min": "fo_min({0}, {1})"}
FUNCTOR = {"sum": "fo_sum_op()", "max": "fo_max_op()", "min": "fo_min_op()"}
IDENTITY = {
    ("sum", "float"): "0.0f",
    ("max", "float"): "__int_as_float(0xff800000)",
    ("min", "float"): "__int_as_float(0x7f800000)",
    ("sum", "int"): "0LL",
    ("max", "int"): op_table.int_literal(op_table.INT64_MIN),
    ("min", "int"): "9223372036854775807LL",
}


COMBINE_OPS = {"sum": nn.AddOp, "max": nn.MaxOp, "min": nn.MinOp}


def deferred_reductions(loop: scf.ForOp) -> dict[int, tuple[tile.ReduceOp, Operation]]:
    """Loop-carried one-element f32 accumulators updated only as `acc = combine(acc,
    reduce(tile))` (the looped row reductions): iter_arg index -> (reduce, combine).

    Their block reduction can wait until after the loop: each thread folds its chunks
    into a private partial in every iteration, and the block combines the partials
    once (no shuffles or barriers inside the loop).
    """
    body = loop.body.block
    yielded = body.last_op
    out: dict[int, tuple[tile.ReduceOp, Operation]] = {}
    if not isinstance(yielded, scf.YieldOp):
        return out
    for i, arg in enumerate(body.args[1:]):
        uses = list(arg.uses)
        if len(uses) != 1:
            continue
        comb = uses[0].operation
        if comb.parent_block() is not body or not isinstance(comb, nn.AddOp | nn.MaxOp | nn.MinOp):
            continue
        red = comb.operands[1 - uses[0].index].owner
        if not isinstance(red, tile.ReduceOp) or red.parent_block() is not body:
            continue
        t, xt = red.result.type, red.input.type
        assert isinstance(t, TensorType) and isinstance(xt, TensorType)
        if (
            COMBINE_OPS[red.kind.data] is not type(comb)
            or len(list(red.result.uses)) != 1
            or len(list(comb.results[0].uses)) != 1
            or yielded.operands[i] is not comb.results[0]
            or not isinstance(t.element_type, Float32Type)
            or math.prod(t.get_shape()) != 1
            or red.axis_index != len(xt.get_shape()) - 1
        ):
            continue
        out[i] = (red, comb)
    return out


def emit_partial(em, op: tile.ReduceOp, part: str) -> None:  # noqa: ANN001
    """Fold this thread's elements of `op`'s input into its private partial `part`."""
    x = em.val(op.input)
    if x.kind not in ("dist", "chunk"):
        x = em.as_dist(x, em.layout(x.shape)) if x.kind != "uniform" else _materialize(em, x)
    lay = x.layout
    assert lay is not None
    comb = COMBINE[op.kind.data]
    for k in range(lay.chunks):
        guard = lay.guarded and (k + 1) * lay.nt * lay.v > lay.n
        if guard:
            em.open(f"if ({lay.chunk_start(k)} < {lay.n})")
        for j in range(lay.v):
            em.line(f"{part} = {comb.format(part, _value(em, x, k, j, 'float'))};")
        if guard:
            em.close()


def _emit_reduce(em, op: tile.ReduceOp) -> None:  # noqa: ANN001
    part = em.deferred.get(op)
    if part is not None:
        emit_partial(em, op, part)
        return
    x = em.val(op.input)
    kind = op.kind.data
    t = op.result.type
    assert isinstance(t, TensorType)
    elem = t.element_type
    ck = "float" if op_table.compute_kind(elem) == "float" else "int"
    acc_t = "float" if ck == "float" else "long long"
    axis = op.axis_index
    shape = x.shape
    if x.kind == "uniform" and kind != "sum":
        em.values[op.result] = Val("uniform", x.name, tuple(t.get_shape()), elem)
        return
    if axis == len(shape) - 1 and x.kind in ("dist", "chunk", "uniform"):
        if x.kind == "uniform":
            x = _materialize(em, x)
        lay = x.layout
        assert lay is not None
        L = shape[-1]
        if L % lay.v == 0:
            cpr, rows = L // lay.v, lay.n // L
            if rows == 1 or cpr % lay.nt == 0:
                _block(em, op, x, kind, ck, acc_t, cpr, rows)
                return
            if lay.nt % cpr == 0:
                _group(em, op, x, kind, ck, acc_t, cpr)
                return
    if x.kind == "dist" and _columns_fit(x, axis):
        _columns(em, op, x, kind, ck, acc_t)
        return
    _generic(em, op, x, kind, ck, acc_t)


def _columns_fit(x: Val, axis: int) -> bool:
    """Whether the columns strategy reduces `x` (a dist tile) over `axis`: only unit
    dims before it, whole chunks per row of the dims after it, an unguarded layout,
    and G chunks a row that either divide a warp or are whole warps dividing `nt`."""
    lay = x.layout
    if lay is None or lay.guarded or axis >= len(x.shape) - 1:
        return False
    if math.prod(x.shape[:axis]) != 1:
        return False
    inner = math.prod(x.shape[axis + 1 :])
    if inner % lay.v:
        return False
    g = inner // lay.v
    return (g < 32 and 32 % g == 0) or (g % 32 == 0 and lay.nt % g == 0)


def _columns(em, op, x: Val, kind: str, ck: str, acc_t: str) -> None:  # noqa: ANN001
    """The columns strategy (module docstring): thread t holds columns
    ((t % G) * v .. + v) in every chunk, so it folds them in registers first."""
    lay = x.layout
    assert lay is not None
    inner = math.prod(x.shape[op.axis_index + 1 :])
    g = inner // lay.v
    comb = COMBINE[kind]
    parts = [em.fresh("col") for _ in range(lay.v)]
    for j, p in enumerate(parts):
        em.line(f"{acc_t} {p} = {_value(em, x, 0, j, ck)};")
        for k in range(1, lay.chunks):
            em.line(f"{p} = {comb.format(p, _value(em, x, k, j, ck))};")
    if g < 32:
        for p in parts:
            em.line(f"{p} = fo_strided_allreduce<{g}>({p}, {FUNCTOR[kind]});")
        holders, writer, row = em.warps, f"fo_lane < {g}", "fo_warp"
    else:
        holders, writer, row = lay.nt // g, None, f"(fo_tid / {g})"
    t = op.result.type
    assert isinstance(t, TensorType)
    elem = t.element_type
    ctype = op_table.c_type(elem)
    columns = Layout((inner,), lay.nt, lay.v)
    if holders == 1:  # every thread holds the totals of its columns
        name = em.fresh("cr")
        em.line(f"{ctype} {name}[{lay.v}];")
        for j, p in enumerate(parts):
            em.line(f"{name}[{j}] = {op_table.from_compute(p, elem)};")
        em.values[op.result] = Val("colred", name, tuple(t.get_shape()), elem, columns)
        return
    scratch = em.smem_alloc(acc_t, holders * inner, "cols")
    if em.loop_depth:
        em.barrier()
    em.open(f"if ({writer})" if writer else "")
    for j, p in enumerate(parts):
        em.line(f"{scratch}[{row} * {inner} + (fo_tid % {g}) * {lay.v} + {j}] = {p};")
    em.close()
    em.barrier()
    out = em.smem_alloc(ctype, inner, "red")
    em.open(f"for (int fo_o = fo_tid; fo_o < {inner}; fo_o += {em.nt})")
    em.line(f"{acc_t} fo_a = {scratch}[fo_o];")
    for w in range(1, holders):
        em.line(f"fo_a = {comb.format('fo_a', f'{scratch}[{w * inner} + fo_o]')};")
    em.line(f"{out}[fo_o] = {op_table.from_compute('fo_a', elem)};")
    em.close()
    em.barrier()
    array = Val("array", out, tuple(t.get_shape()), elem, array_ctype=ctype)
    name = em.fresh("cr")  # each thread's columns back in registers, for its slots
    em.line(f"{ctype} {name}[{lay.v}];")
    for j in range(lay.v):
        em.line(f"{name}[{j}] = {out}[(fo_tid % {g}) * {lay.v} + {j}];")
    em.values[op.result] = Val("colred", name, array.shape, elem, columns, extra={"array": array})


def _materialize(em, x: Val) -> Val:  # noqa: ANN001
    lay = em.layout(x.shape)
    out = em.new_dist(x.shape, x.elem, "t", lay)
    em.for_slots(lay, lambda k, j: f"{em.slot(out, k, j)} = {x.name};")
    return out


def _value(em, x: Val, k: int, j: int, ck: str) -> str:  # noqa: ANN001
    return op_table.to_compute(em.slot(x, k, j), x.elem, ck)


def _block(em, op, x: Val, kind: str, ck: str, acc_t: str, cpr: int, rows: int) -> None:  # noqa: ANN001
    lay = x.layout
    assert lay is not None
    per = max(1, cpr // lay.nt) if rows > 1 else lay.chunks
    comb, ident = COMBINE[kind], IDENTITY[(kind, ck)]
    parts = [em.fresh("part") for _ in range(rows)]
    for p in parts:
        em.line(f"{acc_t} {p} = {ident};")
    for k in range(lay.chunks):
        p = parts[min(k // per, rows - 1)]
        guard = lay.guarded and (k + 1) * lay.nt * lay.v > lay.n
        if guard:
            em.open(f"if ({lay.chunk_start(k)} < {lay.n})")
        for j in range(lay.v):
            em.line(f"{p} = {comb.format(p, _value(em, x, k, j, ck))};")
        if guard:
            em.close()
    block_allreduce(em, parts, kind, acc_t)
    _bind(em, op, x, parts, [min(k // per, rows - 1) for k in range(lay.chunks)], rows == 1)


def block_allreduce(em, parts: list[str], kind: str, acc_t: str) -> None:  # noqa: ANN001
    """Combine each variable of `parts` over the whole block; every thread gets the
    totals (warp shuffles, then the warps' partials through shared memory)."""
    comb = COMBINE[kind]
    for p in parts:
        em.line(f"{p} = fo_group_allreduce<32>({p}, {FUNCTOR[kind]});")
    if em.warps == 1:
        return
    scratch = em.smem_alloc(acc_t, len(parts) * em.warps, "red")
    if em.loop_depth:
        em.barrier()
    em.open("if (fo_lane == 0)")
    for r, p in enumerate(parts):
        em.line(f"{scratch}[{r * em.warps} + fo_warp] = {p};")
    em.close()
    em.barrier()
    for r, p in enumerate(parts):
        em.line(f"{p} = {scratch}[{r * em.warps}];")
        for w in range(1, em.warps):
            em.line(f"{p} = {comb.format(p, f'{scratch}[{r * em.warps + w}]')};")


def _group(em, op, x: Val, kind: str, ck: str, acc_t: str, cpr: int) -> None:  # noqa: ANN001
    lay = x.layout
    assert lay is not None
    comb = COMBINE[kind]
    parts = [em.fresh("part") for _ in range(lay.chunks)]
    for k, p in enumerate(parts):
        em.line(f"{acc_t} {p} = {_value(em, x, k, 0, ck)};")
        for j in range(1, lay.v):
            em.line(f"{p} = {comb.format(p, _value(em, x, k, j, ck))};")
        width = min(cpr, 32)
        if width > 1:
            em.line(f"{p} = fo_group_allreduce<{width}>({p}, {FUNCTOR[kind]});")
    if cpr > 32:
        wpr = cpr // 32
        scratch = em.smem_alloc(acc_t, lay.chunks * em.warps, "red")
        if em.loop_depth:
            em.barrier()
        em.open("if (fo_lane == 0)")
        for k, p in enumerate(parts):
            em.line(f"{scratch}[{k * em.warps} + fo_warp] = {p};")
        em.close()
        em.barrier()
        w0 = em.fresh("w0")
        em.line(f"const int {w0} = (fo_warp / {wpr}) * {wpr};")
        for k, p in enumerate(parts):
            em.line(f"{p} = {scratch}[{k * em.warps} + {w0}];")
            for i in range(1, wpr):
                em.line(f"{p} = {comb.format(p, f'{scratch}[{k * em.warps} + {w0} + {i}]')};")
    _bind(em, op, x, parts, list(range(lay.chunks)), False)


def _bind(em, op, x: Val, parts: list[str], row_of: list[int], uniform: bool) -> None:  # noqa: ANN001
    t = op.result.type
    assert isinstance(t, TensorType)
    elem = t.element_type
    ctype = op_table.c_type(elem)
    shape = tuple(t.get_shape())
    if uniform:
        name = em.fresh("red")
        em.line(f"const {ctype} {name} = {op_table.from_compute(parts[0], elem)};")
        em.values[op.result] = Val("uniform", name, shape, elem)
        return
    name = em.fresh("red")
    em.line(f"{ctype} {name}[{len(row_of)}];")
    for k, r in enumerate(row_of):
        em.line(f"{name}[{k}] = {op_table.from_compute(parts[r], elem)};")
    em.values[op.result] = Val("rowred", name, shape, elem, x.layout)


def _generic(em, op, x: Val, kind: str, ck: str, acc_t: str) -> None:  # noqa: ANN001
    t = op.result.type
    assert isinstance(t, TensorType)
    elem = t.element_type
    arr = em.as_array(x)
    shape, axis = x.shape, op.axis_index
    strides, acc = [0] * len(shape), 1
    for i in reversed(range(len(shape))):
        strides[i] = acc
        acc *= shape[i]
    out_shape = [d for i, d in enumerate(shape) if i != axis]
    out_dims = [i for i in range(len(shape)) if i != axis]
    n_out = 1
    for d in out_shape:
        n_out *= d
    ctype = op_table.c_type(elem)
    out = em.smem_alloc(ctype, n_out, "red")
    if em.loop_depth:
        em.barrier()
    em.open(f"for (int fo_o = fo_tid; fo_o < {n_out}; fo_o += {em.nt})")
    terms, inner = [], 1
    for d, i in reversed(list(zip(out_shape, out_dims, strict=True))):
        terms.append(f"(fo_o / {inner} % {d}) * {strides[i]}")
        inner *= d
    em.line(f"const long long fo_base = {' + '.join(terms) or '0'};")
    em.line(f"{acc_t} fo_a = {IDENTITY[(kind, ck)]};")
    em.open(f"for (int fo_r = 0; fo_r < {shape[axis]}; ++fo_r)")
    v = op_table.to_compute(em.read(arr, f"fo_base + fo_r * {strides[axis]}LL"), x.elem, ck)
    em.line(f"fo_a = {COMBINE[kind].format('fo_a', v)};")
    em.close()
    em.line(f"{out}[fo_o] = {op_table.from_compute('fo_a', elem)};")
    em.close()
    em.barrier()
    em.values[op.result] = Val("array", out, tuple(t.get_shape()), elem, array_ctype=ctype)


def reduce_handlers() -> dict[type[Operation], Callable]:
    """The printer handler of `tile.reduce`."""
    return {tile.ReduceOp: _emit_reduce}
