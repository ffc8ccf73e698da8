"""The matmul K loop as a `num_stages` cp.async pipeline (tile-promote's operand staging).

Applies to an `scf.for` whose body is only: loads of 16-bit operand tiles from global
buffers (at offsets that are loop-invariant or the induction variable), optional
`[1, 0]` transposes of them, WMMA-able `tile.dot`s each accumulating into one of the
loop's iter_args (several dots may share an operand: gate and up projections), and
the yield of their results. Then, with S = num_stages (at least 2):

1. each operand gets S shared-memory stages of padded rows; the prologue issues the
   asynchronous copies (`cp.async`, 16 bytes, global -> shared without registers) of
   the first S - 1 iterations, one commit group per iteration;
2. iteration i waits until at most S - 2 groups are pending (its own has landed),
   `__syncthreads()` (its data is visible; everyone is done with iteration i - 1),
   issues the copies of iteration i + S - 1 into the stage iteration i - 1 used, and
   runs the WMMA products of iteration i from its stage;
3. chunks at a ragged edge or misaligned are written synchronously (zero outside the
   buffer), so masking stays exact.

Any other loop is printed by the generic path (`kernel_emitter._emit_for`).
"""

from __future__ import annotations

from xdsl.dialects import scf
from xdsl.dialects.builtin import BFloat16Type, Float16Type, IntegerAttr, TensorType
from xdsl.ir import Operation, SSAValue

from fuseopt.backends.cuda import op_table
from fuseopt.backends.cuda.dot import emit_products, new_frag, wmma_ok
from fuseopt.backends.cuda.memory import ChunkAccess
from fuseopt.backends.cuda.values import Buffer, Layout
from fuseopt.dialects import tile
from fuseopt.dialects.syntax import array_values

PIPELINE_SMEM = 128 * 1024
"""Shared memory the operand stages may take (the epilogue needs room after them)."""


def _inside(v: SSAValue, loop: scf.ForOp) -> bool:
    op = v.owner if isinstance(v.owner, Operation) else v.owner.parent_op()
    while op is not None:
        if op is loop:
            return True
        op = op.parent_op()
    return False


def _operand_load(v: SSAValue) -> tuple[tile.LoadOp, bool] | None:
    """The load feeding dot operand `v` and whether it is transposed on the way."""
    owner = v.owner
    transposed = False
    if isinstance(owner, tile.TransposeOp):
        if list(array_values(owner.permutation)) != [1, 0]:
            return None
        owner, transposed = owner.input.owner, True
    if not isinstance(owner, tile.LoadOp):
        return None
    return owner, transposed


def _feeds_dots_only(v: SSAValue) -> bool:
    """Every use of `v` is a dot operand (a, b), directly or through a transpose."""
    for use in v.uses:
        user = use.operation
        if isinstance(user, tile.DotOp):
            if use.index >= 2:
                return False
        elif isinstance(user, tile.TransposeOp):
            if not _feeds_dots_only(user.result):
                return False
        else:
            return False
    return True


Operand = tuple[tile.LoadOp, bool]


def _match(loop: scf.ForOp) -> tuple[list[tile.DotOp], list[tile.LoadOp]] | None:
    """(the dots in iter_arg order, the distinct operand loads) when `loop` is a K loop
    of WMMA dots over operand loads only; None otherwise."""
    body = loop.body.block
    accs = list(body.args[1:])
    ops = list(body.ops)
    dots = [o for o in ops if isinstance(o, tile.DotOp)]
    yielded = body.last_op
    if not dots or len(dots) != len(accs) or not isinstance(yielded, scf.YieldOp):
        return None
    by_acc = {d.acc: d for d in dots}
    if set(by_acc) != set(accs) or not all(wmma_ok(d) for d in dots):
        return None
    ordered = [by_acc[a] for a in accs]
    if list(yielded.operands) != [d.result for d in ordered]:
        return None
    if any(len(list(a.uses)) != 1 for a in accs):
        return None
    loads: list[tile.LoadOp] = []
    allowed: set[Operation] = {yielded, *dots}
    for d in dots:
        for v in (d.lhs, d.rhs):
            got = _operand_load(v)
            if got is None:
                return None
            if isinstance(v.owner, tile.TransposeOp):
                allowed.add(v.owner)
            if got[0] not in loads:
                loads.append(got[0])
    allowed |= set(loads)
    if any(o not in allowed for o in ops):
        return None
    iv = body.args[0]
    for ld in loads:
        t = ld.result.type
        assert isinstance(t, TensorType)
        if not isinstance(t.element_type, BFloat16Type | Float16Type) or len(t.get_shape()) != 2:
            return None
        if (t.get_shape()[1] * 2) % 16 or ld.fill_value != 0 or not _feeds_dots_only(ld.result):
            return None
        if any(o is not iv and _inside(o, loop) for o in ld.offsets):
            return None
    return ordered, loads


