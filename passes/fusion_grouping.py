"""Grouping for nn-fuse: which ops of a block share a kernel.

Algorithm (greedy union of groups, in program order; every merge is checked):
1. Every top-level op of the block starts in its own group. Constants and opaque ops
   (see `fusion_legality.classify`) never merge; constants are cloned into the groups
   that use them when groups are outlined.
2. Reduction prologues: each reduction first claims the elementwise ops and views it
   reads, walking back from it while an op does not read more bytes from outside the
   group than it produces (a cast up to f32, x * x, a broadcast weight; not a residual
   add of two tensors). Otherwise step 3 would hand these ops to a matmul epilogue
   (`h = x + o @ W`, then rms_norm(h)), which then writes h, f32(h) and h * h for the
   reduction to read back, instead of h alone.
3. Producer-consumer: for each fusible op in program order and each of its operands, try
   to merge the op's group with the operand's producer group (a transpose producer in a
   second pass, once the other ops have grouped). This grows elementwise chains,
   reduction prologues and epilogues, matmul epilogues, and joins two matmuls that
   share A when their results meet in an elementwise op (gated MLP).
4. Siblings: pointwise or reduction groups that compute and read the same value are
   merged when legal, so the value is read once (e.g. two reductions of one tensor).
A merge happens only if the union passes `check_group` (one kernel shape, bounded
recompute, no duplicated reduction or matmul, one iteration space for the tiler) and the
quotient graph of groups stays acyclic (no path from the union back into itself through
another group).

Growth may pass through a group whose axes do not meet in one domain yet (RMSNorm's
`broadcast(rsqrt(mean))` before the multiply that ties it to the row), so merges check
with `partial=True`. Every final group is then checked in full; the ops of a group that
fails are marked *strict* and the block is grouped again, with full checks on every
merge that involves a strict op. Each round marks at least one new op (a group of
strict ops only was checked in full), so this ends, and every group nn-fuse returns is
one kernel for convert-nn-to-tile.
"""

from __future__ import annotations

from collections.abc import Collection
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from xdsl.ir import Block, Operation, SSAValue

from fuseopt.cost_model import value_bytes
from fuseopt.dialects import nn
from fuseopt.passes.fusion_legality import (
    MATMUL,
    GroupInfo,
    OpClass,
    check_group,
    classify,
)


@dataclass
class FusionGroup:
    """A legal group: its ops in program order and what legality learned about it."""

    ops: list[Operation]
    info: GroupInfo

    @property
    def computes(self) -> bool:
        """Whether the group does any arithmetic (pure view groups stay in eager)."""
        return any(classify(op) is not OpClass.VIEW for op in self.ops)


