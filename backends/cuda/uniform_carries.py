"""Loop-carried tiles whose every element is the same value: one register, not a tile.

A loop-carried tile starts from its init and takes the value yielded at each step. When
the init is *uniform* (every element equal, held by every thread: a splat constant) and
the yielded value is computed from uniform values only (splat constants, uniform values
from before the loop, other such carries, elementwise ops, broadcasts and reshapes of
them), every step keeps it uniform. The printer then carries one scalar per thread
instead of a register tile whose broadcasts into the loop's chunk tiles go through
shared memory: a per-lane variance's step count (`online._lane_update` carries it as a
row vector of equal elements, and broadcasts it to the chunk's lanes twice a step) cost
four barriers a step that way.

`uniform_carries` finds them by a fixpoint: assume every carry with a uniform init is
uniform, drop those whose yielded value is not derived from uniform values alone under
that assumption, and repeat until nothing changes. The rules mirror what the printer
does: `KernelEmitter.elementwise` of uniform operands, `emit_broadcast` and `relabel` of
a uniform operand give uniform values.
"""

from __future__ import annotations

from xdsl.dialects import scf
from xdsl.ir import Operation, SSAValue

from fuseopt.backends.cuda.kernel_emitter import KernelEmitter
from fuseopt.backends.cuda.values import Val
from fuseopt.dialects import nn, tile

_ELEMENTWISE = (
    nn.UnaryElementwiseOp,
    nn.BinaryElementwiseOp,
    nn.CompareOp,
    nn.SelectOp,
    nn.CastOp,
)
"""The ops the printer computes once, not per slot, when all their operands are uniform."""

_RELABELS = (tile.BroadcastOp, nn.ReshapeOp)
"""Shape ops that keep a uniform operand uniform."""


def uniform_carries(em: KernelEmitter, loop: scf.ForOp) -> set[int]:
    """Indices of `loop`'s iter_args that stay uniform at every step (module doc); their
    inits are already printed."""
    body = loop.body.block
    args = list(body.args[1:])
    yielded = body.last_op
    assert isinstance(yielded, scf.YieldOp)
    candidates = {i for i, init in enumerate(loop.iter_args) if _printed_uniform(em, init)}
    changed = True
    while changed:
        changed = False
        assumed = {args[i] for i in candidates}
        memo: dict[SSAValue, bool] = {}
        for i in sorted(candidates):
            if not _derived(em, yielded.operands[i], loop, assumed, memo):
                candidates.discard(i)
                changed = True
    return candidates


def _printed_uniform(em: KernelEmitter, value: SSAValue) -> bool:
    got = em.values.get(value)
    return isinstance(got, Val) and got.kind == "uniform"


def _derived(
    em: KernelEmitter,
    value: SSAValue,
    loop: scf.ForOp,
    assumed: set[SSAValue],
    memo: dict[SSAValue, bool],
) -> bool:
    """Whether `value` is uniform at every step given the carries in `assumed` are."""
    if value in assumed:
        return True
    if value in memo:
        return memo[value]
    memo[value] = False  # a cycle through a non-assumed value is not uniform
    owner = value.owner
    if not isinstance(owner, Operation) or owner.parent_block() is not loop.body.block:
        result = _printed_uniform(em, value)  # from before the loop (or an outer block arg)
    elif isinstance(owner, nn.ConstantOp):
        result = owner.splat_value is not None
    elif isinstance(owner, _ELEMENTWISE + _RELABELS):
        result = all(_derived(em, v, loop, assumed, memo) for v in owner.operands)
    else:
        result = False
    memo[value] = result
    return result