def try_pipelined_matmul(em, loop: scf.ForOp) -> bool:  # noqa: ANN001
    """Print `loop` as a cp.async pipeline when it matches (see the module docstring)."""
    got = _match(loop)
    if got is None:
        return False
    dots, loads = got
    if any(not isinstance(em.values.get(ld.buffer), Buffer) for ld in loads):
        return False
    if any(em.values[ld.buffer].shared for ld in loads):  # type: ignore[union-attr]
        return False
    stages_attr = em.kernel.attributes.get("num_stages")
    stages = max(2, stages_attr.value.data if isinstance(stages_attr, IntegerAttr) else 2)
    shapes = {ld: tuple(ld.result.type.get_shape()) for ld in loads}  # type: ignore[union-attr]
    per_stage = sum(r * (c + 8) * 2 for r, c in shapes.values())
    while stages > 2 and stages * per_stage > PIPELINE_SMEM:
        stages -= 1
    iv = loop.body.block.args[0]
    lb, ub, step = em.scalar(loop.lb), em.scalar(loop.ub), em.scalar(loop.step)
    accs = [
        new_frag(em, *tuple(d.acc.type.get_shape()), em.val(init))  # type: ignore[union-attr]
        for d, init in zip(dots, loop.iter_args, strict=True)
    ]
    staged: dict[tile.LoadOp, tuple] = {}
    for ld in loads:
        buf = em.values[ld.buffer]
        assert isinstance(buf, Buffer)
        rows, cols = shapes[ld]
        ctype = op_table.c_type(buf.elem)
        ldm = cols + 8
        size = rows * ldm
        name = em.smem_alloc(ctype, stages * size, "pipe")
        lay = Layout((rows, cols), em.nt, 8)
        offsets = ["fo_next_iv" if o is iv else em.scalar(o) for o in ld.offsets]
        staged[ld] = (buf, ChunkAccess(buf, offsets, lay), name, size, ldm, cols, lay)
    trips = em.fresh("trips")
    em.line(f"const long long {trips} = ({ub} - {lb} + {step} - 1) / {step};")
    em.uses_cp_async = True

    def issue(iteration: str, stage: str) -> None:
        em.open(f"if ({iteration} < {trips})")
        em.line(f"const long long fo_next_iv = {lb} + ({iteration}) * {step};")
        for buf, acc_, name, size, ldm, cols, lay in staged.values():
            zero = op_table.literal(0.0, buf.elem)
            for kc in range(lay.chunks):
                em.open("")
                for text in acc_.lines(kc):
                    em.line(text)
                dst = f"{name} + ({stage}) * {size} + (fo_f / {cols}) * {ldm} + fo_f % {cols}"
                em.open(f"if ({acc_.whole()} && fo_aligned({buf.name} + fo_g, 16))")
                em.line(f"fo_cp_async16({dst}, {buf.name} + fo_g);")
                em.close()
                em.open("else")
                for j in range(8):
                    em.line(
                        f"({dst})[{j}] = ({acc_.elem_ok(j)}) ? {buf.name}[fo_g + {j}] : {zero};"
                    )
                em.close()
                em.close()
        em.close()
        em.line("fo_cp_async_commit();")

    em.open(f"for (int fo_s = 0; fo_s < {stages - 1}; ++fo_s)")
    issue("fo_s", "fo_s")
    em.close()
    em.open(f"for (long long fo_it = 0; fo_it < {trips}; ++fo_it)")
    em.line(f"fo_cp_async_wait<{stages - 2}>();")
    em.line("__syncthreads();")
    issue(f"fo_it + {stages - 1}", f"(fo_it + {stages - 1}) % {stages}")
    for d, acc in zip(dots, accs, strict=True):
        _products(em, d, acc, staged, stages)
    em.close()
    em.line("fo_cp_async_wait<0>();")
    em.line("__syncthreads();")
    for res, acc in zip(loop.results, accs, strict=True):
        em.values[res] = acc
    return True


def _products(em, dot: tile.DotOp, acc, staged: dict, stages: int) -> None:  # noqa: ANN001
    """The WMMA products of one iteration of `dot`, reading the current stage."""
    k = tuple(dot.lhs.type.get_shape())[1]  # type: ignore[union-attr]
    (la, at), (lb_, bt) = _operand_load(dot.lhs), _operand_load(dot.rhs)  # type: ignore[misc]
    _, _, an, asz, alda, _, _ = staged[la]
    _, _, bn, bsz, bldb, _, _ = staged[lb_]
    ctype = op_table.c_type(staged[la][0].elem)
    a = (f"{an} + (fo_it % {stages}) * {asz}", "col_major" if at else "row_major", alda)
    b = (f"{bn} + (fo_it % {stages}) * {bsz}", "col_major" if bt else "row_major", bldb)
    emit_products(em, acc, ctype, a, b, k)
