"""The matmul K loop as tile-promote staged its operands (`operand_staging`, `num_stages`).

Applies to an `scf.for` whose body is only: loads of operand tiles from global buffers
(at offsets that are loop-invariant or the induction variable), optional `[1, 0]`
transposes of them, `tile.dot`s each accumulating into one of the loop's iter_args
(several dots may share an operand: gate and up projections), and the yield of their
results. The kernel's attributes choose the form, S being `num_stages`:

- `operand_staging = "shared"` (WMMA dots of 16-bit operands): each operand gets S
  shared-memory stages of rows padded by `tile_promote.OPERAND_ROW_PAD` bytes;
  - S >= 2, a cp.async pipeline:
    1. the prologue issues the asynchronous copies (`cp.async`, 16 bytes, global ->
       shared without registers) of the first S - 1 iterations, one commit group per
       iteration;
    2. iteration i waits until at most S - 2 groups are pending (its own has landed),
       `__syncthreads()` (its data is visible; everyone is done with iteration i - 1),
       issues the copies of iteration i + S - 1 into the stage iteration i - 1 used,
       and runs the WMMA products of iteration i from its stage;
  - S = 1, synchronous: each iteration, after a barrier (everyone is done with the
    previous tiles), copies its tiles into the one buffer (16-byte vector copies
    through registers), then a barrier, then the WMMA products;

  chunks at a ragged edge or misaligned are written element by element (zero outside
  the buffer), so masking stays exact. After the loop a barrier ends every read of
  the stages. The epilogue's accumulator arrays follow them when that fits the
  kernel's `shared_bytes` (the device limit without it); otherwise the stages are
  released and the arrays reuse them. Either way the kernel takes the
  `tile_promote.matmul_shared_bytes` that tile-promote recorded;
- `"registers"`: no shared memory at all (`register_dot.py`).

Without the attributes (tile-promote did not run) the loop is a 2-stage pipeline. Any
other loop, and a "shared" loop whose dots are not WMMA-able (f32 operands, sizes not
multiples of 16), is printed by the generic path (`loops._emit_for`), which stages the
operands synchronously (`dot.py`).
"""

from __future__ import annotations

from xdsl.dialects import scf
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    IntegerAttr,
    StringAttr,
    TensorType,
    f32,
)
from xdsl.ir import Operation, SSAValue

from fuseopt.backends.cuda import op_table
from fuseopt.backends.cuda.dot import emit_products, new_frag, wmma_ok
from fuseopt.backends.cuda.kernel_emitter import SMEM_LIMIT
from fuseopt.backends.cuda.memory import ChunkAccess
from fuseopt.backends.cuda.values import Buffer, Layout
from fuseopt.dialects import tile
from fuseopt.dialects.syntax import array_values
from fuseopt.passes.tile_promote import OPERAND_ROW_PAD, accumulator_bytes, carve_shared


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


def match_k_loop(
    loop: scf.ForOp, tensor_cores: bool = True
) -> tuple[list[tile.DotOp], list[tile.LoadOp]] | None:
    """(the dots in iter_arg order, the distinct operand loads) when `loop` is a K loop
    of dots over operand loads only (with `tensor_cores`: WMMA dots of 16-bit tiles
    loaded with a zero fill, rows of whole 16-byte chunks; else any 2-D dots with an
    f32 accumulator); None otherwise."""
    body = loop.body.block
    accs = list(body.args[1:])
    ops = list(body.ops)
    dots = [o for o in ops if isinstance(o, tile.DotOp)]
    yielded = body.last_op
    if not dots or len(dots) != len(accs) or not isinstance(yielded, scf.YieldOp):
        return None
    by_acc = {d.acc: d for d in dots}
    if set(by_acc) != set(accs):
        return None
    if not all(wmma_ok(d) if tensor_cores else _plain_2d(d) for d in dots):
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
        if len(t.get_shape()) != 2 or not _feeds_dots_only(ld.result):
            return None
        if tensor_cores and (
            not isinstance(t.element_type, BFloat16Type | Float16Type)
            or (t.get_shape()[1] * 2) % 16
            or ld.fill_value != 0
        ):
            return None
        if any(o is not iv and _inside(o, loop) for o in ld.offsets):
            return None
    return ordered, loads


def _plain_2d(dot: tile.DotOp) -> bool:
    """A 2-D dot with an f32 accumulator."""
    t = dot.acc.type
    return isinstance(t, TensorType) and len(t.get_shape()) == 2 and t.element_type == f32


def staging(kernel: tile.KernelOp) -> tuple[str, int]:
    """(operand_staging, num_stages) as tile-promote recorded them; ("shared", 2) when
    it did not run."""
    kind = kernel.attributes.get("operand_staging")
    stages = kernel.attributes.get("num_stages")
    return (
        kind.data if isinstance(kind, StringAttr) else "shared",
        stages.value.data if isinstance(stages, IntegerAttr) else 2,
    )


def _shared_budget(kernel: tile.KernelOp) -> int:
    """The shared memory tile-promote recorded for `kernel`, else the device limit."""
    recorded = kernel.attributes.get("shared_bytes")
    return recorded.value.data if isinstance(recorded, IntegerAttr) else SMEM_LIMIT


