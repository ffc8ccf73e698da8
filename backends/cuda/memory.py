"""CUDA C++ for the tile memory ops: load, gather, store, copy, mask, alloc, view, barrier.

Every access goes chunk by chunk through a dist layout (`values.Layout`): a chunk is
`v` consecutive elements of one row of the box, so it is consecutive in the buffer.
A chunk that is wholly in bounds and whose address is aligned is moved by one
vector access (16 bytes where the chunk is 16 bytes: `fo_copy_vec`); any other chunk
(the ragged edge, a misaligned view) goes element by element under the bounds mask,
which is the scalar tail. Inside a loop the tail is a rolled loop (`#pragma unroll 1`)
through a small local array: unrolled, ptxas turns the branch into predicated code,
so every chunk of every iteration issues the tail's scalar loads too (a looped column
sum ran 1.5x slower that way once its bounds tests were dropped); a loop cannot be
predicated. Outside loops the tail stays unrolled: there the predicated form costs
once, and the rolled one cost a row-of-8 LayerNorm kernel registers, occupancy and a
third of its speed (H200: benchmarks/results/nvidia-h200/cuda_chunk_addressing_086db57).
Coordinates inside a tile are `int`; global element indices are `long long`, since
buffers may exceed 2^31 elements.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects import scf
from xdsl.dialects.builtin import MemRefType, TensorType
from xdsl.ir import BlockArgument, Operation

from fuseopt.backends.cuda import op_table
from fuseopt.backends.cuda.index_facts import UNKNOWN, IndexFact
from fuseopt.backends.cuda.index_vectors import index_along, iota_expression
from fuseopt.backends.cuda.values import Buffer, Layout, Val, c_size
from fuseopt.dialects import tile
from fuseopt.dialects.syntax import array_values


class ChunkAccess:
    """C expressions locating chunk `k` of a box at `offsets` of buffer `buf`.

    After `open()` the current scope defines `fo_g` (global index of the chunk's first
    element), `fo_ok` (every dim but the last in bounds, and the chunk inside the
    tile) and `fo_c` (the buffer coordinate of the chunk's first element along the
    last dim); `elem_ok(j)` and `whole()` test the last dim, `aligned(bytes)` the
    chunk's address.

    `facts` (one `index_facts.IndexFact` per offset; unknown when omitted) drop the
    bounds tests that hold for every program, and when every chunk's first index is a
    multiple of the chunk's length, alignment is tested on the buffer's pointer (one
    test a kernel, after the compiler's common subexpressions) instead of per chunk.
    """

    def __init__(
        self,
        buf: Buffer,
        offsets: list[str],
        lay: Layout,
        prefix: str = "fo",
        facts: list[IndexFact] | None = None,
    ):
        self.buf, self.offsets, self.lay, self.p = buf, offsets, lay, prefix
        self.box = lay.shape
        self.lead = len(buf.shape) - len(self.box)
        if self.lead < 0:
            raise ValueError(f"a tile of rank {len(self.box)} does not fit {buf.shape}")
        self.facts = facts if facts is not None else [UNKNOWN] * len(offsets)
        last = len(buf.shape) - 1
        self.last_inside = self._inside(last, self.box[-1] if self.box else 1)
        """Every element of every chunk is inside the last dim, for every program."""
        self.starts_at_multiples = self._starts_at_multiples()
        """Every chunk's first index is a multiple of the chunk length `v`, for every
        program: then a chunk is aligned exactly when the pointer is."""

    def _inside(self, i: int, extent: int) -> bool:
        """Whether offset `i` plus any coordinate below `extent` is inside dim `i` of
        the buffer for every program."""
        return self.facts[i].fits(extent, self.buf.shape[i])

    def lines(self, k: int, start: str | None = None, guard: str | None = None) -> list[str]:
        """Declarations of `<p>_g`, `<p>_ok` and `<p>_c` for chunk `k` (or for the chunk
        starting at flat box index `start`, in bounds when `guard` holds)."""
        p, lay, box, buf = self.p, self.lay, self.box, self.buf
        strides = buf.strides()
        out = [f"const int {p}_f = {start or lay.chunk_start(k)};"]
        terms: list[str] = [f"{buf.offset}LL"] if buf.offset else []
        conds: list[str] = []
        if start is not None:
            conds += [guard] if guard else []
        elif lay.guarded and (k + 1) * lay.nt * lay.v > lay.n:
            conds.append(f"{p}_f < {lay.n}")
        for i in range(self.lead):
            off = self.offsets[i]
            terms.append(f"{off} * {c_size(strides[i])}")
            if not self._inside(i, 1):
                conds.append(f"{off} < {buf.shape[i]}")
        inner = 1
        coords: list[str] = [""] * len(box)
        for d in reversed(range(len(box))):
            coords[d] = f"({p}_f / {inner} % {box[d]})" if inner > 1 else f"({p}_f % {box[d]})"
            inner *= box[d]
        last = len(buf.shape) - 1
        for d, c in enumerate(coords):
            i = self.lead + d
            pos = f"({self.offsets[i]} + {c})"
            terms.append(f"{pos} * {c_size(strides[i])}" if strides[i] != 1 else pos)
            if i != last and not self._inside(i, box[d]):
                conds.append(f"{pos} < {buf.shape[i]}")
        out.append(f"const long long {p}_g = {' + '.join(terms) or '0LL'};")
        out.append(f"const bool {p}_ok = {' && '.join(conds) or 'true'};")
        if box:
            out.append(f"const long long {p}_c = {self.offsets[last]} + {coords[-1]};")
        else:
            out.append(f"const long long {p}_c = {self.offsets[last]};")
        return out

    def at(self, j: int | str) -> str:
        """The index of element j of the chunk (its last-dim stride apart; `j` a number
        or a C expression)."""
        step = self.buf.strides()[-1] if self.buf.shape else 1
        if isinstance(j, int) and isinstance(step, int):
            return f"{self.p}_g + {j * step}"
        return f"{self.p}_g + {j}" if step == 1 else f"{self.p}_g + {j} * ({step})"

    def elem_ok(self, j: int | str) -> str:
        """Element j of the chunk is in bounds."""
        if self.last_inside:
            return f"{self.p}_ok"
        return f"{self.p}_ok && {self.p}_c + {j} < {self.buf.shape[-1]}"

    def whole(self) -> str:
        """The whole chunk is in bounds."""
        if self.last_inside:
            return f"{self.p}_ok"
        return f"{self.p}_ok && {self.p}_c + {self.lay.v} <= {self.buf.shape[-1]}"

    def aligned(self, vector_bytes: str) -> str:
        """The chunk's address is a multiple of `vector_bytes` (a C expression)."""
        base = self.buf.name if self.starts_at_multiples else f"{self.buf.name} + {self.p}_g"
        return f"fo_aligned({base}, {vector_bytes})"

    def _starts_at_multiples(self) -> bool:
        v, strides, box = self.lay.v, self.buf.strides(), self.box
        if v == 1:
            return True
        if self.buf.offset % v or (box and box[-1] % v):
            return False
        for i, (fact, stride) in enumerate(zip(self.facts, strides, strict=True)):
            if not isinstance(stride, int) or (fact.multiple * stride) % v:
                return False
            if self.lead <= i < len(strides) - 1 and stride % v:
                return False  # a box coordinate of any value along this dim
        return not box or strides[-1] == 1


def _vec(ctype: str, v: int) -> str:
    return f"fo_vec_bytes<{ctype}, {v}>()"


def _load_chunk(em, acc: ChunkAccess, out: Val, k: int, fill: str, lines: list[str]) -> None:  # noqa: ANN001
    """Chunk `k` of dist tile `out` from the chunk `acc` locates with `lines`: one vector
    load when whole and aligned, else element by element under the mask."""
    lay = out.layout
    assert lay is not None
    buf = acc.buf
    ctype = op_table.c_type(buf.elem)
    em.open("")
    for text in lines:
        em.line(text)
    vector = lay.v > 1 and buf.unit_last
    if vector:
        em.open(f"if ({acc.whole()} && {acc.aligned(_vec(ctype, lay.v))})")
        em.line(f"fo_copy_vec<{ctype}, {lay.v}>(&{out.name}[{k * lay.v}], {buf.name} + fo_g);")
        em.close()
        em.open("else")
    if vector and em.loop_depth:  # the scalar tail, a rolled loop (module doc)
        em.line(f"{ctype} fo_e[{lay.v}];")
        em.line("#pragma unroll 1")
        em.line(
            f"for (int fo_j = 0; fo_j < {lay.v}; ++fo_j) "
            f"fo_e[fo_j] = ({acc.elem_ok('fo_j')}) ? {buf.name}[{acc.at('fo_j')}] : {fill};"
        )
        for j in range(lay.v):
            em.line(f"{out.name}[{k * lay.v + j}] = fo_e[{j}];")
    else:
        for j in range(lay.v):
            em.line(
                f"{out.name}[{k * lay.v + j}] = ({acc.elem_ok(j)}) ? "
                f"{buf.name}[{acc.at(j)}] : {fill};"
            )
    if vector:
        em.close()
    em.close()


def emit_load_into(
    em,  # noqa: ANN001
    buf: Buffer,
    offsets: list[str],
    out: Val,
    fill: str,
    facts: list[IndexFact] | None = None,
) -> None:
    """Fill dist tile `out` from the box of `buf` at `offsets` (masked with `fill`;
    `facts` of the offsets as `ChunkAccess` takes them)."""
    lay = out.layout
    assert lay is not None
    acc = ChunkAccess(buf, offsets, lay, facts=facts)
    for k in range(lay.chunks):
        _load_chunk(em, acc, out, k, fill, acc.lines(k))


def emit_broadcast_load(em, x: Val, out: Val) -> bool:  # noqa: ANN001
    """Fill `out` (x broadcast along new leading dims) by reading x's source buffer again
    at each of out's chunks (cache hits), instead of exchanging x between threads
    through shared memory. False when `x` is not a load of a read-only global buffer."""
    src = x.extra.get("load")
    lay = out.layout
    if src is None or lay is None or not x.shape or x.shape[-1] % lay.v:
        return False
    buf, offsets, fill, facts = src
    if buf.shared or not buf.readonly:
        return False
    xlay = Layout(x.shape, lay.nt, lay.v)
    acc = ChunkAccess(buf, offsets, xlay, facts=facts)
    for k in range(lay.chunks):
        guard = None
        if lay.guarded and (k + 1) * lay.nt * lay.v > lay.n:
            guard = f"{lay.chunk_start(k)} < {lay.n}"
        lines = acc.lines(k, f"{lay.chunk_start(k)} % {xlay.n}", guard)
        _load_chunk(em, acc, out, k, fill, lines)
    return True


def emit_store_from(
    em,  # noqa: ANN001
    x: Val,
    buf: Buffer,
    offsets: list[str],
    facts: list[IndexFact] | None = None,
) -> None:
    """Store dist tile `x` into the box of `buf` at `offsets` (skipping out-of-bounds;
    `facts` of the offsets as `ChunkAccess` takes them)."""
    lay = x.layout
    assert lay is not None
    acc = ChunkAccess(buf, offsets, lay, facts=facts)
    ctype = op_table.c_type(buf.elem)
    for k in range(lay.chunks):
        em.open("")
        for text in acc.lines(k):
            em.line(text)
        vector = lay.v > 1 and x.kind == "dist" and buf.unit_last
        if vector:
            em.open(f"if ({acc.whole()} && {acc.aligned(_vec(ctype, lay.v))})")
            em.line(f"fo_copy_vec<{ctype}, {lay.v}>({buf.name} + fo_g, &{x.name}[{k * lay.v}]);")
            em.close()
            em.open("else")
        if vector and em.loop_depth:  # the scalar tail, a rolled loop (module doc)
            em.line(f"{ctype} fo_e[{lay.v}];")
            for j in range(lay.v):
                em.line(f"fo_e[{j}] = {em.slot(x, k, j)};")
            em.line("#pragma unroll 1")
            em.line(
                f"for (int fo_j = 0; fo_j < {lay.v}; ++fo_j) "
                f"if ({acc.elem_ok('fo_j')}) {buf.name}[{acc.at('fo_j')}] = fo_e[fo_j];"
            )
        else:
            for j in range(lay.v):
                em.line(f"if ({acc.elem_ok(j)}) {buf.name}[{acc.at(j)}] = {em.slot(x, k, j)};")
        if vector:
            em.close()
        em.close()


def _offsets(em, values) -> list[str]:  # noqa: ANN001
    return [em.scalar(v) for v in values]


def _facts(em, values) -> list[IndexFact]:  # noqa: ANN001
    return [em.index_facts.of(v) for v in values]


def _emit_load(em, op: tile.LoadOp) -> None:  # noqa: ANN001
    buf = em.buffer(op.buffer)
    t = op.result.type
    assert isinstance(t, TensorType)
    shape = tuple(t.get_shape())
    out = em.new_dist(shape, t.element_type, "ld")
    fill = op_table.literal(op.fill_value, t.element_type)
    offsets, facts = _offsets(em, op.offsets), _facts(em, op.offsets)
    emit_load_into(em, buf, offsets, out, fill, facts)
    out.extra["load"] = (buf, offsets, fill, facts)
    em.values[op.result] = out


def _emit_gather(em, op: tile.GatherOp) -> None:  # noqa: ANN001
    """Each slot reads the buffer at its own flat position (0 outside the buffer)."""
    buf = em.buffer(op.buffer)
    t = op.result.type
    assert isinstance(t, TensorType)
    out = em.new_dist(tuple(t.get_shape()), t.element_type, "gather")
    index = em.as_dist(em.val(op.index), out.layout)
    fill = op_table.literal(0, t.element_type)
    numel = buf.numel

    def read(k: int, j: int) -> str:
        at = f"(long long)({em.slot(index, k, j)})"
        slot = em.slot(out, k, j)
        return f"{slot} = ({at} >= 0 && {at} < {numel}) ? {buf.name}[{at}] : {fill};"

    em.for_slots(out.layout, read)
    em.values[op.result] = out


def _emit_store(em, op: tile.StoreOp) -> None:  # noqa: ANN001
    buf = em.buffer(op.buffer)
    x = em.val(op.value)
    t = op.value.type
    assert isinstance(t, TensorType)
    shape = tuple(t.get_shape())
    own = x.layout if x.kind in ("dist", "chunk") else None
    lay = own if own is not None and own.shape == shape else em.layout(shape)
    if x.kind == "uniform":
        x = Val("uniform", x.name, shape, x.elem, lay)
    elif not (x.kind in ("dist", "chunk") and x.layout == lay):
        x = em.as_dist(x, lay)
    emit_store_from(em, x, buf, _offsets(em, op.offsets), _facts(em, op.offsets))


def _emit_copy(em, op: tile.CopyOp) -> None:  # noqa: ANN001
    emit_copy(em, op)


def emit_copy(em, op: tile.CopyOp, use_async: bool = False) -> None:  # noqa: ANN001
    """A box copy chunk by chunk; with `use_async`, 16-byte chunks go by cp.async (the
    caller commits and waits)."""
    src, dst = em.buffer(op.source), em.buffer(op.dest)
    box = tuple(array_values(op.shape))
    lay = em.layout(box)
    s = ChunkAccess(src, _offsets(em, op.src_offsets), lay, "fo_s", _facts(em, op.src_offsets))
    d = ChunkAccess(dst, _offsets(em, op.dst_offsets), lay, "fo_d", _facts(em, op.dst_offsets))
    ctype = op_table.c_type(src.elem)
    if em.loop_depth and not _indexed_by_loop(op.dst_offsets):
        em.barrier()  # earlier iterations' readers of the destination are done
    for k in range(lay.chunks):
        em.open("")
        for text in [*s.lines(k), *d.lines(k)]:
            em.line(text)
        if lay.v > 1:
            vb = _vec(ctype, lay.v)
            em.open(f"if ({s.whole()} && {d.whole()} && {s.aligned(vb)} && {d.aligned(vb)})")
            if use_async and lay.v * op_table.element_bytes(src.elem) == 16:
                em.line(f"fo_cp_async16({dst.name} + fo_d_g, {src.name} + fo_s_g);")
                em.uses_cp_async = True
            else:
                em.line(f"fo_copy_vec<{ctype}, {lay.v}>({dst.name} + fo_d_g, {src.name} + fo_s_g);")
            em.close()
            em.open("else")  # the scalar tail (module doc)
            if em.loop_depth:
                em.line("#pragma unroll 1")
            em.line(
                f"for (int fo_j = 0; fo_j < {lay.v}; ++fo_j) "
                f"if (({s.elem_ok('fo_j')}) && ({d.elem_ok('fo_j')})) "
                f"{dst.name}[fo_d_g + fo_j] = {src.name}[fo_s_g + fo_j];"
            )
            em.close()
        else:
            em.line(
                f"if (({s.elem_ok(0)}) && ({d.elem_ok(0)})) "
                f"{dst.name}[fo_d_g + 0] = {src.name}[fo_s_g + 0];"
            )
        em.close()


def _indexed_by_loop(offsets) -> bool:  # noqa: ANN001
    """Whether some offset is a loop's induction variable: then each iteration writes a
    region of its own, and no reader of an earlier iteration's region can be raced."""
    return any(
        isinstance(o, BlockArgument) and o.index == 0 and isinstance(o.owner.parent_op(), scf.ForOp)
        for o in offsets
    )


def _emit_mask(em, op: tile.MaskOp) -> None:  # noqa: ANN001
    t = op.result.type
    assert isinstance(t, TensorType)
    shape = tuple(t.get_shape())
    bounds = [b if isinstance(b, int) else em.scalar(b) for b in op.bound_sizes]
    offs, facts = _offsets(em, op.offsets), _facts(em, op.offsets)
    out = em.new_dist(shape, t.element_type, "mask")
    lay = out.layout
    assert lay is not None
    # the dims whose test holds for every program and every element
    inside = [f.fits(extent, n) for n, f, extent in zip(bounds, facts, shape, strict=True)]
    for k in range(lay.chunks):
        for j in range(lay.v):
            flat = f"({lay.chunk_start(k)} + {j})"
            conds, inner = [], 1
            for d in reversed(range(len(shape))):
                c = f"{flat} / {inner} % {shape[d]}" if inner > 1 else f"{flat} % {shape[d]}"
                if not inside[d]:
                    conds.append(f"{offs[d]} + {c} < {bounds[d]}")
                inner *= shape[d]
            em.line(f"{out.name}[{k * lay.v + j}] = {' && '.join(conds) or 'true'};")
    em.values[op.result] = out


def _emit_iota(em, op: tile.IotaOp) -> None:  # noqa: ANN001
    """Each slot's `start + step * (offset + position)` in 64-bit integers, converted
    to the tile's element type."""
    t = op.result.type
    assert isinstance(t, TensorType)
    shape = tuple(t.get_shape())
    dim = 0 if shape else None
    em.values[op.result] = index_along(em, iota_expression(em, op), t.element_type, shape, dim)


def _emit_alloc(em, op: tile.AllocOp) -> None:  # noqa: ANN001
    t = op.result.type
    assert isinstance(t, MemRefType)
    shape = tuple(t.get_shape())
    if tile.memory_space(t) != tile.MemorySpace.SHARED:
        raise ValueError("a kernel allocates shared memory only")
    name = em.smem_alloc(op_table.c_type(t.element_type), math.prod(shape), "shared")
    em.values[op.result] = Buffer(name, shape, t.element_type, True)


def _emit_view(em, op: tile.ViewOp) -> None:  # noqa: ANN001
    if op.element_offset:
        raise ValueError("a tile.view at an offset inside a kernel (host views only)")
    src = em.buffer(op.source)
    t = op.result.type
    assert isinstance(t, MemRefType)
    em.values[op.result] = Buffer(
        src.name, tuple(t.get_shape()), src.elem, src.shared, src.readonly
    )


def _emit_dim(em, op: tile.DimOp) -> None:  # noqa: ANN001
    """A static dim is its number; a dynamic one the kernel's size parameter."""
    n = em.buffer(op.buffer).shape[op.index]
    em.values[op.result] = op_table.int_literal(n) if isinstance(n, int) else n


def _emit_barrier(em, op: tile.BarrierOp) -> None:  # noqa: ANN001
    em.barrier()


def memory_handlers() -> dict[type[Operation], Callable]:
    """The printer handlers of the memory ops, by op class."""
    return {
        tile.LoadOp: _emit_load,
        tile.GatherOp: _emit_gather,
        tile.StoreOp: _emit_store,
        tile.CopyOp: _emit_copy,
        tile.MaskOp: _emit_mask,
        tile.IotaOp: _emit_iota,
        tile.AllocOp: _emit_alloc,
        tile.ViewOp: _emit_view,
        tile.BarrierOp: _emit_barrier,
        tile.DimOp: _emit_dim,
    }
