"""Legality of fusion groups: which sets of nn ops may become one kernel.

`nn-fuse` (passes/nn_fuse/nn_fuse.py) grows groups greedily and checks every merge. A group is a
set of top-level ops of one block; it is legal when it matches one of three kernel
shapes, each with one *domain* (the index space the kernel iterates over):

- **pointwise**: elementwise ops and views (reshape, transpose, slice, concat, broadcast)
  evaluated by index mapping, and `nn.take` (elementwise in its index; the input it
  gathers from is read by address, so it comes from outside the group). The domain is
  a flat index space whose size is the number of elements of every group output (all
  outputs have the same element count).
- **reduction**: one or more reductions with the same input shape `S` and the same axes
  `A` (softmax: max and sum; layer_norm: two means), plus prologue and epilogue ops. Every
  op is *row-shaped*: its rank is that of `S` and it agrees with `S` on every kept axis
  (an element of a row, a slice of a row, or a per-row scalar with size 1 on `A`), or,
  of another rank, it is the per-row scalars with their unit dims anywhere (the kept
  dims without `A`, or squeezed). A kernel program owns whole rows.
- **matmul**: one or more `nn.matmul`s with one result type that share their A operand
  (the gated MLP), plus an elementwise epilogue on the accumulator: every op has the
  matmul result shape. Matmul operands come from outside the group (no prologue, so no
  matmul into matmul).

In every kind, an op whose result is not in the domain is a *side op*: it is evaluated
again for each domain element that needs it (a weight cast before its broadcast, say).
Side ops must depend only on group inputs and other side ops, must have no users outside
the group, and the number of non-view side ops is bounded by `max_recompute`.
Reductions and matmuls are never side ops, so no group duplicates one.

Finally, a group must be one *iteration space* for the tiler (`analysis.analyze`),
so that convert-nn-to-tile makes exactly one `tile.kernel` of every fusion nn-fuse forms:
a view the tiler cannot index inside the group (a transpose, a strided slice, cuts on two
axes, a reshape that regroups dims next to a broadcast, ...) makes the group illegal, and
the op stays outside (eager, or a copy kernel of its own). The tiler sees the group as
outlining will build it: splat constants cloned in, dense constants read as inputs.

Two ways to ask, one set of rules (`domain_key`, `in_domain`, `shape_violation`,
`side_violation`): `check_group` looks at every op of a group; `check_union` decides the
union of two legal groups from their kept `GroupFacts` and the ops where they meet (each
rule depends only on the domain and on where an op's operands come from), so growing a
group of n ops one op at a time costs O(n), not O(n^2). Where only the whole union can
tell (see `check_union`), it says so and `check_group` decides.

Cycles between groups are the grouping algorithm's business (`grouping`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from enum import Enum
from functools import cache

from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import BlockArgument, Operation, SSAValue

from fuseopt.dialects import nn
from fuseopt.passes.convert_nn_to_tile.analysis import (
    AmbiguousDomain,
    AxisSummary,
    ClassSpace,
    Group,
    Incomplete,
    IterationSpace,
    Untileable,
    analyze,
)

ELEMENTWISE_TYPES = nn.ELEMENTWISE_OPS
"""Ops computed element by element (same shape in and out)."""

VIEW_TYPES: tuple[type[Operation], ...] = (
    nn.ReshapeOp,
    nn.TransposeOp,
    nn.SliceOp,
    nn.BroadcastOp,
    nn.ConcatOp,
)
"""Ops that only move elements; inside a group they become indexing."""

POINTWISE, REDUCTION, MATMUL = (
    nn.FusionKind.POINTWISE,
    nn.FusionKind.REDUCTION,
    nn.FusionKind.MATMUL,
)
"""The values of a group's `kind` attribute (`nn.FusionKind`)."""


class OpClass(Enum):
    """How nn-fuse sees an op."""

    ELEMENTWISE = "elementwise"
    VIEW = "view"
    REDUCTION = "reduction"
    MATMUL = "matmul"
    CONSTANT = "constant"
    OPAQUE = "opaque"
    """Never fused: composites, nn.fusion, other dialects, dynamic shapes."""


