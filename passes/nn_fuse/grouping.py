"""Grouping for nn-fuse: which ops of a block share a kernel.

Algorithm (greedy union of groups, in program order; every merge is checked):
1. Every top-level op of the block starts in its own group. Constants and opaque ops
   (see `legality.classify`) never merge; constants are cloned into the groups
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
   share A when their results meet in an elementwise op (gated MLP). Refused pairs
   are tried again (a few sweeps, until one merges none): a union refused in one
   domain may be legal after one side joined another group (a reduction's row-shaped
   ops are side ops of a pointwise group, counted against `max_recompute`, but in the
   reduction's domain).
4. Siblings: pointwise or reduction groups that compute and read the same value are
   merged when legal, so the value is read once (e.g. two reductions of one tensor).
5. Host views: a reshape that regroups dims and reads a value computed outside its
   group is free as a view of that value's buffer, but inside a group it is indexing
   the tiler cannot tie to a reduction's rows. When groups hold such reshapes, the
   block is grouped again with them left out, and the grouping with fewer kernels is
   kept.
A merge happens only if the union passes `check_group` (one kernel shape, bounded
recompute, no duplicated reduction or matmul, one iteration space for the tiler) and the
quotient graph of groups stays acyclic (no path from the union back into itself through
another group).

Growth may pass through a group whose axes do not meet in one domain yet (RMSNorm's
`broadcast(rsqrt(mean))` before the multiply that ties it to the row), so merges check
with `partial=True`. Every final group is then checked in full; the ops of a group that
fails are marked *strict* and the block is grouped again, with full checks on every
merge that involves a strict op. Each round marks at least one new op, or stops: a
group of strict ops only that still fails (an op no group can hold, which no merge
checked) is left out, its ops unfused. So this ends, and every group nn-fuse returns
is one kernel for convert-nn-to-tile.

Cost: a merge must not revisit the groups it joins, or a chain of n ops costs n^2.
Each group keeps its `GroupFacts` (legality decides a union from the uses where two
groups meet, `check_union`), its edges to other groups with their counts, and a rank in
a topological order of the groups: a path from one group to another only passes
through groups ranked between them, so the cycle check searches only there, and a
merge re-ranks only the groups found there (Pearce and Kelly's dynamic topological
order). The smaller side of every union is the one walked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from xdsl.ir import Block, Operation, SSAValue

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import keeps_order
from fuseopt.passes.nn_fuse.cost_model import value_bytes
from fuseopt.passes.nn_fuse.legality import (
    MATMUL,
    GroupFacts,
    GroupInfo,
    OpClass,
    UnionCounts,
    check_group,
    check_union,
    classify,
    merge_facts,
    squeezed,
)


@dataclass
class Reranking:
    """How a merge of groups `lo` and `hi` (lo ranked first) keeps the ranks a
    topological order: the union takes `rank`, or (None) the groups in `forward` (lo
    reaches them before hi) and those that reach hi are re-ranked around it."""

    lo: int
    hi: int
    rank: int | None
    forward: set[int]


@dataclass
class FusionGroup:
    """A legal group: its ops in program order and what legality learned about it."""

    ops: list[Operation]
    info: GroupInfo

    @property
    def computes(self) -> bool:
        """Whether the group does any arithmetic."""
        return any(classify(op) is not OpClass.VIEW for op in self.ops)

    @property
    def launches(self) -> bool:
        """Whether the group becomes a kernel: it computes, or it chains copies. A pure
        view group is left to convert-nn-to-tile op by op (reshapes and aligned slices
        are free views, a broadcast read by elementwise users is indexing, a lone
        transpose or broadcast its own copy kernel); two or more copying ops (Llama's
        value heads transposed, then repeated for grouped-query attention) are one
        kernel that indexes the source once instead of one copy kernel each."""
        return self.computes or sum(map(copies, self.ops)) >= 2


def copies(op: Operation) -> bool:
    """Whether `op`, left alone, writes its elements to a new buffer: a transpose that
    moves a dim of size above 1, or a broadcast that repeats elements."""
    if isinstance(op, nn.TransposeOp):
        return not keeps_order(op.perm, op.input.type.get_shape())  # type: ignore[attr-defined]
    if isinstance(op, nn.BroadcastOp):
        return value_bytes(op.result) > value_bytes(op.input)
    return False


class _Partition:
    """Union of groups over the top-level ops of one block, with the cycle check.

    Groups are named by the index of an op in the block (a union-find root); `facts`
    holds the fusible ones. With `verify`, every merge decision is also taken the slow
    way (`check_group` on the union, a search of the whole graph for a cycle) and the
    two must agree (for tests)."""

    def __init__(
        self,
        block: Block,
        max_recompute: int,
        excluded: Collection[Operation],
        strict: AbstractSet[Operation],
        verify: bool = False,
    ):
        self.block = block
        self.max_recompute = max_recompute
        self.verify = verify
        self.ops = list(block.ops)
        self.order = {op: i for i, op in enumerate(self.ops)}
        n = len(self.ops)
        self.leader = list(range(n))
        self.members: dict[int, list[Operation]] = {i: [op] for i, op in enumerate(self.ops)}
        self.facts: dict[int, GroupFacts] = {}
        self.classes = {op: classify(op) for op in self.ops}
        for i, op in enumerate(self.ops):
            if op in excluded or self.classes[op] in (OpClass.OPAQUE, OpClass.CONSTANT):
                continue
            facts = GroupFacts.of_op(op, op in strict, self.classes[op])
            if self._legal(facts, GroupFacts.empty(), [], lambda o, op=op: o is op):
                self.facts[i] = facts
        # the graph of groups: edge counts both ways, and a topological rank per group
        self.succ: dict[int, Counter[int]] = {i: Counter() for i in range(n)}
        self.pred: dict[int, Counter[int]] = {i: Counter() for i in range(n)}
        for i, op in enumerate(self.ops):
            for r in op.results:
                for use in r.uses:
                    user = self.top_level(use.operation)
                    if user is not None and user is not op:
                        j = self.order[user]
                        self.succ[i][j] += 1
                        self.pred[j][i] += 1
        self.rank = list(range(n))

    def top_level(self, op: Operation) -> Operation | None:
        """The ancestor of `op` that is an op of this block."""
        node: Operation | None = op
        while node is not None and node.parent_block() is not self.block:
            node = node.parent_op()
        return node

    def group(self, op: Operation) -> int:
        """The group of top-level op `op`."""
        i = self.order[op]
        leader = self.leader
        while leader[i] != i:
            leader[i] = leader[leader[i]]
            i = leader[i]
        return i

    def try_merge(self, a: int, b: int) -> bool:
        """Merge groups a and b if the union is legal; return whether it happened."""
        if a == b or a not in self.facts or b not in self.facts:
            return False
        fa, fb = self.facts[a], self.facts[b]
        small, large = (a, b) if len(fa.ops) <= len(fb.ops) else (b, a)
        meeting = self._meeting(small, large)

        def in_union(op: Operation) -> bool:
            return op in self.order and self.group(op) in (a, b)

        counts = self._legal(fa, fb, meeting, in_union)
        if counts is None:
            return False
        reranking = self._reranking(a, b)
        if self.verify:
            assert (reranking is None) == self._creates_cycle_slowly(a, b), "cycle check"
        if reranking is None:
            return False
        self._merge(a, b, meeting, counts if isinstance(counts, UnionCounts) else None, reranking)
        return True

    def _legal(
        self,
        a: GroupFacts,
        b: GroupFacts,
        meeting: list[tuple[Operation, SSAValue]],
        in_union: Callable[[Operation], bool],
    ) -> UnionCounts | bool | None:
        """Whether the union of `a` and `b` is legal: its counts (`check_union`), True
        (only `check_group` on the whole union could tell) or None (illegal)."""
        partial = not (a.strict or b.strict)
        counts = check_union(a, b, meeting, in_union, self.max_recompute, self.order, partial)
        legal = counts is not None and not isinstance(counts, str)
        if counts is None:
            whole = check_group([*a.ops, *b.ops], self.max_recompute, self.order, partial)
            legal = isinstance(whole, GroupInfo)
        if self.verify:
            slow = check_group([*a.ops, *b.ops], self.max_recompute, self.order, partial)
            assert isinstance(slow, GroupInfo) == legal, f"legality of a union: {slow}"
        if not legal:
            return None
        return counts if isinstance(counts, UnionCounts) else True

    def _meeting(self, small: int, large: int) -> list[tuple[Operation, SSAValue]]:
        """Each use of a value of one group by an op of the other, as (user, value),
        found from the ops of `small`."""
        out: list[tuple[Operation, SSAValue]] = []
        for op in self.members[small]:
            for v in op.operands:
                owner = v.owner
                if isinstance(owner, Operation) and owner in self.order:
                    if self.group(owner) == large:
                        out.append((op, v))
            for r in op.results:
                for use in r.uses:
                    user = use.operation
                    if user in self.order and self.group(user) == large:
                        out.append((user, r))
        return out

    # ------------------------------------------------------------------ cycles

    def _reranking(self, a: int, b: int) -> Reranking | None:
        """None if merging a and b closes a cycle through another group, else how the
        union is ranked (see `_merge`).

        With lo ranked before hi, a cycle is a path lo -> c -> ... -> hi, and every
        group on it is ranked between the two. If no predecessor of hi but lo is ranked
        after lo, or no successor of lo but hi is ranked before hi, there is none, and
        the union simply takes lo's rank or hi's; else the groups lo reaches below hi
        are searched (`forward`)."""
        lo, hi = (a, b) if self.rank[a] < self.rank[b] else (b, a)
        low, high = self.rank[lo], self.rank[hi]
        if len(self.pred[hi]) <= len(self.succ[lo]):
            if not any(p != lo and self.rank[p] > low for p in self.pred[hi]):
                return Reranking(lo, hi, self.rank[lo], set())
        if not any(s != hi and self.rank[s] < high for s in self.succ[lo]):
            return Reranking(lo, hi, self.rank[hi], set())
        if not any(p != lo and self.rank[p] > low for p in self.pred[hi]):
            return Reranking(lo, hi, self.rank[lo], set())
        stack = [s for s in self.succ[lo] if s != hi and self.rank[s] < high]
        seen = set(stack)
        while stack:
            g = stack.pop()
            if hi in self.succ[g]:
                return None
            for s in self.succ[g]:
                if s not in seen and self.rank[s] < high:
                    seen.add(s)
                    stack.append(s)
        return Reranking(lo, hi, None, seen)

    def _backward(self, lo: int, hi: int) -> set[int]:
        """The groups ranked above lo from which hi is reachable (lo excluded)."""
        low = self.rank[lo]
        stack = [p for p in self.pred[hi] if p != lo and self.rank[p] > low]
        seen = set(stack)
        while stack:
            g = stack.pop()
            for p in self.pred[g]:
                if p not in seen and p != lo and self.rank[p] > low:
                    seen.add(p)
                    stack.append(p)
        return seen

    def _creates_cycle_slowly(self, a: int, b: int) -> bool:
        """The cycle check by a search of the whole graph (`verify`)."""
        merged = {a, b}
        stack = [s for g in merged for s in self.succ[g] if s not in merged]
        seen: set[int] = set(stack)
        while stack:
            g = stack.pop()
            for s in self.succ[g]:
                if s in merged:
                    return True
                if s not in seen:
                    seen.add(s)
                    stack.append(s)
        return False

    # ------------------------------------------------------------------ merging

    def _merge(
        self,
        a: int,
        b: int,
        meeting: list[tuple[Operation, SSAValue]],
        counts: UnionCounts | None,
        reranking: Reranking,
    ) -> None:
        """Make a and b one group: facts, members, edges and ranks."""
        lo, hi = reranking.lo, reranking.hi
        backward = self._backward(lo, hi) if reranking.rank is None else set()
        # the union keeps the name with more edges, so renaming edges walks the fewer
        degree = {g: len(self.succ[g]) + len(self.pred[g]) for g in (a, b)}
        keep, drop = (a, b) if (degree[a], -a) >= (degree[b], -b) else (b, a)
        self.leader[drop] = keep
        fa, fb = self.facts.pop(a), self.facts.pop(b)
        self.facts[keep] = merge_facts(fa, fb, meeting, counts, self.order)
        first, second = self.members.pop(a), self.members.pop(b)
        if len(first) < len(second):
            first, second = second, first
        first.extend(second)
        self.members[keep] = first
        for c, m in self.succ.pop(drop).items():  # drop -> c
            del self.pred[c][drop]
            if c != keep:
                self.succ[keep][c] += m
                self.pred[c][keep] += m
        for c, m in self.pred.pop(drop).items():  # c -> drop
            del self.succ[c][drop]
            if c != keep:
                self.succ[c][keep] += m
                self.pred[keep][c] += m
        if reranking.rank is not None:
            self.rank[keep] = reranking.rank
            return
        # Pearce-Kelly: in the ranks of lo, hi and the groups between them that lo
        # reaches (forward) or that reach hi (backward; no group is both, or there
        # would be a cycle), put the backward ones first, then the union, then the
        # forward ones, each in their old order
        forward = reranking.forward
        slots = sorted(self.rank[g] for g in (lo, hi, *forward, *backward))
        moved = [
            *sorted(backward, key=self.rank.__getitem__),
            keep,
            *sorted(forward, key=self.rank.__getitem__),
        ]
        for g, slot in zip(moved, slots, strict=False):
            self.rank[g] = slot

    # ------------------------------------------------------------------ steps

    def claim_prologue(self, reduction: Operation) -> None:
        """Step 2: merge into the reduction's group the ops it reads, backwards, while
        each is elementwise or a view that reads no more outside bytes than it makes."""
        stack = [reduction]
        while stack:
            op = stack.pop()
            for v in op.operands:
                producer = v.owner
                if not isinstance(producer, Operation) or producer not in self.order:
                    continue
                if self.classes[producer] not in (OpClass.ELEMENTWISE, OpClass.VIEW):
                    continue
                g, p = self.group(reduction), self.group(producer)
                if p == g or len(self.members[p]) > 1:
                    continue
                if self._outside_bytes(producer, g) > sum(value_bytes(r) for r in producer.results):
                    continue
                if self.try_merge(g, p):
                    stack.append(producer)

    def _outside_bytes(self, op: Operation, g: int) -> int:
        """Bytes `op` reads that group g neither computes nor reads already."""
        read = self.facts[g].reads
        return sum(
            value_bytes(v)
            for v in set(op.operands)
            if not (
                isinstance(v.owner, Operation)
                and v.owner in self.order
                and self.group(v.owner) == g
            )
            and v not in read
            and not isinstance(v.owner, nn.ConstantOp)
        )

    def sibling_fusible(self, g: int) -> bool:
        """Whether group g may take part in a sibling merge: a pointwise or reduction
        group that computes (a lone view is free in eager; materializing it is not)."""
        facts = self.facts.get(g)
        return facts is not None and facts.kind != MATMUL and facts.computes

    def merge_siblings(self, users: list[Operation]) -> None:
        """Step 4 for the readers of one value (in program order, an op once per
        operand that reads it): try to merge each reader's group with every later
        reader's. Only groups that are sibling-fusible can merge, and merging keeps
        them so; skipped: a reader whose group already holds every later reader."""
        users = [u for u in users if self.sibling_fusible(self.group(u))]
        later = Counter(self.group(u) for u in users)
        for i, first in enumerate(users):
            later[self.group(first)] -= 1
            if later[self.group(first)] == len(users) - i - 1:
                continue
            for other in users[i + 1 :]:
                ga, gb = self.group(first), self.group(other)
                if self.try_merge(ga, gb):
                    later[self.group(first)] = later.pop(ga, 0) + later.pop(gb, 0)

    def groups(self) -> list[list[Operation]]:
        """The fusible groups' ops in program order, ordered by their first op."""
        out = [sorted(self.members[g], key=self.order.__getitem__) for g in self.facts]
        return sorted(out, key=lambda ops: self.order[ops[0]])


