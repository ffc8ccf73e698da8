"""CUDA C++ for `tile.dot`: tensor cores through WMMA, with a scalar fallback.

A dot on bf16/f16 tiles whose M, N and K are multiples of 16 runs on tensor cores
(`nvcuda::wmma`, m16n16k16, f32 accumulation):

1. the operand tiles are staged in shared memory (`as_array`: the registers of the
   vectorized global loads are written to shared memory, then a barrier); an operand
   that is a `tile.transpose` of a loaded tile is never transposed: the untransposed
   tile is staged and read as a column-major WMMA operand;
2. the accumulator is an array of WMMA fragments (`values.FragInfo`): the warps form
   a grid, each owning a rectangle of 16x16 blocks; an accumulator carried by an
   `scf.for` (the K loop) stays in fragments across iterations;
3. the epilogue reads the accumulator through shared memory (`frag_to_array`), so
   the fused elementwise ops run on the usual register layout.

Other dots (f32 operands, odd sizes, batched tiles) multiply element by element from
shared memory, accumulating in f32; a transposed operand is read from its source's
array with the indices swapped, never transposed either.

The matmul K loop itself is printed as tile-promote staged its operands
(`pipeline.py`); what is here is the generic form of a dot.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import scf
from xdsl.dialects.builtin import BFloat16Type, Float16Type, TensorType, f32
from xdsl.ir import BlockArgument, Operation, SSAValue

from fuseopt.backends.cuda import op_table
from fuseopt.backends.cuda.values import FragInfo, Val
from fuseopt.dialects import tile

WMMA = "nvcuda::wmma"


def _shape(v: SSAValue) -> tuple[int, ...]:
    t = v.type
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def wmma_ok(op: tile.DotOp) -> bool:
    """Whether `op` runs on tensor cores (16-bit floats, 2-D, sizes multiple of 16)."""
    t = op.lhs.type
    assert isinstance(t, TensorType)
    a, b = _shape(op.lhs), _shape(op.rhs)
    if not isinstance(t.element_type, BFloat16Type | Float16Type) or len(a) != 2:
        return False
    return a[0] % 16 == 0 and a[1] % 16 == 0 and b[1] % 16 == 0


def only_feeds_dots(v: SSAValue) -> bool:
    """Whether every use of `v` is an operand (not the accumulator) of a dot."""
    uses = list(v.uses)
    return bool(uses) and all(isinstance(u.operation, tile.DotOp) and u.index < 2 for u in uses)


def warp_grid(mb: int, nb: int, warps: int) -> tuple[int, int]:
    """A wm x wn grid of warps over mb x nb blocks: balanced, exact where possible."""
    best: tuple[float, int, int] | None = None
    wm = 1
    while wm <= warps:
        wn = warps // wm
        if mb % wm == 0 and nb % wn == 0:
            score = abs(mb / wm - nb / wn)
            if best is None or score < best[0]:
                best = (score, wm, wn)
        wm *= 2
    if best is not None:
        return best[1], best[2]
    wm = 1
    while wm * 2 <= warps and mb % (wm * 2) == 0:
        wm *= 2
    wn = 1
    while wm * wn * 2 <= warps and nb % (wn * 2) == 0:
        wn *= 2
    return wm, wn


def new_frag(em, m: int, n: int, init: Val | None) -> Val:  # noqa: ANN001
    """Declare accumulator fragments for an [m, n] tile, initialized from `init`."""
    wm, wn = warp_grid(m // 16, n // 16, em.warps)
    info = FragInfo(m, n, wm, wn, m // 16 // wm, n // 16 // wn)
    em.uses_wmma = True
    name = em.fresh("acc")
    em.line(f"{WMMA}::fragment<{WMMA}::accumulator, 16, 16, 16, float> {name}[{info.count}];")
    out = Val("frag", name, (m, n), f32, frag=info)
    if init is None or init.kind == "uniform":
        value = "0.0f" if init is None else op_table.to_compute(init.name, init.elem, "float")
        em.open(f"for (int fo_i = 0; fo_i < {info.count}; ++fo_i)")
        em.line(f"{WMMA}::fill_fragment({name}[fo_i], {value});")
        em.close()
    else:
        _load_frag(em, out, init)
    return out


def _float_array(em, x: Val) -> Val:  # noqa: ANN001
    arr = em.as_array(x)
    if arr.array_ctype == "float":
        return arr
    name = em.smem_alloc("float", x.n, "accin")
    em.open(f"for (int fo_i = fo_tid; fo_i < {x.n}; fo_i += {em.nt})")
    em.line(f"{name}[fo_i] = {op_table.to_compute(em.read(arr, 'fo_i'), x.elem, 'float')};")
    em.close()
    em.barrier()
    return Val("array", name, x.shape, f32, array_ctype="float")


def _load_frag(em, frag: Val, x: Val) -> None:  # noqa: ANN001
    """Load fragments `frag` from tile `x` (through shared memory)."""
    info = frag.frag
    assert info is not None
    arr = _float_array(em, x)
    em.open(f"if (fo_warp < {info.wm * info.wn})")
    for i in range(info.fm):
        for j in range(info.fn):
            em.line(
                f"{WMMA}::load_matrix_sync({frag.name}[{i * info.fn + j}], {arr.name} + "
                f"({info.row(i)}) * {info.n} + {info.col(j)}, {info.n}, {WMMA}::mem_row_major);"
            )
    em.close()


def frag_to_array(em, x: Val) -> Val:  # noqa: ANN001
    """The accumulator `x` stored row-major to shared memory (f32)."""
    info = x.frag
    assert info is not None
    cached = x.extra.get("array")
    if cached is not None and not em.loop_depth:
        return cached
    name = em.smem_alloc("float", info.m * info.n, "accsm")
    if em.loop_depth:
        em.barrier()
    em.open(f"if (fo_warp < {info.wm * info.wn})")
    for i in range(info.fm):
        for j in range(info.fn):
            em.line(
                f"{WMMA}::store_matrix_sync({name} + ({info.row(i)}) * {info.n} + "
                f"{info.col(j)}, {x.name}[{i * info.fn + j}], {info.n}, {WMMA}::mem_row_major);"
            )
    em.close()
    em.barrier()
    out = Val("array", name, (info.m, info.n), f32, array_ctype="float")
    if not em.loop_depth:
        x.extra["array"] = out
    return out


def carried_frag(em, loop: scf.ForOp, arg: BlockArgument, init: Val) -> Val | None:  # noqa: ANN001
    """Fragments for loop-carried `arg` when it is only a WMMA dot's accumulator and
    the loop yields that dot's result; None otherwise."""
    uses = list(arg.uses)
    if len(uses) != 1:
        return None
    dot = uses[0].operation
    if not isinstance(dot, tile.DotOp) or uses[0].index != 2 or not wmma_ok(dot):
        return None
    yielded = loop.body.block.last_op
    pos = arg.index - 1
    if not isinstance(yielded, scf.YieldOp) or yielded.operands[pos] is not dot.result:
        return None
    m, n = _shape(dot.acc)
    return new_frag(em, m, n, init)