def cloned_into_fusion(op: Operation) -> bool:
    """Whether outlining copies `op` into every fusion that reads it (a splat constant,
    or an index vector the kernel computes from its tile indices) instead of passing its
    value in (other dense constants are data: a buffer read by index)."""
    return isinstance(op, nn.ConstantOp) and (op.splat_value is not None or op.arange is not None)


def _static_tensor(t: object) -> bool:
    return isinstance(t, TensorType) and all(d >= 0 for d in t.get_shape())


def classify(op: Operation) -> OpClass:
    """The class of `op` for fusion (OPAQUE for anything nn-fuse must leave alone)."""
    types = [v.type for v in (*op.operands, *op.results)]
    if op.regions or not all(_static_tensor(t) for t in types):
        return OpClass.OPAQUE
    if isinstance(op, nn.ConstantOp):
        return OpClass.CONSTANT
    if isinstance(op, nn.ReshapeOp) and _is_function_argument(op.input) and not _returned(op):
        # a reshape of a function argument is a host view of its buffer (every buffer
        # is contiguous), free outside any kernel; inside one it would be indexing a
        # reduction group cannot always tile (a loss's input split into rows). One that
        # is returned is copied into its output anyway: that copy may join a group.
        return OpClass.OPAQUE
    if isinstance(op, nn.CumsumOp):
        return OpClass.OPAQUE  # a scan: a whole-tensor kernel of its own
    if isinstance(op, nn.TakeOp) and _is_cloned(op.input):
        return OpClass.OPAQUE  # a kernel gathers from memory, never from a cloned constant
    if isinstance(op, (*ELEMENTWISE_TYPES, nn.TakeOp)):  # a take: elementwise in its index
        return OpClass.ELEMENTWISE
    if isinstance(op, VIEW_TYPES):
        return OpClass.VIEW
    if isinstance(op, nn.ReductionOp):
        return OpClass.REDUCTION
    if isinstance(op, nn.MatmulOp):
        return OpClass.MATMUL
    return OpClass.OPAQUE


def _is_cloned(v: SSAValue) -> bool:
    return isinstance(v.owner, Operation) and cloned_into_fusion(v.owner)


def _is_function_argument(v: SSAValue) -> bool:
    return isinstance(v, BlockArgument) and isinstance(v.block.parent_op(), func.FuncOp)


def _returned(op: Operation) -> bool:
    return any(isinstance(use.operation, func.ReturnOp) for r in op.results for use in r.uses)


def shape_of(v: SSAValue) -> tuple[int, ...]:
    """The static shape of a tensor value."""
    assert isinstance(v.type, TensorType)
    return tuple(v.type.get_shape())


def numel(shape: Iterable[int]) -> int:
    """Number of elements of a shape."""
    return math.prod(shape)


@dataclass(frozen=True)
class GroupInfo:
    """What `check_group` learned about a legal group."""

    kind: str
    """pointwise, reduction or matmul."""
    domain: tuple[int, ...]
    """pointwise: the shape of the first output; reduction: the reductions' input shape;
    matmul: the matmul result shape."""
    reduced_axes: tuple[int, ...]
    """The reduced axes (reduction groups), else ()."""
    side_ops: frozenset[Operation]
    """Ops evaluated per domain element that needs them (recomputed)."""
    recompute: int
    """How many non-view side ops the group recomputes."""


def group_outputs(ops: Collection[Operation]) -> list[SSAValue]:
    """Results of `ops` used by some op outside `ops`, in op order."""
    inside = ops if isinstance(ops, AbstractSet) else set(ops)
    return [r for op in ops for r in op.results if any(u.operation not in inside for u in r.uses)]


@dataclass(frozen=True)
class DomainKey:
    """What decides, op by op, whether an op of a group is in its domain (`in_domain`)."""

    kind: str
    numel: int = 0
    """pointwise: the element count of the domain."""
    shape: tuple[int, ...] = ()
    """reduction: the reductions' input shape; matmul: the matmul result shape."""
    axes: tuple[int, ...] = ()
    """reduction: the reduced axes."""