RETRY_ROUNDS = 4
"""Sweeps over the producer-consumer pairs step 3 refused (each stops early when it
merges none), so a pathological block costs a few sweeps, not one per merge."""


def find_groups(
    block: Block,
    max_recompute: int = 8,
    excluded: Collection[Operation] = (),
    verify: bool = False,
) -> list[FusionGroup]:
    """Partition the fusible top-level ops of `block` into legal fusion groups.

    Every fusible op lands in exactly one group (possibly alone); ops in `excluded`
    (matmuls left to the library) are treated as opaque. See the module docstring for
    the algorithm. The block is not modified. `verify` checks every merge decision the
    slow way too (tests).
    """
    groups = _find_groups(block, max_recompute, excluded, verify)
    views = boundary_reshapes(groups)
    if not views:
        return groups
    # 5. the same without those reshapes: each stays a host view of its operand's
    # buffer (free), so its consumers may join a reduction it blocked (BERT's residual
    # add of a GEMM result reshaped to [B, S, H], then LayerNorm over H)
    regrouped = _find_groups(block, max_recompute, {*excluded, *views}, verify)
    if _kernels(regrouped) < _kernels(groups):
        return regrouped
    return groups


def _kernels(groups: list[FusionGroup]) -> int:
    """How many kernels `groups` launch (`FusionGroup.launches`)."""
    return sum(g.launches for g in groups)