class _Partition:
    """Union of groups over the top-level ops of one block, with the cycle check."""

    def __init__(
        self,
        block: Block,
        max_recompute: int,
        excluded: Collection[Operation],
        strict: AbstractSet[Operation],
    ):
        self.block = block
        self.max_recompute = max_recompute
        self.strict = strict
        self.ops = list(block.ops)
        self.order = {op: i for i, op in enumerate(self.ops)}
        self.group_of: dict[Operation, int] = {op: i for i, op in enumerate(self.ops)}
        self.members: dict[int, set[Operation]] = {i: {op} for i, op in enumerate(self.ops)}
        self.info: dict[int, GroupInfo] = {}
        for op in self.ops:
            if op in excluded or classify(op) in (OpClass.OPAQUE, OpClass.CONSTANT):
                continue
            result = check_group({op}, max_recompute, self.order, op not in strict)
            if isinstance(result, GroupInfo):
                self.info[self.group_of[op]] = result

    def top_level(self, op: Operation) -> Operation | None:
        """The ancestor of `op` that is an op of this block."""
        node: Operation | None = op
        while node is not None and node.parent_block() is not self.block:
            node = node.parent_op()
        return node

    def successors(self, g: int) -> set[int]:
        """Groups that use a value of group `g`."""
        out: set[int] = set()
        for op in self.members[g]:
            for r in op.results:
                for use in r.uses:
                    user = self.top_level(use.operation)
                    if user is not None and self.group_of[user] != g:
                        out.add(self.group_of[user])
        return out

    def creates_cycle(self, a: int, b: int) -> bool:
        """Whether merging groups a and b closes a cycle through another group."""
        merged = {a, b}
        stack = [s for g in merged for s in self.successors(g) if s not in merged]
        seen: set[int] = set(stack)
        while stack:
            g = stack.pop()
            for s in self.successors(g):
                if s in merged:
                    return True
                if s not in seen:
                    seen.add(s)
                    stack.append(s)
        return False

    def try_merge(self, a: int, b: int) -> bool:
        """Merge groups a and b if the union is legal; return whether it happened."""
        if a == b or a not in self.info or b not in self.info:
            return False
        union = self.members[a] | self.members[b]
        partial = self.strict.isdisjoint(union)
        result = check_group(union, self.max_recompute, self.order, partial)
        if not isinstance(result, GroupInfo) or self.creates_cycle(a, b):
            return False
        keep, drop = min(a, b), max(a, b)
        for op in self.members[drop]:
            self.group_of[op] = keep
        self.members[keep] = union
        del self.members[drop]
        del self.info[drop]
        self.info[keep] = result
        return True

    def claim_prologue(self, reduction: Operation) -> None:
        """Step 2: merge into the reduction's group the ops it reads, backwards, while
        each is elementwise or a view that reads no more outside bytes than it makes."""
        stack = [reduction]
        while stack:
            op = stack.pop()
            for v in op.operands:
                producer = v.owner
                if not isinstance(producer, Operation) or producer not in self.group_of:
                    continue
                if classify(producer) not in (OpClass.ELEMENTWISE, OpClass.VIEW):
                    continue
                g = self.group_of[reduction]
                if self.group_of[producer] == g or len(self.members[self.group_of[producer]]) > 1:
                    continue
                if self._outside_bytes(producer, g) > sum(value_bytes(r) for r in producer.results):
                    continue
                if self.try_merge(g, self.group_of[producer]):
                    stack.append(producer)

    def _outside_bytes(self, op: Operation, g: int) -> int:
        """Bytes `op` reads that group g neither computes nor reads already."""
        members = self.members[g]
        read = {v for m in members for v in m.operands}
        return sum(
            value_bytes(v)
            for v in set(op.operands)
            if not (isinstance(v.owner, Operation) and v.owner in members)
            and v not in read
            and not isinstance(v.owner, nn.ConstantOp)
        )

    def sibling_fusible(self, g: int) -> bool:
        """Whether group g may take part in a sibling merge: a pointwise or reduction
        group that computes (a lone view is free in eager; materializing it is not)."""
        return (
            g in self.info
            and self.info[g].kind != MATMUL
            and any(classify(op) is not OpClass.VIEW for op in self.members[g])
        )

    def groups(self) -> list[FusionGroup]:
        """The fusible groups, ordered by their first op."""
        out = [
            FusionGroup(sorted(self.members[g], key=self.order.__getitem__), self.info[g])
            for g in self.info
        ]
        return sorted(out, key=lambda grp: self.order[grp.ops[0]])


def find_groups(
    block: Block, max_recompute: int = 8, excluded: Collection[Operation] = ()
) -> list[FusionGroup]:
    """Partition the fusible top-level ops of `block` into legal fusion groups.

    Every fusible op lands in exactly one group (possibly alone); ops in `excluded`
    (matmuls left to the library) are treated as opaque. See the module docstring for
    the algorithm. The block is not modified.
    """
    order = {op: i for i, op in enumerate(block.ops)}
    strict: set[Operation] = set()
    while True:
        groups = _grow(block, max_recompute, excluded, strict)
        incomplete = [
            g for g in groups if not isinstance(check_group(g.ops, max_recompute, order), GroupInfo)
        ]
        if not incomplete:
            return groups
        strict.update(op for g in incomplete for op in g.ops)


def _grow(
    block: Block,
    max_recompute: int,
    excluded: Collection[Operation],
    strict: AbstractSet[Operation],
) -> list[FusionGroup]:
    """Steps 1-4 of the module docstring; merges involving an op of `strict` are checked
    in full, the others with `partial=True` (see `check_group`)."""
    part = _Partition(block, max_recompute, excluded, strict)
    fusible = [op for op in part.ops if part.group_of[op] in part.info]
    # 2. reductions claim their cheap prologues
    for op in fusible:
        if classify(op) is OpClass.REDUCTION:
            part.claim_prologue(op)
    # 3. producer-consumer merges; transposes join only after the other ops have
    # grouped (a transpose merged early can leave a consumer outside: RoPE's slices of
    # a transposed q need q as a group input)
    for late in (False, True):
        for op in fusible:
            for v in op.operands:
                producer = v.owner
                if not isinstance(producer, Operation) or producer not in part.group_of:
                    continue
                if isinstance(producer, nn.TransposeOp) != late:
                    continue
                part.try_merge(part.group_of[op], part.group_of[producer])
    # 4. sibling merges: groups reading the same value
    readers: dict[SSAValue, list[Operation]] = {}
    for op in fusible:
        for v in op.operands:
            if not isinstance(v.owner, nn.ConstantOp):  # a shared splat is no reason
                readers.setdefault(v, []).append(op)
    for users in readers.values():
        for i, first in enumerate(users):
            for other in users[i + 1 :]:
                ga, gb = part.group_of[first], part.group_of[other]
                if part.sibling_fusible(ga) and part.sibling_fusible(gb):
                    part.try_merge(ga, gb)
    return part.groups()