def domain_key(
    matmuls: Sequence[nn.MatmulOp],
    reductions: AbstractSet[tuple[tuple[int, ...], tuple[int, ...]]],
    output_numels: AbstractSet[int],
    largest: int,
    computed_inside: Callable[[SSAValue], bool],
) -> DomainKey | str:
    """The domain of a group, or why the group cannot have one: from its matmuls (in
    program order), the (input shape, axes) of its reductions, the element counts of
    its outputs, the element count of its largest op (a group without outputs is dead
    code: its largest op is the domain) and whether a value is computed in the group."""
    if matmuls:
        if reductions:
            return "a matmul and a reduction do not share a kernel"
        first = matmuls[0]
        for mm in matmuls:
            if any(computed_inside(v) for v in mm.operands):
                return "a matmul operand computed in the group (matmul prologue or matmul chain)"
            same = (
                mm.lhs == first.lhs
                and mm.result.type == first.result.type
                and (mm.transpose_a is None) == (first.transpose_a is None)
            )
            if not same:
                return "matmuls in one group must share their A operand and result type"
        return DomainKey(MATMUL, shape=shape_of(first.result))
    if reductions:
        if len(reductions) > 1:
            return f"reductions over different rows or axes: {sorted(reductions)}"
        ((source, axes),) = reductions
        return DomainKey(REDUCTION, shape=source, axes=axes)
    if len(output_numels) > 1:
        return f"pointwise outputs have different element counts {sorted(output_numels)}"
    return DomainKey(POINTWISE, numel=next(iter(output_numels), largest))


