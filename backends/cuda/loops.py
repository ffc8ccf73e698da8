"""CUDA C++ for index scalars, program ids and `scf.for` loops in a kernel.

Index arithmetic is `long long` (buffers may exceed 2^31 elements). A loop's iter_args
become variables declared before the C `for`: accumulator fragments for dots
(`dot.carried_frag`), per-thread partials for looped row reductions
(`reduce.deferred_reductions`, combined across the block once after the loop), one
register for tiles that stay uniform (`uniform_carries`), and otherwise register tiles
assigned at the yield. A K loop of dots over operand loads
is printed as tile-promote staged its operands instead (`pipeline.py`).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Operation, SSAValue

from fuseopt.backends.cuda import op_table
from fuseopt.backends.cuda.kernel_emitter import KernelEmitter
from fuseopt.backends.cuda.uniform_carries import uniform_carries
from fuseopt.backends.cuda.values import Val
from fuseopt.diagnostics import error_at
from fuseopt.dialects import tile

# ----------------------------------------------------------------- scalars and loops


_ARITH_BINARY = {
    arith.AddiOp: "({0} + {1})",
    arith.SubiOp: "({0} - {1})",
    arith.MuliOp: "({0} * {1})",
    arith.DivSIOp: "({0} / {1})",
    arith.RemSIOp: "({0} % {1})",
    arith.MinSIOp: "min({0}, {1})",
    arith.MaxSIOp: "max({0}, {1})",
    arith.FloorDivSIOp: "fo_floordiv({0}, {1})",
    arith.CeilDivSIOp: "fo_ceildiv({0}, {1})",
    # the unsigned forms compute on sizes (non-negative), where they agree with these
    arith.DivUIOp: "({0} / {1})",
    arith.RemUIOp: "({0} % {1})",
    arith.MinUIOp: "min({0}, {1})",
    arith.MaxUIOp: "max({0}, {1})",
    arith.CeilDivUIOp: "fo_ceildiv({0}, {1})",
    arith.AndIOp: "({0} & {1})",
    arith.OrIOp: "({0} | {1})",
}


def _emit_arith_constant(em: KernelEmitter, op: arith.ConstantOp) -> None:
    v = op.value
    if not isinstance(v, IntegerAttr) or not isinstance(op.result.type, IndexType | type(v.type)):
        raise error_at(op, "the CUDA backend prints integer and index arith.constant only")
    em.values[op.result] = op_table.int_literal(v.value.data)


def _emit_arith_binary(em: KernelEmitter, op: Operation) -> None:
    a, b = (em.scalar(v) for v in op.operands)
    name = em.fresh("i")
    em.line(f"const long long {name} = {_ARITH_BINARY[type(op)].format(a, b)};")
    em.values[op.results[0]] = name


def _emit_index_cast(em: KernelEmitter, op: Operation) -> None:
    em.values[op.results[0]] = em.scalar(op.operands[0])


def _emit_for(em: KernelEmitter, op: scf.ForOp) -> None:
    from fuseopt.backends.cuda.dot import carried_frag
    from fuseopt.backends.cuda.pipeline import try_staged_matmul

    if try_staged_matmul(em, op):
        return

    from fuseopt.backends.cuda.reduce import IDENTITY, deferred_reductions

    lb, ub, step = em.scalar(op.lb), em.scalar(op.ub), em.scalar(op.step)
    body = op.body.block
    carried: list[Val] = []
    deferred = deferred_reductions(op)
    uniform = uniform_carries(em, op)
    for i, (init, arg) in enumerate(zip(op.iter_args, body.args[1:], strict=True)):
        x = em.val(init)
        frag = None if i in deferred else carried_frag(em, op, arg, x)
        if i in deferred:
            red, comb = deferred[i]
            part = em.fresh("part")
            em.line(f"float {part} = {IDENTITY[(red.kind.data, 'float')]};")
            em.deferred[red] = part
            em.skipped.add(comb)
            c = Val(
                "deferred",
                part,
                x.shape,
                x.elem,
                extra={"init": em.as_uniform(x), "kind": red.kind.data},
            )
            em.values[red.result] = c
            em.values[comb.results[0]] = c
            carried.append(c)
        elif frag is not None:
            carried.append(frag)
        elif x.n == 1 or i in uniform:
            u = em.as_uniform(x)
            name = em.fresh("acc")
            em.line(f"{op_table.c_type(x.elem)} {name} = {u.name};")
            carried.append(Val("uniform", name, x.shape, x.elem))
        else:
            lay = em.layout(x.shape)
            src = em.as_dist(x, lay)
            out = em.new_dist(x.shape, x.elem, "acc", lay)
            em.for_slots(
                lay, lambda k, j, o=out, s=src: f"{em.slot(o, k, j)} = {em.slot(s, k, j)};"
            )
            carried.append(out)
    for arg, c in zip(body.args[1:], carried, strict=True):
        em.values[arg] = c
    skipped = _prefetch_copies(em, op, lb, ub, step)
    iv = em.fresh("iv")
    em.values[body.args[0]] = iv
    em.open(f"for (long long {iv} = {lb}; {iv} < {ub}; {iv} += {step})")
    em.loop_depth += 1
    em.loops_printed += 1
    outer_path = em.loop_path
    em.loop_path = (*outer_path, em.loops_printed)
    em.loop_carried = carried
    for inner in body.ops:
        if isinstance(inner, scf.YieldOp):
            _emit_yield(em, inner, carried)
        elif inner not in em.skipped and inner not in skipped:
            em.emit_op(inner)
    em.loop_depth -= 1
    em.loop_path = outer_path
    em.close()
    for res, c in zip(op.results, carried, strict=True):
        em.values[res] = _finish_deferred(em, c) if c.kind == "deferred" else c


def _prefetch_copies(em: KernelEmitter, loop: scf.ForOp, lb: str, ub: str, step: str) -> set:
    """Issue every iteration's row-cache copy (`tile.copy` into a shared region indexed
    by the induction variable, then `tile.barrier`) before the loop, asynchronously, so
    the whole row is in flight at once; wait once. Returns the ops the loop then skips."""
    from fuseopt.backends.cuda.memory import emit_copy

    body = loop.body.block
    iv = body.args[0]
    ops = list(body.ops)
    copies = []
    for i, op in enumerate(ops[:-1]):
        if not isinstance(op, tile.CopyOp) or not isinstance(ops[i + 1], tile.BarrierOp):
            continue
        if iv not in op.dst_offsets or not em.buffer(op.dest).shared:
            continue
        offsets = [*op.src_offsets, *op.dst_offsets]
        if all(o is iv or not _defined_in(o, loop) for o in offsets):
            copies.append((op, ops[i + 1]))
    if not copies:
        return set()
    pre = em.fresh("pre_iv")
    em.values[iv] = pre
    em.open(f"for (long long {pre} = {lb}; {pre} < {ub}; {pre} += {step})")
    for copy, _ in copies:
        emit_copy(em, copy, use_async=True)
    em.close()
    if em.uses_cp_async:
        em.line("fo_cp_async_commit();")
        em.line("fo_cp_async_wait<0>();")
    em.barrier()
    return {o for pair in copies for o in pair}


def _defined_in(v: SSAValue, loop: scf.ForOp) -> bool:
    op = v.owner if isinstance(v.owner, Operation) else v.owner.parent_op()
    while op is not None:
        if op is loop:
            return True
        op = op.parent_op()
    return False


def _finish_deferred(em: KernelEmitter, c: Val) -> Val:
    """After the loop: combine the threads' partials, then the loop's initial value."""
    from fuseopt.backends.cuda.reduce import COMBINE, block_allreduce

    block_allreduce(em, [c.name], c.extra["kind"], "float")
    init = c.extra["init"]
    name = em.fresh("red")
    value = COMBINE[c.extra["kind"]].format(init.name, c.name)
    em.line(f"const float {name} = {value};")
    return Val("uniform", name, c.shape, c.elem)


def _emit_yield(em: KernelEmitter, op: scf.YieldOp, carried: list[Val]) -> None:
    from fuseopt.backends.cuda.dot import assign_frag

    news = [em.val(v) for v in op.operands]
    staged: list[Val] = []
    for new, c in zip(news, carried, strict=True):
        if c.kind in ("frag", "deferred"):
            staged.append(new)
        elif c.kind == "uniform":
            staged.append(em.as_uniform(new))
        else:
            assert c.layout is not None
            staged.append(em.as_dist(new, c.layout))
    staged = _before_assignments(em, staged, carried)
    for new, c in zip(staged, carried, strict=True):
        if new.name == c.name or c.kind == "deferred":
            continue
        if c.kind == "frag":
            assign_frag(em, c, new)
        elif c.kind == "uniform":
            em.line(f"{c.name} = {new.name};")
        else:
            assert c.layout is not None
            em.for_slots(
                c.layout, lambda k, j, c=c, new=new: f"{em.slot(c, k, j)} = {em.slot(new, k, j)};"
            )


def _before_assignments(em: KernelEmitter, staged: list[Val], carried: list[Val]) -> list[Val]:
    """The yield assigns all carries at once: a staged value that is another carry's
    register (the carry itself yielded as a second one, or a relabel or broadcast of a
    uniform carry, which keeps its name) is copied first, so an earlier assignment does
    not change what it reads."""
    registers = {c.name for c in carried if c.kind in ("uniform", "dist")}
    out: list[Val] = []
    for new, c in zip(staged, carried, strict=True):
        if new.name == c.name or new.name not in registers or new.kind not in ("uniform", "dist"):
            out.append(new)
        elif new.kind == "uniform":
            name = em.fresh("prev")
            em.line(f"const {op_table.c_type(new.elem)} {name} = {new.name};")
            out.append(Val("uniform", name, new.shape, new.elem))
        else:
            assert new.layout is not None
            copy = em.new_dist(new.shape, new.elem, "prev", new.layout)
            em.for_slots(
                new.layout,
                lambda k, j, o=copy, s=new: f"{em.slot(o, k, j)} = {em.slot(s, k, j)};",
            )
            out.append(copy)
    return out


def _emit_program_id(em: KernelEmitter, op: tile.ProgramIdOp) -> None:
    axis = op.axis.value.data
    name = em.fresh(f"pid{axis}")
    em.line(f"const long long {name} = (long long)blockIdx.{'xyz'[axis]};")
    em.values[op.result] = name


def _emit_return(em: KernelEmitter, op: Operation) -> None:
    """The kernel's end: nothing to print (an early `return` would skip barriers)."""


def loop_handlers() -> dict[type[Operation], Callable]:
    """The printer handlers of scalars, program ids and loops, by op class."""
    return {
        tile.ProgramIdOp: _emit_program_id,
        tile.ReturnOp: _emit_return,
        arith.ConstantOp: _emit_arith_constant,
        arith.IndexCastOp: _emit_index_cast,
        scf.ForOp: _emit_for,
        **{cls: _emit_arith_binary for cls in _ARITH_BINARY},
    }
