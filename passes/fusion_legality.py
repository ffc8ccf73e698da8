"""Legality of fusion groups: which sets of nn ops may become one kernel.

`nn-fuse` (passes/nn_fuse.py) grows groups greedily and asks `check_group` before every
merge. A group is a set of top-level ops of one block; it is legal when it matches one of
three kernel shapes, each with one *domain* (the index space the kernel iterates over):

- **pointwise**: elementwise ops and views (reshape, transpose, slice, concat, broadcast)
  evaluated by index mapping. The domain is a flat index space whose size is the number
  of elements of every group output (all outputs have the same element count).
- **reduction**: one or more reductions with the same input shape `S` and the same axes
  `A` (softmax: max and sum; layer_norm: two means), plus prologue and epilogue ops. Every
  op is *row-shaped*: its rank is that of `S` and it agrees with `S` on every kept axis
  (an element of a row, a slice of a row, or a per-row scalar with size 1 on `A`), or it is
  the per-row scalar without kept dims. A kernel program owns whole rows.
- **matmul**: one or more `nn.matmul`s with one result type that share their A operand
  (the gated MLP), plus an elementwise epilogue on the accumulator: every op has the
  matmul result shape. Matmul operands come from outside the group (no prologue, so no
  matmul into matmul).

In every kind, an op whose result is not in the domain is a *side op*: it is evaluated
again for each domain element that needs it (a weight cast before its broadcast, say).
Side ops must depend only on group inputs and other side ops, must have no users outside
the group, and the number of non-view side ops is bounded by `max_recompute`.
Reductions and matmuls are never side ops, so no group duplicates one.

Finally, a group must be one *iteration space* for the tiler (`tiling_analysis.analyze`),
so that convert-nn-to-tile makes exactly one `tile.kernel` of every fusion nn-fuse forms:
a view the tiler cannot index inside the group (a transpose, a strided slice, cuts on two
axes, a reshape that regroups dims next to a broadcast, ...) makes the group illegal, and
the op stays outside (eager, or a copy kernel of its own). The tiler sees the group as
outlining will build it: splat constants cloned in, dense constants read as inputs.

Cycles between groups are the grouping algorithm's business (`fusion_grouping`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cache

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from fuseopt.dialects import nn
from fuseopt.passes.tiling_analysis import (
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

POINTWISE, REDUCTION, MATMUL = "pointwise", "reduction", "matmul"
"""The values of a group's `kind` attribute."""


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
    """Whether outlining copies `op` into every fusion that reads it (a splat constant)
    instead of passing its value in (a dense constant is data: a buffer read by index)."""
    return isinstance(op, nn.ConstantOp) and op.splat_value is not None


def _static_tensor(t: object) -> bool:
    return isinstance(t, TensorType) and all(d >= 0 for d in t.get_shape())


def classify(op: Operation) -> OpClass:
    """The class of `op` for fusion (OPAQUE for anything nn-fuse must leave alone)."""
    types = [v.type for v in (*op.operands, *op.results)]
    if op.regions or not all(_static_tensor(t) for t in types):
        return OpClass.OPAQUE
    if isinstance(op, nn.ConstantOp):
        return OpClass.CONSTANT
    if isinstance(op, ELEMENTWISE_TYPES):
        return OpClass.ELEMENTWISE
    if isinstance(op, VIEW_TYPES):
        return OpClass.VIEW
    if isinstance(op, nn.ReductionOp):
        return OpClass.REDUCTION
    if isinstance(op, nn.MatmulOp):
        return OpClass.MATMUL
    return OpClass.OPAQUE


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
    return [r for op in ops for r in op.results if any(u.operation not in ops for u in r.uses)]


