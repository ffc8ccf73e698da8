"""The matmul schedule of a tiled kernel: BM x BN output tiles in grouped program order
(GROUP_M rows of tiles per group, for L2 reuse of B), a K loop of tile.dot over operand
tiles with f32 accumulators (a dual GEMM shares the A tile and keeps one accumulator per
matmul), then the epilogue on the accumulators and the stores (`KernelEmitter._store`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import Float32Type, IndexType, TensorType, f32
from xdsl.ir import Block, SSAValue

from fuseopt.dialects import tile

if TYPE_CHECKING:
    from fuseopt.passes.convert_nn_to_tile.emitter import Context, KernelEmitter


def emit_matmul(em: KernelEmitter, ctx: Context) -> int:
    """Grouped program order, the K loop of tile.dot, then the epilogue and stores of
    `em`'s group; returns the number of programs."""
    sp, b = em.space, em.blocks
    mm = sp.matmul
    assert mm is not None and sp.m_dim is not None and sp.n_dim is not None
    m, n = sp.m_dim, sp.n_dim
    bm, bn, bk = b.dims[m], b.dims[n], b.block_k
    nm, nn_ = em.blocks_along(m), em.blocks_along(n)
    batch = list(range(m))
    pid = em.add(ctx, tile.ProgramIdOp(0))
    per_batch = nm * nn_
    tile_id = em.add(ctx, arith.RemSIOp(pid, em.index(per_batch))) if batch else pid
    rest = em.add(ctx, arith.DivSIOp(pid, em.index(per_batch))) if batch else None
    for d in reversed(batch):
        assert rest is not None
        size = sp.sizes[d]
        ctx.offsets[d] = em.add(ctx, arith.RemSIOp(rest, em.index(size)))
        rest = em.add(ctx, arith.DivSIOp(rest, em.index(size)))
    gm = b.group_m
    in_group = em.index(gm * nn_)
    group_id = em.add(ctx, arith.DivSIOp(tile_id, in_group))
    first_m = em.add(ctx, arith.MuliOp(group_id, em.index(gm)))
    left = em.add(ctx, arith.SubiOp(em.index(nm), first_m))
    size_m = em.add(ctx, arith.MinSIOp(left, em.index(gm)))
    local = em.add(ctx, arith.RemSIOp(tile_id, in_group))
    pid_m = em.add(ctx, arith.AddiOp(first_m, em.add(ctx, arith.RemSIOp(local, size_m))))
    pid_n = em.add(ctx, arith.DivSIOp(local, size_m))
    ctx.offsets[m] = em.scaled(ctx, pid_m, bm)
    ctx.offsets[n] = em.scaled(ctx, pid_n, bn)
    acc_t = TensorType(f32, [bm, bn])
    mms = sp.matmuls or [mm]
    zeros = [em.splat(ctx, 0.0, acc_t) for _ in mms]
    body = Block(arg_types=[IndexType(), *(acc_t for _ in mms)])
    kk, accs = body.args[0], body.args[1:]
    from fuseopt.passes.convert_nn_to_tile.emitter import Context  # the emitter imports this module

    inner = Context(body, ctx.offsets)
    # a dual GEMM loads the shared A tile once and keeps one accumulator per matmul
    a = _operand_tile(
        em, inner, mm.lhs, ctx.offsets[m], kk, bm, bk, mm.transpose_a is not None, False
    )
    dots = []
    for one, acc in zip(mms, accs, strict=True):
        w = _operand_tile(
            em, inner, one.rhs, ctx.offsets[n], kk, bn, bk, one.transpose_b is not None, True
        )
        dots.append(em.add(inner, tile.DotOp(a, w, acc)))
    body.add_op(scf.YieldOp(*dots))
    loop = scf.ForOp(em.index(0), em.index(sp.k_size), em.index(bk), zeros, body)
    ctx.block.add_op(loop)
    for one, total in zip(mms, loop.results, strict=True):
        rt = one.result.type
        assert isinstance(rt, TensorType)
        result = total
        if not isinstance(rt.element_type, Float32Type):
            result = em.cast(ctx, result, rt.element_type)
        ctx.cache[(one.result, 0)] = result
    em.store(ctx, list(range(len(em.group.outputs))))
    return math.prod(sp.sizes[d] for d in batch) * per_batch


def _operand_tile(
    em: KernelEmitter,
    ctx: Context,
    v: SSAValue,
    off: SSAValue,
    k: SSAValue,
    block: int,
    bk: int,
    transposed: bool,
    is_rhs: bool,
) -> SSAValue:
    """The [BM, BK] tile of A (or [BK, BN] of B) at this K step."""
    _, batch = em.operand_view(v)
    offsets = [ctx.offsets[d] for d in batch]
    # memory order of the last two dims: A is [M, K] ([K, M] transposed), B is [K, N]
    k_first = (not transposed) if is_rhs else transposed
    pair, box = ([k, off], [bk, block]) if k_first else ([off, k], [block, bk])
    t = em.add(ctx, tile.LoadOp(em.operand_params[v], [*offsets, *pair], box))
    want_k_first = is_rhs
    if k_first != want_k_first:
        t = em.add(ctx, tile.TransposeOp(t, [1, 0]))
    return t