def reduction_signature(op: Operation) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(input shape, reduced axes) of a reduction: the reductions of a group share it."""
    assert isinstance(op, nn.ReductionOp)
    return shape_of(op.operands[0]), tuple(op.axis_list)


def in_domain(op: Operation, key: DomainKey) -> bool:
    """Whether `op`'s result is in the domain `key` (else `op` is a side op). In a
    reduction group an op is *row-shaped*: the rank of the input and its size on every
    kept axis, or of another rank the per-row values with their unit dims anywhere (the
    kept dims, `[1, 1024]` and `[1024]` for rows of `[64, 1, 1024]` over axis 0: the
    tiler ties non-unit axes only)."""
    shape = shape_of(op.results[0])
    if key.kind == POINTWISE:
        return numel(shape) == key.numel
    if key.kind == MATMUL:
        return shape == key.shape
    source = key.shape
    if len(shape) == len(source):
        return all(shape[i] == source[i] for i in range(len(source)) if i not in key.axes)
    kept = [source[i] for i in range(len(source)) if i not in key.axes]
    return squeezed(shape) == squeezed(kept)


Status = Callable[[SSAValue], bool | None]
"""For an operand: None when it comes from outside the group, else whether the op
computing it is in the domain."""


def squeezed(shape: Iterable[int]) -> tuple[int, ...]:
    """`shape` without its unit dims."""
    return tuple(d for d in shape if d != 1)


def shape_violation(op: Operation, key: DomainKey, inside: bool, status: Status) -> str | None:
    """Why `op` (in the domain when `inside`) breaks its group's kind, or None: in a
    reduction group a view of a domain value must keep rows; in a matmul group nothing
    may move accumulator elements; an `nn.take` reads its input by address, so the input
    comes from outside the group."""
    if isinstance(op, nn.TakeOp) and status(op.input) is not None:
        return "nn.take gathers from a value computed in the group (read by address)"
    if key.kind == MATMUL:
        moves = isinstance(op, nn.TransposeOp | nn.SliceOp | nn.ConcatOp)
        if moves and any(status(v) for v in op.operands):
            return f"{op.name} would move accumulator elements"
        return None
    if key.kind != REDUCTION or not inside or not isinstance(op, VIEW_TYPES):
        return None
    if not any(status(v) for v in op.operands):
        return None  # a view of group inputs is plain indexing
    source, axes = key.shape, key.axes
    kept = [i for i in range(len(source)) if i not in axes]
    src, dst = shape_of(op.operands[0]), shape_of(op.results[0])
    if isinstance(op, nn.BroadcastOp):
        # from a per-row value (keepdim form) along the reduced axes only
        ok = len(src) == len(source) and all(src[i] == dst[i] for i in kept)
    elif isinstance(op, nn.SliceOp):
        ok = len(src) == len(source) and all(op.bounds[i] == (0, src[i], 1) for i in kept)
    elif isinstance(op, nn.ConcatOp):
        ok = (
            len(src) == len(source)
            and op.axis.value.data in axes
            and all(status(v) for v in op.operands)
        )
    elif isinstance(op, nn.ReshapeOp):
        ok = squeezed(src) == squeezed(dst)
    else:  # transpose moves elements between rows
        ok = False
    if ok:
        return None
    return f"{op.name} {list(src)} -> {list(dst)} does not keep rows of {list(source)}"


def side_violation(op: Operation, key: DomainKey, status: Status) -> str | None:
    """Why side op `op` cannot be recomputed per domain element, or None: it must
    depend only on group inputs and other side ops."""
    if any(status(v) for v in op.operands):
        return f"{op.name} is outside the {key.kind} domain but uses a value computed in it"
    return None


def check_group(
    ops: Collection[Operation],
    max_recompute: int,
    order: dict[Operation, int],
    partial: bool = False,
) -> GroupInfo | str:
    """Whether `ops` (top-level ops of one block) can be one kernel.

    Returns the group's GroupInfo, or a one-line reason why not. `order` gives each op's
    position in its block (outputs are taken in program order). With `partial`, a group
    the tiler finds `Incomplete` (axes not yet tied into one domain, a state greedy
    growth passes through) is accepted; a final group must pass without it.
    """
    members = sorted(set(ops), key=lambda op: order.get(op, 0))
    inside = set(members)
    classes = {op: classify(op) for op in members}
    if any(c in (OpClass.OPAQUE, OpClass.CONSTANT) for c in classes.values()):
        return "opaque or constant ops are never grouped"
    matmuls = [op for op in members if isinstance(op, nn.MatmulOp)]
    reductions = {reduction_signature(op) for op in members if classes[op] is OpClass.REDUCTION}
    outputs = group_outputs(members)
    largest = max(members, key=lambda op: (numel(shape_of(op.results[0])), order.get(op, 0)))
    key = domain_key(
        matmuls,
        reductions,
        {numel(shape_of(v)) for v in outputs},
        numel(shape_of(largest.results[0])),
        lambda v: v.owner in inside,
    )
    space = _analysis(members, outputs, order)  # the tiler's verdict, computed once
    if isinstance(key, str):
        return key
    domain = key.shape
    if key.kind == POINTWISE:
        domain = shape_of(outputs[0]) if outputs else shape_of(largest.results[0])
    in_dom = {op: in_domain(op, key) for op in members}
    if key.kind == POINTWISE and not all(in_dom.values()):
        for op in _indexed_parts(members, space()):
            in_dom[op] = True

    def status(v: SSAValue) -> bool | None:
        return in_dom[v.owner] if v.owner in inside else None  # type: ignore[index]

    for op in members:
        reason = shape_violation(op, key, in_dom[op], status)
        if reason is not None:
            return reason
    info = _finish(key, domain, members, in_dom, outputs, max_recompute, status)
    if isinstance(info, str):
        return info
    untileable = _tiling_obstacle(space(), partial)
    return info if untileable is None else untileable


def fusion_operands(members: Sequence[Operation]) -> tuple[list[Operation], list[SSAValue]]:
    """What a group (`members` in program order) reads from outside, as outlining wires
    it into the fusion: the splat constants it clones in, and every other value (the
    fusion's inputs), each in order of first use."""
    inside = set(members)
    constants: dict[Operation, None] = {}
    inputs: dict[SSAValue, None] = {}
    for op in members:
        for v in op.operands:
            owner = v.owner
            if isinstance(owner, Operation) and owner in inside:
                continue
            if isinstance(owner, Operation) and cloned_into_fusion(owner):
                constants.setdefault(owner)
            else:
                inputs.setdefault(v)
    return list(constants), list(inputs)


def kernel_group(
    ops: Collection[Operation], outputs: list[SSAValue], order: dict[Operation, int]
) -> Group:
    """The tiler's view of a group, as `outlining` will build the fusion: splat
    constants read by the group first, then its ops in program order; every other
    value from outside is an input."""
    members = sorted(ops, key=lambda op: order.get(op, 0))
    constants, inputs = fusion_operands(members)
    return Group([*constants, *members], inputs, outputs)


def _analysis(
    ops: Collection[Operation], outputs: list[SSAValue], order: dict[Operation, int]
) -> Callable[[], IterationSpace | Untileable]:
    """The tiler's analysis of the group (its iteration space, or why not), run on
    first call and kept: the pointwise check and the tiling check both read it."""

    @cache
    def space() -> IterationSpace | Untileable:
        try:
            return analyze(kernel_group(ops, outputs, order))
        except Untileable as e:
            return e

    return space


def _reduction_ops(a: GroupFacts, b: GroupFacts) -> int:
    """How many reduction ops the union of `a` and `b` holds (counting stops at 2)."""
    found = 0
    for op in (*a.ops, *b.ops):
        found += isinstance(op, nn.ReductionOp)
        if found > 1:
            break
    return found


def _tiling_obstacle(space: IterationSpace | ClassSpace | Untileable, partial: bool) -> str | None:
    """Why the tiler cannot make the group one kernel, or None when it can (or, with
    `partial`, when only ops still to join are missing)."""
    if isinstance(space, Incomplete):
        return None if partial else f"not one iteration space for the tiler ({space.reason})"
    if isinstance(space, Untileable):
        where = f"{space.op.name}: " if space.op is not None else ""
        return f"not one iteration space for the tiler ({where}{space.reason})"
    return None


def _finish(
    key: DomainKey,
    domain: tuple[int, ...],
    ops: Sequence[Operation],
    in_dom: dict[Operation, bool],
    outputs: list[SSAValue],
    max_recompute: int,
    status: Status,
) -> GroupInfo | str:
    """Rules shared by every kind: side ops are input-only, internal and bounded."""
    side = frozenset(op for op in ops if not in_dom[op])
    for op in ops:
        reason = side_violation(op, key, status) if op in side else None
        if reason is not None:
            return reason
    for v in outputs:
        if v.owner in side:
            return f"an output of {v.owner.name} is outside the {key.kind} domain {list(domain)}"
    recompute = sum(1 for op in side if classify(op) is not OpClass.VIEW)
    if recompute > max_recompute:
        return f"{recompute} recomputed ops exceed max_recompute={max_recompute}"
    return GroupInfo(key.kind, domain, key.axes, side, recompute)


def _indexed_parts(
    ops: Collection[Operation], space: IterationSpace | Untileable
) -> set[Operation]:
    """Ops of a pointwise group whose results the tiler indexes as parts of the split
    dim (a slice or concat piece of a value computed in the group, and what is computed
    from it: RoPE's rotate-half of a transposed q): they span every iteration dim, so
    they are evaluated once per element, not recomputed as side ops."""
    if isinstance(space, Untileable) or space.split_dim is None:
        return set()
    every = set(range(len(space.sizes)))
    return {op for op in ops if op.results and set(space.span(op.results[0])) == every}


# ---------------------------------------------------------------- incremental checks


@dataclass
class GroupFacts:
    """What legality keeps about a legal group while nn-fuse grows it: enough to decide
    its union with another group (`check_union`) from the ops where the two meet and a
    few totals, so a merge costs about the size of the smaller group, not of the union.
    """

    ops: list[Operation]
    matmuls: list[nn.MatmulOp]
    """In program order."""
    reductions: set[tuple[tuple[int, ...], tuple[int, ...]]]
    """The (input shape, axes) of its reductions."""
    largest: int
    """The element count of its largest op."""
    outputs: dict[SSAValue, int]
    """Its results used outside it, each with its number of uses outside."""
    output_numels: Counter[int]
    """The element counts of its outputs."""
    reads: set[SSAValue]
    """Every operand of its ops."""
    computes: bool
    """It holds an op that is not a view."""
    strict: bool
    """It holds an op that nn-fuse checks in full (`partial=False`)."""
    axes: AxisSummary
    key: DomainKey | None
    """The domain the counts below are for (None: count again on the next union)."""
    side: int = 0
    """Ops outside the domain."""
    recompute: int = 0
    """Non-view ops outside the domain."""
    side_outputs: int = 0
    """Outputs computed outside the domain."""

    @staticmethod
    def of_op(op: Operation, strict: bool, op_class: OpClass) -> GroupFacts:
        """The facts of the group made of fusible `op` (of class `op_class`) alone."""
        outputs = {r: n for r in op.results if (n := sum(1 for _ in r.uses))}
        reductions = {reduction_signature(op)} if op_class is OpClass.REDUCTION else set()
        matmuls = [op] if isinstance(op, nn.MatmulOp) else []
        largest = numel(shape_of(op.results[0]))
        facts = GroupFacts(
            [op],
            matmuls,
            reductions,
            largest,
            outputs,
            Counter(numel(shape_of(r)) for r in outputs),
            set(op.operands),
            op_class is not OpClass.VIEW,
            strict,
            AxisSummary(op),
            None,
        )
        key = domain_key(
            matmuls, reductions, set(facts.output_numels), largest, lambda v: v.owner is op
        )
        if isinstance(key, DomainKey):
            counts = _count([op], key, lambda v: None, outputs.__contains__)
            if not isinstance(counts, str):
                facts.key = key
                facts.side, facts.recompute, facts.side_outputs = counts
        return facts

    @staticmethod
    def empty() -> GroupFacts:
        """The facts of a group of no ops (to ask `check_union` about one group)."""
        return GroupFacts([], [], set(), 0, {}, Counter(), set(), False, False, AxisSummary(), None)

    @property
    def kind(self) -> str:
        """pointwise, reduction or matmul."""
        return MATMUL if self.matmuls else REDUCTION if self.reductions else POINTWISE


@dataclass
class UnionCounts:
    """What `check_union` found about a legal union, for `merge_facts`."""

    key: DomainKey | None
    side: int
    recompute: int
    side_outputs: int


def check_union(
    a: GroupFacts,
    b: GroupFacts,
    meeting: Sequence[tuple[Operation, SSAValue]],
    in_union: Callable[[Operation], bool],
    max_recompute: int,
    order: dict[Operation, int],
    partial: bool,
) -> UnionCounts | str | None:
    """Whether the union of the legal groups `a` and `b` passes `check_group` (with
    `partial`), decided without visiting every op (`b` may be `GroupFacts.empty()`:
    then `a` alone is checked).

    `meeting` lists each use of a value of one group by an op of the other, as (user,
    value); `in_union` says whether a top-level op is in either group. Returns the
    union's counts, a reason why not, or None when only `check_group` on the whole
    union can tell (values with different axis orders span the space, or a pointwise
    group with slices or concats that has side ops: the tiler's spans decide).

    The per-op rules (`in_domain`, `shape_violation`, `side_violation`) depend only on
    the domain and on where an op's operands come from. A group whose counts are for
    the union's domain is legal with them, so only its ops reading from the other group
    are checked again; a group with counts for another domain is counted in full.
    """
    lost = Counter(v for _, v in meeting)
    gone = {v for v, n in lost.items() if (a.outputs.get(v) or b.outputs.get(v)) == n}
    numels = a.output_numels + b.output_numels
    numels.subtract(numel(shape_of(v)) for v in gone)
    matmuls = sorted([*a.matmuls, *b.matmuls], key=order.__getitem__)

    def computed_inside(v: SSAValue) -> bool:
        return isinstance(v.owner, Operation) and in_union(v.owner)

    key = domain_key(
        matmuls,
        a.reductions | b.reductions,
        {n for n, count in numels.items() if count > 0},
        max(a.largest, b.largest),
        computed_inside,
    )
    if isinstance(key, str):
        return key
    counts = _union_counts(a, b, key, meeting, gone, computed_inside)

    def is_input(v: SSAValue) -> bool:
        owner = v.owner
        return not (isinstance(owner, Operation) and (in_union(owner) or cloned_into_fusion(owner)))

    try:
        space = a.axes.union_space(b.axes, matmuls, is_input)
    except AmbiguousDomain:
        return None
    if isinstance(space, Untileable) and _reduction_ops(a, b) > 1:
        # the tiler ties the reduced axes of sibling reductions (`analyze`), which the
        # incremental summary does not model: only the whole union can tell
        return None
    split = isinstance(space, ClassSpace) and space.split is not None
    if key.kind == POINTWISE and split and (isinstance(counts, str) or counts[0]):
        return None  # the tiler's spans put some side ops back in the domain
    if isinstance(counts, str):
        return counts
    side, recompute, side_outputs = counts
    if side_outputs:
        return f"an output is outside the {key.kind} domain"
    if recompute > max_recompute:
        return f"{recompute} recomputed ops exceed max_recompute={max_recompute}"
    reason = _tiling_obstacle(space, partial)
    if reason is not None:
        return reason
    return UnionCounts(key, side, recompute, side_outputs)


def _union_counts(
    a: GroupFacts,
    b: GroupFacts,
    key: DomainKey,
    meeting: Sequence[tuple[Operation, SSAValue]],
    gone: AbstractSet[SSAValue],
    computed_inside: Callable[[SSAValue], bool],
) -> tuple[int, int, int] | str:
    """`_count` over the union of `a` and `b` in domain `key`: from a group's counts
    where they are for `key` (then only its ops reading from the other group are
    checked again), else op by op. `gone`: outputs used only by the other group."""

    def status(v: SSAValue) -> bool | None:
        return in_domain(v.owner, key) if computed_inside(v) else None  # type: ignore[arg-type]

    side = recompute = side_outputs = 0
    for group in (a, b):
        outputs = group.outputs
        if group.key == key:
            side, recompute = side + group.side, recompute + group.recompute
            side_outputs += group.side_outputs
            side_outputs -= sum(1 for v in gone if v in outputs and not status(v))
            continue
        counts = _count(
            group.ops, key, status, lambda v, outputs=outputs: v in outputs and v not in gone
        )
        if isinstance(counts, str):
            return counts
        side, recompute = side + counts[0], recompute + counts[1]
        side_outputs += counts[2]
    for op in dict.fromkeys(user for user, _ in meeting):
        reason = _violation(op, key, status)
        if reason is not None:
            return reason
    return side, recompute, side_outputs


def merge_facts(
    a: GroupFacts,
    b: GroupFacts,
    meeting: Sequence[tuple[Operation, SSAValue]],
    counts: UnionCounts | None,
    order: dict[Operation, int],
) -> GroupFacts:
    """The facts of the union of `a` and `b` (legal, where they meet as in
    `check_union`; `counts` from `check_union`, or None when `check_group` decided it):
    the larger one's, updated in place."""
    big, small = (a, b) if len(a.ops) >= len(b.ops) else (b, a)
    big.ops.extend(small.ops)
    big.matmuls = sorted([*big.matmuls, *small.matmuls], key=order.__getitem__)
    big.reductions |= small.reductions
    big.largest = max(big.largest, small.largest)
    big.outputs.update(small.outputs)
    big.output_numels.update(small.output_numels)
    for v, n in Counter(v for _, v in meeting).items():
        left = big.outputs[v] - n
        if left:
            big.outputs[v] = left
        else:
            del big.outputs[v]
            big.output_numels[numel(shape_of(v))] -= 1
    big.reads |= small.reads
    big.computes = big.computes or small.computes
    big.strict = big.strict or small.strict
    big.axes = AxisSummary.merge(big.axes, small.axes)
    if counts is None or counts.key is None:
        big.key = None
    else:
        big.key, big.side, big.recompute = counts.key, counts.side, counts.recompute
        big.side_outputs = counts.side_outputs
    return big


def _violation(op: Operation, key: DomainKey, status: Status) -> str | None:
    inside = in_domain(op, key)
    reason = shape_violation(op, key, inside, status)
    if reason is None and not inside:
        reason = side_violation(op, key, status)
    return reason


def _count(
    ops: Iterable[Operation], key: DomainKey, status: Status, is_output: Callable[[SSAValue], bool]
) -> tuple[int, int, int] | str:
    """(side ops, non-view side ops, outputs of side ops) of `ops` in domain `key`, or
    the first rule one of them breaks."""
    side = recompute = side_outputs = 0
    for op in ops:
        reason = _violation(op, key, status)
        if reason is not None:
            return reason
        if not in_domain(op, key):
            side += 1
            recompute += classify(op) is not OpClass.VIEW
            side_outputs += sum(1 for r in op.results if is_output(r))
    return side, recompute, side_outputs