def try_staged_matmul(em, loop: scf.ForOp) -> bool:  # noqa: ANN001
    """Print `loop` in the form the kernel's staging attributes choose when it matches
    (see the module docstring); False leaves it to the generic path."""
    kind, stages = staging(em.kernel)
    if kind == "registers":
        from fuseopt.backends.cuda.register_dot import print_register_loop

        got = match_k_loop(loop, tensor_cores=False)
        if got is None or any(not isinstance(em.values.get(ld.buffer), Buffer) for ld in got[1]):
            return False
        print_register_loop(em, loop, got[0])
        return True
    got = match_k_loop(loop)
    if got is None or stages < 1:
        return False
    dots, loads = got
    if any(not isinstance(em.values.get(ld.buffer), Buffer) for ld in loads):
        return False
    if any(em.values[ld.buffer].shared for ld in loads):  # type: ignore[union-attr]
        return False
    shapes = {ld: tuple(ld.result.type.get_shape()) for ld in loads}  # type: ignore[union-attr]
    iv = loop.body.block.args[0]
    lb, ub, step = em.scalar(loop.lb), em.scalar(loop.ub), em.scalar(loop.step)
    accs = [
        new_frag(em, *tuple(d.acc.type.get_shape()), em.val(init))  # type: ignore[union-attr]
        for d, init in zip(dots, loop.iter_args, strict=True)
    ]
    mark = em.smem_mark()
    staged: dict[tile.LoadOp, tuple] = {}
    for ld in loads:
        buf = em.values[ld.buffer]
        assert isinstance(buf, Buffer)
        rows, cols = shapes[ld]
        ctype = op_table.c_type(buf.elem)
        ldm = cols + OPERAND_ROW_PAD // op_table.element_bytes(buf.elem)
        size = rows * ldm
        name = em.smem_alloc(ctype, stages * size, "pipe")
        lay = Layout((rows, cols), em.nt, 8)
        offsets = ["fo_next_iv" if o is iv else em.scalar(o) for o in ld.offsets]
        staged[ld] = (buf, ChunkAccess(buf, offsets, lay), name, size, ldm, cols, lay)
    trips = em.fresh("trips")
    em.line(f"const long long {trips} = ({ub} - {lb} + {step} - 1) / {step};")
    if stages == 1:
        _synchronous(em, dots, accs, staged, trips, lb, step)
    else:
        _pipelined(em, dots, accs, staged, trips, lb, step, stages)
    em.line("__syncthreads();")
    if carve_shared(accumulator_bytes(em.kernel), em.smem_mark()) > _shared_budget(em.kernel):
        em.smem_release(mark)  # every read of the stages is behind that barrier
    for res, acc in zip(loop.results, accs, strict=True):
        em.values[res] = acc
    return True


def _copy_chunks(em, staged: dict, stage: str, asynchronous: bool) -> None:  # noqa: ANN001
    """Copy iteration `fo_next_iv`'s operand tiles into stage `stage`, chunk by chunk:
    whole aligned chunks by cp.async (or a vector copy), others element by element."""
    for buf, acc_, name, size, ldm, cols, lay in staged.values():
        zero = op_table.literal(0.0, buf.elem)
        ctype = op_table.c_type(buf.elem)
        for kc in range(lay.chunks):
            em.open("")
            for text in acc_.lines(kc):
                em.line(text)
            base = f"{name} + ({stage}) * {size}" if stage else name
            dst = f"{base} + (fo_f / {cols}) * {ldm} + fo_f % {cols}"
            em.open(f"if ({acc_.whole()} && {acc_.aligned('16')})")
            if asynchronous:
                em.line(f"fo_cp_async16({dst}, {buf.name} + fo_g);")
            else:
                em.line(f"fo_copy_vec<{ctype}, 8>({dst}, {buf.name} + fo_g);")
            em.close()
            em.open("else")
            for j in range(8):
                em.line(f"({dst})[{j}] = ({acc_.elem_ok(j)}) ? {buf.name}[fo_g + {j}] : {zero};")
            em.close()
            em.close()


def _pipelined(em, dots, accs, staged, trips, lb, step, stages: int) -> None:  # noqa: ANN001
    """The K loop as a cp.async pipeline of `stages` >= 2 stages."""
    em.uses_cp_async = True

    def issue(iteration: str, stage: str) -> None:
        em.open(f"if ({iteration} < {trips})")
        em.line(f"const long long fo_next_iv = {lb} + ({iteration}) * {step};")
        _copy_chunks(em, staged, stage, asynchronous=True)
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
        _products(em, d, acc, staged, f"(fo_it % {stages})")
    em.close()
    em.line("fo_cp_async_wait<0>();")


def _synchronous(em, dots, accs, staged, trips, lb, step) -> None:  # noqa: ANN001
    """The K loop with one stage: copy, barrier, products, each iteration."""
    em.open(f"for (long long fo_it = 0; fo_it < {trips}; ++fo_it)")
    em.line(f"const long long fo_next_iv = {lb} + fo_it * {step};")
    em.line("__syncthreads();")
    _copy_chunks(em, staged, "", asynchronous=False)
    em.line("__syncthreads();")
    for d, acc in zip(dots, accs, strict=True):
        _products(em, d, acc, staged, "")
    em.close()


def _products(em, dot: tile.DotOp, acc, staged: dict, stage: str) -> None:  # noqa: ANN001
    """The WMMA products of one iteration of `dot`, reading stage `stage` ("" for the
    only one)."""
    k = tuple(dot.lhs.type.get_shape())[1]  # type: ignore[union-attr]
    (la, at), (lb_, bt) = _operand_load(dot.lhs), _operand_load(dot.rhs)  # type: ignore[misc]
    _, _, an, asz, alda, _, _ = staged[la]
    _, _, bn, bsz, bldb, _, _ = staged[lb_]
    ctype = op_table.c_type(staged[la][0].elem)
    a_base = f"{an} + {stage} * {asz}" if stage else an
    b_base = f"{bn} + {stage} * {bsz}" if stage else bn
    a = (a_base, "col_major" if at else "row_major", alda)
    b = (b_base, "col_major" if bt else "row_major", bldb)
    emit_products(em, acc, ctype, a, b, k)
