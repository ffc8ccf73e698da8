"""The order in which the CUDA printer prints a kernel body's ops.

Program order, except that loads of read-only global buffers (and pure ops that read
only such loads) are printed just before their first use: nvcc does not move a global
load across `__syncthreads()`, so a weight row loaded before a block reduction but used
after it would hold its registers across the reduction, and at the 40 registers that
three 512-thread blocks per SM allow, that spilled (RMSNorm: 36 bytes of spill stores per
thread; printed late, none, and the kernel ran 25% faster on an H200). Which parameters
a kernel writes (`written_params`) decides what may move, and which pointers are const.
"""

from __future__ import annotations

from xdsl.ir import Block, Operation, SSAValue

from fuseopt.dialects import nn, tile

MOVES_WITH_ITS_LOAD = (tile.BroadcastOp, tile.TransposeOp, nn.ConstantOp, *nn.ELEMENTWISE_OPS)
"""Pure ops that move down with the loads they read (the broadcast of a weight row, the
SiLU of a gate)."""


def late_loads_order(block: Block, written: set[int]) -> list[Operation]:
    """The ops of kernel body `block` in the order they are printed: program order, except
    that a load of a parameter no op writes (index not in `written`) moves down to just
    before the first op that uses it (directly or inside its regions), and so do pure ops
    (MOVES_WITH_ITS_LOAD) that read only moved values. Reading a buffer the kernel never
    writes gives the same values at any point, and the load's offsets are defined before
    its old place, so before its new one too.
    """
    args = list(block.args)
    waiting: dict[Operation, None] = {}
    order: list[Operation] = []

    def release(x: SSAValue) -> None:
        """Append `x`'s waiting producer after its own waiting operands, depth first
        (an explicit stack: a fused chain can be thousands of ops deep)."""
        owner = x.owner
        if not (isinstance(owner, Operation) and owner in waiting):
            return
        del waiting[owner]
        stack = [(owner, iter(owner.operands))]
        while stack:
            op, operands = stack[-1]
            for y in operands:
                dep = y.owner
                if isinstance(dep, Operation) and dep in waiting:
                    del waiting[dep]
                    stack.append((dep, iter(dep.operands)))
                    break
            else:
                stack.pop()
                order.append(op)

    for op in block.ops:
        if _read_only_global_load(op, args, written) or (
            isinstance(op, MOVES_WITH_ITS_LOAD) and all(x.owner in waiting for x in op.operands)
        ):
            waiting[op] = None
            continue
        for inner in op.walk():
            for x in inner.operands:
                release(x)
        order.append(op)
    return [*order, *waiting]


def _read_only_global_load(op: Operation, args: list[SSAValue], written: set[int]) -> bool:
    """Whether `op` loads from a kernel parameter (through views) that no op writes."""
    if not isinstance(op, tile.LoadOp):
        return False
    v = op.buffer
    while isinstance(v.owner, tile.ViewOp):
        v = v.owner.source
    return v in args and args.index(v) not in written


def written_params(kernel: tile.KernelOp) -> set[int]:
    """Indices of kernel parameters that some op writes (store, copy dest, gemm out)."""
    args = list(kernel.body.block.args)
    written: set[int] = set()
    for op in kernel.walk():
        targets: list[SSAValue] = []
        if isinstance(op, tile.StoreOp):
            targets = [op.buffer]
        elif isinstance(op, tile.CopyOp):
            targets = [op.dest]
        for v in targets:
            while isinstance(v.owner, tile.ViewOp):
                v = v.owner.source
            if v in args:
                written.add(args.index(v))
    return written
