"""Outlining for nn-fuse: turn a group of ops into one `nn.fusion` op.

`outline_group` clones the group's ops, in program order, into the isolated region of a
new `nn.fusion`: values defined outside become `ins` operands and block arguments (in
order of first use), splat constants are cloned in instead (a dense constant is data and
comes in as an operand), and every value used outside the group is yielded once
(multi-output). Copies of one cast that land in the same group (nn-fuse gives each
user of a widening argument cast its own, `rematerialize`) become one op again.
Outside uses are redirected to the fusion results and the original ops are erased.

Outlining may leave the block out of dominance order (a group's first op is not always
after all its inputs), so the pass calls `sort_block_topologically` once at the end; the
grouping guarantees that the group graph is acyclic, so an order always exists.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Block, Operation, Region, SSAValue

from fuseopt.dialects import nn
from fuseopt.passes.nn_fuse.legality import fusion_operands


def _attributes(op: Operation) -> frozenset:
    return frozenset(op.attributes.items())


def outline_group(
    block: Block, ops: Sequence[Operation], kind: nn.FusionKind, route: nn.Route
) -> nn.FusionOp:
    """Replace `ops` (top-level ops of `block`, in program order) with one nn.fusion of
    `kind` lowered by `route`; return the new op."""
    members = set(ops)
    constants, inputs = fusion_operands(ops)
    outputs = [
        r for op in ops for r in op.results if any(u.operation not in members for u in r.uses)
    ]

    body = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, body.args, strict=True))
    for arg, v in zip(body.args, inputs, strict=True):
        arg.name_hint = v.name_hint
    for c in constants:
        clone = c.clone()
        body.add_op(clone)
        mapping[c.result] = clone.result
    casts: dict[tuple[SSAValue, object, frozenset], SSAValue] = {}
    for op in ops:
        key = None
        if isinstance(op, nn.CastOp):  # copies of one cast (rematerialize.py) meet again
            key = (mapping.get(op.input, op.input), op.result.type, _attributes(op))
            if key in casts:
                mapping[op.result] = casts[key]
                continue
        clone = op.clone(value_mapper=mapping)
        body.add_op(clone)
        for old, new in zip(op.results, clone.results, strict=True):
            mapping[old] = new
        if key is not None:
            casts[key] = clone.results[0]
    body.add_op(nn.YieldOp(*(mapping[v] for v in outputs)))

    fusion = nn.FusionOp(
        inputs,
        [v.type for v in outputs],
        Region(body),
    )
    fusion.kind = StringAttr(kind.value)
    fusion.route = StringAttr(nn.Route(route).value)
    block.insert_op_before(fusion, ops[0])
    for old, new in zip(outputs, fusion.results, strict=True):
        new.name_hint = old.name_hint
        old.replace_uses_with_if(new, lambda use: use.operation not in members)
    for op in reversed(ops):
        block.erase_op(op)
    for c in constants:
        if not any(r.uses for r in c.results):
            block.erase_op(c)
    return fusion


def sort_block_topologically(block: Block) -> None:
    """Reorder the ops of `block` so every value is defined before it is used, keeping
    the current order wherever it is already valid (the terminator stays last)."""
    ops = list(block.ops)
    position = {op: i for i, op in enumerate(ops)}
    deps: dict[Operation, set[Operation]] = {op: set() for op in ops}
    users: dict[Operation, list[Operation]] = {op: [] for op in ops}
    for op in ops:
        for inner in op.walk():
            for v in inner.operands:
                owner = v.owner
                if isinstance(owner, Operation) and owner in position and owner is not op:
                    if owner not in deps[op]:
                        deps[op].add(owner)
                        users[owner].append(op)
    ready = [(position[op], op) for op in ops if not deps[op]]
    heapq.heapify(ready)
    order: list[Operation] = []
    waiting = {op: len(d) for op, d in deps.items()}
    while ready:
        _, op = heapq.heappop(ready)
        order.append(op)
        for user in users[op]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (position[user], user))
    if len(order) != len(ops):
        raise ValueError("fusion created a cycle between groups")
    if order == ops:
        return
    for op in ops:
        op.detach()
    block.add_ops(order)