def assign_frag(em, target: Val, new: Val) -> None:  # noqa: ANN001
    """`target = new` for accumulator fragments (a copy, or a load from a tile)."""
    info = target.frag
    assert info is not None
    if new.kind == "frag" and new.frag == info:
        em.open(f"for (int fo_i = 0; fo_i < {info.count}; ++fo_i)")
        em.open(f"for (int fo_e = 0; fo_e < {target.name}[fo_i].num_elements; ++fo_e)")
        em.line(f"{target.name}[fo_i].x[fo_e] = {new.name}[fo_i].x[fo_e];")
        em.close()
        em.close()
        return
    _load_frag(em, target, new)


def _stage(em, x: Val) -> tuple[str, int]:  # noqa: ANN001
    """Stage 2-D tile `x` in shared memory with padded rows; (array, leading dim).

    Rows are padded by 16 bytes so the 16 rows a WMMA load reads fall in different
    banks; chunks are written by vector stores.
    """
    rows, cols = x.shape
    lay = x.layout
    ctype = op_table.c_type(x.elem)
    row_bytes = cols * op_table.element_bytes(x.elem)
    if x.kind != "dist" or lay is None or cols % lay.v or row_bytes % 16:
        arr = em.as_array(x)
        return arr.name, cols
    ld = cols + 16 // op_table.element_bytes(x.elem)
    name = em.smem_alloc(ctype, rows * ld, "stage")
    if em.loop_depth:
        em.barrier()
    for k in range(lay.chunks):
        start = lay.chunk_start(k)
        text = (
            f"fo_copy_vec<{ctype}, {lay.v}>(&{name}[({start} / {cols}) * {ld} + {start} % {cols}], "
            f"&{x.name}[{k * lay.v}]);"
        )
        guard = lay.guarded and (k + 1) * lay.nt * lay.v > lay.n
        em.line(f"if ({start} < {lay.n}) {text}" if guard else text)
    em.barrier()
    return name, ld