def _squeezed(shape: Iterable[int]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def check_group(
    ops: Collection[Operation],
    max_recompute: int,
    order: dict[Operation, int],
    partial: bool = False,
) -> GroupInfo | str:
    """Whether `ops` (top-level ops of one block) can be one kernel.

    Returns the group's GroupInfo, or a one-line reason why not. `order` gives each op's
    position in its block (used to pick a deterministic first output). With `partial`,
    a group the tiler finds `Incomplete` (axes not yet tied into one domain, a state
    greedy growth passes through) is accepted; a final group must pass without it.
    """
    classes = {op: classify(op) for op in ops}
    if any(c in (OpClass.OPAQUE, OpClass.CONSTANT) for c in classes.values()):
        return "opaque or constant ops are never grouped"
    matmuls = [op for op in ops if classes[op] is OpClass.MATMUL]
    reductions = [op for op in ops if classes[op] is OpClass.REDUCTION]
    outputs = group_outputs(ops)

    space = _analysis(ops, outputs, order)  # the tiler's verdict, computed once
    if matmuls:
        info = _check_matmul_group(ops, matmuls, reductions, outputs, max_recompute)
    elif reductions:
        info = _check_reduction_group(ops, reductions, outputs, max_recompute)
    else:
        info = _check_pointwise_group(ops, outputs, max_recompute, order, space)
    if isinstance(info, str):
        return info
    untileable = _tiling_obstacle(space(), partial)
    return info if untileable is None else untileable


def fusion_operands(members: Sequence[Operation]) -> tuple[list[Operation], list[SSAValue]]:
    """What a group (`members` in program order) reads from outside, as outlining wires
    it into the fusion: the splat constants it clones in, and every other value (the
    fusion's inputs), each in order of first use."""
    inside = set(members)
    constants: list[Operation] = []
    inputs: list[SSAValue] = []
    for op in members:
        for v in op.operands:
            owner = v.owner
            if isinstance(owner, Operation) and owner in inside:
                continue
            if isinstance(owner, Operation) and cloned_into_fusion(owner):
                if owner not in constants:
                    constants.append(owner)
            elif v not in inputs:
                inputs.append(v)
    return constants, inputs


def kernel_group(
    ops: Collection[Operation], outputs: list[SSAValue], order: dict[Operation, int]
) -> Group:
    """The tiler's view of a group, as `fusion_outlining` will build the fusion: splat
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


def _tiling_obstacle(space: IterationSpace | Untileable, partial: bool) -> str | None:
    """Why the tiler cannot make the group one kernel, or None when it can (or, with
    `partial`, when only ops still to join are missing)."""
    if isinstance(space, Incomplete):
        return None if partial else f"not one iteration space for the tiler ({space.reason})"
    if isinstance(space, Untileable):
        where = f"{space.op.name}: " if space.op is not None else ""
        return f"not one iteration space for the tiler ({where}{space.reason})"
    return None


def _finish(
    kind: str,
    domain: tuple[int, ...],
    axes: tuple[int, ...],
    ops: Collection[Operation],
    in_domain: dict[Operation, bool],
    outputs: list[SSAValue],
    max_recompute: int,
) -> GroupInfo | str:
    """Rules shared by every kind: side ops are input-only, internal and bounded."""
    side = frozenset(op for op in ops if not in_domain[op])
    for op in side:
        for v in op.operands:
            owner = v.owner
            if isinstance(owner, Operation) and owner in ops and owner not in side:
                return f"{op.name} is outside the {kind} domain but uses a value computed in it"
    for v in outputs:
        if v.owner in side:
            return f"an output of {v.owner.name} is outside the {kind} domain {list(domain)}"
    recompute = sum(1 for op in side if classify(op) is not OpClass.VIEW)
    if recompute > max_recompute:
        return f"{recompute} recomputed ops exceed max_recompute={max_recompute}"
    return GroupInfo(kind, domain, axes, side, recompute)


def _check_pointwise_group(
    ops: Collection[Operation],
    outputs: list[SSAValue],
    max_recompute: int,
    order: dict[Operation, int],
    space: Callable[[], IterationSpace | Untileable],
) -> GroupInfo | str:
    if outputs:
        sizes = {numel(shape_of(v)) for v in outputs}
        if len(sizes) > 1:
            return f"pointwise outputs have different element counts {sorted(sizes)}"
        domain = shape_of(outputs[0])
    else:  # dead code: the largest op is the domain
        last = max(ops, key=lambda op: (numel(shape_of(op.results[0])), order.get(op, 0)))
        domain = shape_of(last.results[0])
    n = numel(domain)
    in_domain = {op: numel(shape_of(op.results[0])) == n for op in ops}
    if not all(in_domain.values()):
        for op in _indexed_parts(ops, space()):
            in_domain[op] = True
    return _finish(POINTWISE, domain, (), ops, in_domain, outputs, max_recompute)


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


def _check_reduction_group(
    ops: Collection[Operation],
    reductions: list[Operation],
    outputs: list[SSAValue],
    max_recompute: int,
) -> GroupInfo | str:
    signatures = {
        (shape_of(r.operands[0]), tuple(r.axis_list))  # type: ignore[attr-defined]
        for r in reductions
    }
    if len(signatures) > 1:
        return f"reductions over different rows or axes: {sorted(signatures)}"
    ((source, axes),) = signatures
    kept = [i for i in range(len(source)) if i not in axes]
    flat_row = tuple(source[i] for i in kept)

    def row_shaped(shape: tuple[int, ...]) -> bool:
        if len(shape) == len(source):
            return all(shape[i] == source[i] for i in kept)
        return shape == flat_row

    in_domain: dict[Operation, bool] = {}
    for op in ops:
        in_domain[op] = row_shaped(shape_of(op.results[0]))

    def main(v: SSAValue) -> bool:
        return isinstance(v.owner, Operation) and v.owner in ops and in_domain[v.owner]

    for op in ops:
        if not in_domain[op] or not isinstance(op, VIEW_TYPES):
            continue
        if not any(main(v) for v in op.operands):
            continue  # a view of group inputs is plain indexing
        src, dst = shape_of(op.operands[0]), shape_of(op.results[0])
        ok = True
        if isinstance(op, nn.BroadcastOp):
            # from a per-row value (keepdim form) along the reduced axes only
            ok = len(src) == len(source) and all(src[i] == dst[i] for i in kept)
        elif isinstance(op, nn.SliceOp):
            ok = len(src) == len(source) and all(op.bounds[i] == (0, src[i], 1) for i in kept)
        elif isinstance(op, nn.ConcatOp):
            ok = (
                len(src) == len(source)
                and op.axis.value.data in axes
                and all(main(v) for v in op.operands)
            )
        elif isinstance(op, nn.ReshapeOp):
            ok = _squeezed(src) == _squeezed(dst)
        else:  # transpose moves elements between rows
            ok = False
        if not ok:
            return f"{op.name} {list(src)} -> {list(dst)} does not keep rows of {list(source)}"
    return _finish(REDUCTION, source, axes, ops, in_domain, outputs, max_recompute)


def _check_matmul_group(
    ops: Collection[Operation],
    matmuls: list[Operation],
    reductions: list[Operation],
    outputs: list[SSAValue],
    max_recompute: int,
) -> GroupInfo | str:
    if reductions:
        return "a matmul and a reduction do not share a kernel"
    first = matmuls[0]
    assert isinstance(first, nn.MatmulOp)
    for mm in matmuls:
        assert isinstance(mm, nn.MatmulOp)
        for v in mm.operands:
            if isinstance(v.owner, Operation) and v.owner in ops:
                return "a matmul operand computed in the group (matmul prologue or matmul chain)"
        same = (
            mm.lhs == first.lhs
            and mm.result.type == first.result.type
            and (mm.transpose_a is None) == (first.transpose_a is None)
        )
        if not same:
            return "matmuls in one group must share their A operand and result type"
    domain = shape_of(first.result)
    in_domain = {op: shape_of(op.results[0]) == domain for op in ops}
    for op in ops:
        moves = isinstance(op, nn.TransposeOp | nn.SliceOp | nn.ConcatOp)
        if moves and any(
            isinstance(v.owner, Operation) and v.owner in ops and in_domain[v.owner]
            for v in op.operands
        ):
            return f"{op.name} would move accumulator elements"
    return _finish(MATMUL, domain, (), ops, in_domain, outputs, max_recompute)