def boundary_reshapes(groups: list[FusionGroup]) -> list[Operation]:
    """The reshapes that regroup dims (not only add or drop unit dims) at a group's
    input boundary: each reads a value computed outside its group, which is a whole
    contiguous buffer, so the reshape can be a host view instead of indexing that keeps
    its group from joining a reduction (the tiler ties axes one to one)."""
    found = []
    for group in groups:
        if len(group.ops) < 2:
            continue
        inside = set(group.ops)
        for op in group.ops:
            if not isinstance(op, nn.ReshapeOp) or op.input.owner in inside:
                continue
            source, result = op.input.type, op.result.type
            if squeezed(source.get_shape()) != squeezed(result.get_shape()):  # type: ignore[attr-defined]
                found.append(op)
    return found


def _find_groups(
    block: Block,
    max_recompute: int,
    excluded: Collection[Operation],
    verify: bool,
) -> list[FusionGroup]:
    """Steps 1-4 until every group passes its full check (see the module docstring)."""
    order = {op: i for i, op in enumerate(block.ops)}
    strict: set[Operation] = set()
    while True:
        found: list[FusionGroup] = []
        incomplete: list[list[Operation]] = []
        for ops in _grow(block, max_recompute, excluded, strict, verify):
            info = check_group(ops, max_recompute, order)
            if isinstance(info, GroupInfo):
                found.append(FusionGroup(ops, info))
            else:
                incomplete.append(ops)
        if not incomplete:
            return found
        fresh = {op for ops in incomplete for op in ops} - strict
        if not fresh:  # groups of strict ops only still fail: leave their ops unfused
            return found
        strict.update(fresh)