def _operand(em, v: SSAValue) -> tuple[str, str, int] | None:  # noqa: ANN001
    """(shared array, WMMA layout, leading dim) of a dot operand, or None when its
    staged form cannot feed WMMA."""
    raw = em.values[v]
    transposed = isinstance(raw, Val) and raw.kind == "lazy" and "transpose_of" in raw.extra
    x = em.val(raw.extra["transpose_of"]) if transposed else em.val(v)
    if x.kind == "array":
        if x.array_ctype != op_table.c_type(x.elem):
            return None
        name, ld = x.name, x.shape[-1]
    else:
        name, ld = _stage(em, x)
    # a transposed operand is stored [cols, rows]: read it column-major
    return name, "col_major" if transposed else "row_major", ld


def emit_products(  # noqa: ANN001
    em, acc: Val, ctype: str, a: tuple[str, str, int], b: tuple[str, str, int], k: int
) -> None:
    """`acc += A @ B` over K = `k` with WMMA, each warp on its blocks of `acc`.

    `a` and `b` are (shared-memory base expression, "row_major" or "col_major", leading
    dim) of the operands as staged.
    """
    info = acc.frag
    assert info is not None
    (an, al, lda), (bn, bl, ldb) = a, b
    em.open(f"if (fo_warp < {info.wm * info.wn})")
    em.line("#pragma unroll")
    em.open(f"for (int fo_kk = 0; fo_kk < {k}; fo_kk += 16)")
    for name, use, lay, count in (
        ("fo_fa", "matrix_a", al, info.fm),
        ("fo_fb", "matrix_b", bl, info.fn),
    ):
        em.line(
            f"{WMMA}::fragment<{WMMA}::{use}, 16, 16, 16, {ctype}, {WMMA}::{lay}> {name}[{count}];"
        )
    for i in range(info.fm):
        row = f"({info.row(i)})"
        off = f"{row} * {lda} + fo_kk" if al == "row_major" else f"fo_kk * {lda} + {row}"
        em.line(f"{WMMA}::load_matrix_sync(fo_fa[{i}], {an} + {off}, {lda});")
    for j in range(info.fn):
        col = f"({info.col(j)})"
        off = f"fo_kk * {ldb} + {col}" if bl == "row_major" else f"{col} * {ldb} + fo_kk"
        em.line(f"{WMMA}::load_matrix_sync(fo_fb[{j}], {bn} + {off}, {ldb});")
    for i in range(info.fm):
        for j in range(info.fn):
            f = f"{acc.name}[{i * info.fn + j}]"
            em.line(f"{WMMA}::mma_sync({f}, fo_fa[{i}], fo_fb[{j}], {f});")
    em.close()
    em.close()


def _emit_dot(em, op: tile.DotOp) -> None:  # noqa: ANN001
    if not wmma_ok(op):
        _scalar_dot(em, op)
        return
    m, k = _shape(op.lhs)
    n = _shape(op.rhs)[1]
    a = _operand(em, op.lhs)
    b = _operand(em, op.rhs)
    if a is None or b is None:
        _scalar_dot(em, op)
        return
    acc = em.val(op.acc)
    if acc.kind == "frag" and acc.frag is not None and len(list(op.acc.uses)) == 1:
        target = acc
    else:
        target = new_frag(em, m, n, acc)
    info = target.frag
    assert info is not None
    ctype = op_table.c_type(op.lhs.type.element_type)  # type: ignore[union-attr]
    emit_products(em, target, ctype, a, b, k)
    em.values[op.result] = target


def _scalar_operand(em, v: SSAValue) -> tuple[Val, bool]:  # noqa: ANN001
    """Dot operand `v` as a shared array, and whether that array holds it transposed.

    A loaded tile is staged once, however many dots read it (a loaded tile is never
    written again, so its array stays valid), where the staging code has run: in the
    loop that staged it (or a loop inside that), never after a loop whose body staged
    it, since that body may have run no iteration."""
    raw = em.values[v]
    transposed = isinstance(raw, Val) and raw.kind == "lazy" and "transpose_of" in raw.extra
    x = em.val(raw.extra["transpose_of"]) if transposed else em.val(v)  # type: ignore[union-attr]
    if "load" not in x.extra:
        return em.as_array(x), transposed
    staged = x.extra.get("array")
    if staged is None or em.loop_path[: len(staged[1])] != staged[1]:
        staged = (em.as_array(x), em.loop_path)
        x.extra["array"] = staged
    return staged[0], transposed


def _scalar_dot(em, op: tile.DotOp) -> None:  # noqa: ANN001
    """acc + a @ b element by element from shared memory (f32 accumulation)."""
    (a, at), (b, bt) = _scalar_operand(em, op.lhs), _scalar_operand(em, op.rhs)
    sa, sb, sc = _shape(op.lhs), _shape(op.rhs), _shape(op.acc)
    acc = em.as_dist(em.val(op.acc), em.layout(sc))
    out = em.new_dist(sc, f32, "dot", em.layout(sc))
    lay = out.layout
    assert lay is not None
    m, k, n = sa[-2], sa[-1], sb[-1]
    for kc in range(lay.chunks):
        for j in range(lay.v):
            em.open("")
            em.line(f"const int fo_e = {lay.chunk_start(kc)} + {j};")
            em.line(f"const int fo_b = fo_e / {m * n}, fo_m = fo_e / {n} % {m}, fo_n = fo_e % {n};")
            em.line(f"float fo_s = {op_table.to_compute(em.slot(acc, kc, j), f32, 'float')};")
            em.open(f"if (fo_e < {lay.n})")
            em.open(f"for (int fo_q = 0; fo_q < {k}; ++fo_q)")
            ai = f"fo_q * {m} + fo_m" if at else f"fo_m * {k} + fo_q"
            bi = f"fo_n * {k} + fo_q" if bt else f"fo_q * {n} + fo_n"
            x = op_table.to_compute(em.read(a, f"fo_b * {m * k} + {ai}"), a.elem, "float")
            y = op_table.to_compute(em.read(b, f"fo_b * {k * n} + {bi}"), b.elem, "float")
            em.line(f"fo_s += {x} * {y};")
            em.close()
            em.close()
            em.line(f"{em.slot(out, kc, j)} = fo_s;")
            em.close()
    em.values[op.result] = out


def dot_handlers() -> dict[type[Operation], Callable]:
    """The printer handler of `tile.dot`."""
    return {tile.DotOp: _emit_dot}