def _grow(
    block: Block,
    max_recompute: int,
    excluded: Collection[Operation],
    strict: AbstractSet[Operation],
    verify: bool,
) -> list[list[Operation]]:
    """Steps 1-4 of the module docstring; merges involving an op of `strict` are checked
    in full, the others with `partial=True` (see `check_group`)."""
    part = _Partition(block, max_recompute, excluded, strict, verify)
    fusible = [op for op in part.ops if part.group(op) in part.facts]
    # 2. reductions claim their cheap prologues
    for op in fusible:
        if part.classes[op] is OpClass.REDUCTION:
            part.claim_prologue(op)
    # 3. producer-consumer merges; transposes join only after the other ops have
    # grouped (a transpose merged early can leave a consumer outside: RoPE's slices of
    # a transposed q need q as a group input)
    refused: list[tuple[Operation, Operation]] = []
    for late in (False, True):
        for op in fusible:
            for v in op.operands:
                producer = v.owner
                if not isinstance(producer, Operation) or producer not in part.order:
                    continue
                if isinstance(producer, nn.TransposeOp) != late:
                    continue
                if not part.try_merge(part.group(op), part.group(producer)):
                    refused.append((op, producer))
    # a refused merge may be legal once the groups have grown: a per-row index
    # computation is a side op of a pointwise group but in the domain of the row
    # reduction that group later joins (an embedding chain merged after the norm)
    for _ in range(RETRY_ROUNDS):
        pending = [
            (op, p)
            for op, p in refused
            if part.group(op) != part.group(p) and part.group(p) in part.facts
        ]
        refused = [(o, p) for o, p in pending if not part.try_merge(part.group(o), part.group(p))]
        if len(refused) == len(pending):
            break
    # 4. sibling merges: groups reading the same value
    readers: dict[SSAValue, list[Operation]] = {}
    for op in fusible:
        for v in op.operands:
            if not isinstance(v.owner, nn.ConstantOp):  # a shared splat is no reason
                readers.setdefault(v, []).append(op)
    for users in readers.values():
        part.merge_siblings(users)
    return part.groups()
