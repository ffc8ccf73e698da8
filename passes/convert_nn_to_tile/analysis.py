"""Index-space analysis of a fusion group: which iteration dims each value spans.

convert-nn-to-tile tiles a group over one *iteration space*. This module finds it:

1. every non-unit axis of every value in the group is a node; ops tie nodes together
   (elementwise ops tie axis i of operands and result, `nn.broadcast` ties the axes it
   keeps, a squeeze-only `nn.reshape` ties its non-unit axes in order, a reduction ties
   its kept axes, `nn.matmul` ties batch/M/N to its result and K of both operands);
   the classes of tied axes are the iteration axes (size-1 axes are never iterated);
2. the *domain* is a value spanning every non-contraction class (the matmul result;
   several matmuls that share their A operand and shapes form a dual GEMM); its axis
   order orders the classes, and every value must span its classes in that order (a
   transposed access is not tileable here);
3. adjacent classes that every value spans together (or not at all) are merged into
   one iteration dim, so contiguous data becomes one long dim (reduced classes merge
   into the one reduction dim; matmul keeps batch, M and N apart).

Slices and concats (the rotate-half of rotary embeddings) tie axes of *different*
sizes: a unit-step `nn.slice` ties the sliced axis of its operand to its result's, an
`nn.concat` ties each operand's axis to the result's. Such a class is *split*: its
part size `g` is the gcd of its axes' sizes and of the slice starts and concat
boundaries on it, the iteration dim has size `g`, and a value spanning the class with
an axis of size `P * g` holds `P` parts (`IterationSpace.parts`). The emitter unrolls
the parts: part `p` of a buffer is the box at offset `p * g` along that dim, a slice
picks parts, a concat lists them. One split class per group, at most MAX_PARTS parts
per value, and never in a matmul; the split dim is never merged with a neighbour.

An `nn.take` ties its index's axes to its result's, like an elementwise op; the input
it gathers from is read by address (`tile.gather`), so it must be a group input, and an
input read only that way spans no iteration dim (`IterationSpace.gathered`).

A pure pointwise group whose values all have the same element count is *flat*: one
dim, every value spans it, reshapes are free. Anything else that does not fit raises
`Untileable`. nn-fuse asks `analyze` before every merge (`legality`), so its
fusions always fit; for a hand-written fusion that does not, convert-nn-to-tile falls
back to smaller groups (`convert_nn_to_tile.tileable_subgroups`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from fuseopt.dialects import nn, tile

ELEMENTWISE = nn.ELEMENTWISE_OPS
"""nn ops applied element by element (operands and result of one shape)."""

POINTWISE, REDUCTION, MATMUL = "pointwise", "reduction", "matmul"
"""Schedule kinds."""

MAX_PARTS = 8
"""Most parts a value may hold along a split dim (each part is unrolled in the kernel)."""


class Untileable(Exception):
    """A group (or op) this tiler cannot map onto one iteration space."""

    def __init__(self, op: Operation | None, reason: str):
        super().__init__(reason)
        self.op = op
        self.reason = reason


class Incomplete(Untileable):
    """The group's axes do not meet in one domain: no value spans every iteration axis
    (`rsqrt(mean(x))` broadcast to a row before the multiply that ties the broadcast
    axis to the row's). Ops joining the group later may complete it; nn-fuse's greedy
    growth passes through such states."""


@dataclass
class Group:
    """Ops that become one kernel: `inputs` come from outside, `outputs` go outside."""

    ops: list[Operation]
    inputs: list[SSAValue]
    outputs: list[SSAValue]


@dataclass
class IterationSpace:
    """The result of `analyze`: iteration dims and each value's span over them."""

    kind: str
    sizes: list[int]
    spans: dict[SSAValue, tuple[int, ...]] = field(default_factory=dict)
    reduce_dim: int | None = None
    matmul: nn.MatmulOp | None = None
    matmuls: list[nn.MatmulOp] = field(default_factory=list)
    """Every matmul of the group (several share A: a dual GEMM); `matmul` is the first."""
    m_dim: int | None = None
    n_dim: int | None = None
    k_size: int = 0
    split_dim: int | None = None
    """The iteration dim cut by slices/concats (its size is the part size), if any."""
    parts: dict[SSAValue, int] = field(default_factory=dict)
    """Parts each value spanning `split_dim` holds (1 for the others)."""
    layouts: dict[SSAValue, tuple[int, ...]] = field(default_factory=dict)
    """The dims a transposed value spans in its own (memory) axis order, for values
    whose order differs from the iteration order (pointwise kernels only)."""
    tiled: tuple[int, ...] | None = None
    """The dims tiles cover when transposes decide it (see `_tiling_for_transposes`);
    None: the schedule's default (`heuristics.tiled_dims`)."""
    gathered: frozenset[SSAValue] = frozenset()
    """Inputs read only by `nn.take` (by address): they span no iteration dim, and the
    kernel gets them whole, in their own shape."""
    views: dict[SSAValue, tuple[tuple[int, ...], int]] = field(default_factory=dict)
    """Inputs read in place from a strided view of another buffer (a slice): (strides,
    offset) in elements, one stride per dim of `layout(v)` (see `analyze`)."""

    def span(self, v: SSAValue) -> tuple[int, ...]:
        """The iteration dims `v` spans, in order."""
        return self.spans[v]

    def layout(self, v: SSAValue) -> tuple[int, ...]:
        """The dims `v` spans in the order of its buffer's axes (its span, unless the
        value is transposed against the iteration order)."""
        return self.layouts.get(v, self.spans[v])

    def parts_of(self, v: SSAValue) -> int:
        """How many parts of the split dim `v` holds (1 when it holds one or none)."""
        return self.parts.get(v, 1)

    def extent(self, v: SSAValue, d: int) -> int:
        """The size of `v`'s buffer along iteration dim `d` (all its parts)."""
        return self.sizes[d] * (self.parts_of(v) if d == self.split_dim else 1)


def shape(v: SSAValue) -> tuple[int, ...]:
    """The static shape of a tensor value."""
    t = v.type
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


Node = tuple[SSAValue, int]
"""An axis of a value: (value, axis index)."""


@dataclass(frozen=True)
class AxisClass:
    """What the tiler needs to know of one class of tied axes."""

    size: int
    """Its largest axis (every axis of a class that is not cut into parts has this size)."""
    gcd: int
    """The gcd of its axes' sizes and of the slice starts and concat boundaries on them."""
    cut: bool
    """A slice or concat cuts an axis of the class."""
    reduced: bool
    """A reduction reduces an axis of the class."""
    contraction: bool
    """The class is a matmul's K."""

    def join(self, other: AxisClass) -> AxisClass:
        """The class of the axes of both."""
        return AxisClass(
            max(self.size, other.size),
            math.gcd(self.gcd, other.gcd),
            self.cut or other.cut,
            self.reduced or other.reduced,
            self.contraction or other.contraction,
        )


class _Axes:
    """Union-find over (value, axis) nodes."""

    def __init__(self) -> None:
        self.parent: dict[Node, Node] = {}
        self.cuts: dict[Node, set[int]] = {}
        """Slice starts and concat boundaries, per node of the axis they cut."""
        self.shapes: dict[SSAValue, tuple[int, ...]] = {}

    def shape(self, v: SSAValue) -> tuple[int, ...]:
        """`shape(v)`, read once per value (xDSL rebuilds it on every call)."""
        if v not in self.shapes:
            self.shapes[v] = shape(v)
        return self.shapes[v]

    def add(self, v: SSAValue) -> None:
        for i, n in enumerate(self.shape(v)):
            if n != 1:
                self.parent.setdefault((v, i), (v, i))

    def find(self, node: Node) -> Node:
        while self.parent[node] != node:
            self.parent[node] = self.parent[self.parent[node]]
            node = self.parent[node]
        return node

    def tie(
        self, a: SSAValue, i: int, b: SSAValue, j: int, op: Operation, cut: int | None = None
    ) -> None:
        """Put axis i of `a` and axis j of `b` in one class. Sizes must match, unless
        `cut` (a slice start or concat boundary on `b`'s axis) says `a`'s axis is a
        piece of `b`'s."""
        m, n = self.shape(a)[i], self.shape(b)[j]
        if m != n and cut is None:
            raise Untileable(op, f"axes of sizes {m} and {n} meet")
        if m == 1 and n == 1:
            return
        if m == 1 or n == 1:
            raise Untileable(op, "a slice or concat piece of one element")
        if cut is not None:
            self.cuts.setdefault((b, j), set()).add(cut)
        self.parent[self.find((a, i))] = self.find((b, j))

    def classes(self, reduced: set[Node], contraction: set[Node]) -> dict[Node, AxisClass]:
        """Each class (by its root node) with what `solve_classes` needs of it."""
        out: dict[Node, AxisClass] = {}
        for node in self.parent:
            size = self.shape(node[0])[node[1]]
            c = AxisClass(
                size,
                math.gcd(size, *self.cuts.get(node, ())),
                node in self.cuts,
                node in reduced,
                node in contraction,
            )
            root = self.find(node)
            out[root] = out[root].join(c) if root in out else c
        return out


FLAT_OPS = (*ELEMENTWISE, nn.ConstantOp, nn.ReshapeOp, nn.BroadcastOp)
"""The ops of a flat group (see `analyze`): none of them moves elements between rows."""


def _is_flat(group: Group) -> bool:
    values = [*group.inputs, *(r for op in group.ops for r in op.results)]
    sizes = {math.prod(shape(v)) for v in values}
    return len(sizes) == 1 and all(isinstance(op, FLAT_OPS) for op in group.ops)


@dataclass
class ClassSpace:
    """The iteration space decided on axis classes (`solve_classes`), before it is
    spelled out value by value (`analyze`)."""

    kind: str
    sizes: list[int]
    dim_of: dict[Node, int]
    """The iteration dim of each class the domain spans (K has none)."""
    split: Node | None
    """The class cut into parts, if any."""
    part: int
    """The part size of `split`."""
    reduce_dim: int | None
    layouts: dict[tuple[Node, ...], tuple[int, ...]]
    """The dims a value with these classes spans in its own axis order, for values
    transposed against the iteration order."""
    tiled: tuple[int, ...] | None


class AmbiguousDomain(Exception):
    """`solve_classes` was asked to choose the domain alone, but values with different
    axis orders span the whole space (a transpose): the caller must give candidates."""


def solve_classes(
    classes: dict[Node, AxisClass],
    signatures: dict[tuple[Node, ...], SSAValue | None],
    candidates: Iterable[tuple[tuple[Node, ...], SSAValue | None]] | None,
    matmul: Operation | None,
    unmergeable: frozenset[tuple[Node, Node]] = frozenset(),
) -> ClassSpace:
    """Steps 2 and 3 of the module docstring on classes alone.

    `signatures`: the classes of each value's non-unit axes, in axis order, each with
    the first value that has them (named in errors), in order of first appearance.
    `candidates`: (signature, value) pairs in the order values are tried as the domain;
    None: the one signature that spans every class (`AmbiguousDomain` if several do).
    `matmul`: the group's first matmul, if any. `unmergeable`: pairs of classes never
    merged into one dim (axes not contiguous in a strided view). Raises `Untileable`
    (`Incomplete` when no value spans the whole space)."""
    split, part = _split_class(classes)
    if split is not None and matmul is not None:
        raise Untileable(matmul, "slices or concats in a matmul kernel")
    red_classes = {c for c, a in classes.items() if a.reduced}
    k_classes = {c for c, a in classes.items() if a.contraction}
    wanted = {c for c in classes if c not in k_classes}
    if candidates is None:
        spanning = {s for s in signatures if set(s) >= wanted}
        if len(spanning) > 1:
            raise AmbiguousDomain()
        candidates = [(s, signatures[s]) for s in spanning]
    found = next(((s, v) for s, v in candidates if set(s) >= wanted), None)
    if found is None:
        raise Incomplete(None, "no value spans the whole iteration space")
    domain, value = found
    order = {c: i for i, c in enumerate(domain)}
    if len(order) != len(domain):
        raise Untileable(_owner(value), "repeated axis")
    transposed = []
    for sig, value in signatures.items():
        pos = [order[c] for c in sig if c not in k_classes]
        if len(set(pos)) != len(pos):
            raise Untileable(_owner(value), "a value spans one iteration axis twice")
        if pos != sorted(pos):
            if matmul is not None or red_classes:
                why = "a transposed value in a reduction or matmul kernel"
                raise Untileable(_owner(value), why)
            transposed.append(sig)
    members = [{s for s in signatures if c in s} for c in domain]
    groups: list[list[int]] = []
    for i, c in enumerate(domain):
        merge = (
            i > 0
            and members[i] == members[i - 1]
            and all(_follows(list(s), domain[i - 1], c) for s in transposed)
            and split not in (c, domain[i - 1])
            and (domain[i - 1], c) not in unmergeable
            and (c in red_classes) == (domain[i - 1] in red_classes)
            and (matmul is None or i < len(domain) - 2)
        )
        if merge:
            groups[-1].append(i)
        else:
            groups.append([i])
    red_groups = [g for g in groups if domain[g[0]] in red_classes]
    if len(red_groups) > 1 or any(
        (domain[i] in red_classes) != (domain[g[0]] in red_classes) for g in groups for i in g
    ):
        raise Untileable(None, "reductions over axes that are not one contiguous block")
    sizes = [
        part if domain[g[0]] == split else math.prod(classes[domain[i]].size for i in g)
        for g in groups
    ]
    dim_of = {domain[i]: d for d, g in enumerate(groups) for i in g}
    kind = MATMUL if matmul is not None else REDUCTION if red_groups else POINTWISE
    layouts: dict[tuple[Node, ...], tuple[int, ...]] = {}
    for sig in transposed:
        layout = list(dict.fromkeys(dim_of[c] for c in sig if c in dim_of))
        if layout != sorted(layout):
            layouts[sig] = tuple(layout)
    tiled = None
    if layouts:
        first = signatures[next(iter(layouts))]
        tiled = _tiling_for_transposes(len(sizes), list(layouts.values()), _owner(first))
    reduce_dim = dim_of[domain[red_groups[0][0]]] if red_groups else None
    return ClassSpace(kind, sizes, dim_of, split, part, reduce_dim, layouts, tiled)


def _owner(v: SSAValue | None) -> Operation | None:
    return v.owner if v is not None and isinstance(v.owner, Operation) else None


def gathered_inputs(group: Group) -> frozenset[SSAValue]:
    """The inputs of `group` that only `nn.take`s read (as the input they gather from);
    Untileable when a take gathers from a value computed in the group (a kernel reads
    by address only from memory)."""
    inputs = set(group.inputs)
    takes = [op for op in group.ops if isinstance(op, nn.TakeOp)]
    for op in takes:
        if op.input not in inputs:
            raise Untileable(op, "nn.take gathers from a value computed in the kernel")
    ops = set(group.ops)
    return frozenset(
        op.input
        for op in takes
        if all(
            isinstance(u.operation, nn.TakeOp) and u.index == 0
            for u in op.input.uses
            if u.operation in ops
        )
    )


Strides = tuple[tuple[int, ...], int]
"""(strides, offset) in elements of an input read in place from a strided view."""


def analyze(group: Group, strided: Mapping[SSAValue, Strides] | None = None) -> IterationSpace:
    """The iteration space of `group`, or `Untileable`.

    `strided`: inputs the kernel reads in place from a strided view of another buffer
    (an unfused slice), with their strides (per axis) and offset. Such an input must be
    read as a tile (not gathered from, not a matmul operand), and two of its axes merge
    into one iteration dim only where they are contiguous in the view; the space lists
    each one's strides along its dims (`IterationSpace.views`)."""
    strided = dict(strided or {})
    gathered = gathered_inputs(group)
    ops = set(group.ops)
    for v in strided:
        for u in v.uses:
            by_address = isinstance(u.operation, nn.TakeOp) and u.index == 0
            if u.operation in ops and (by_address or isinstance(u.operation, nn.MatmulOp)):
                raise Untileable(u.operation, "a strided view is read by address or by a matmul")
    for op in group.ops:
        for r in op.results:
            if not isinstance(r.type, TensorType) or any(d < 0 for d in shape(r)):
                raise Untileable(op, "results must be statically shaped tensors")
        if isinstance(op, nn.ConstantOp) and op.splat_value is None and op.arange is None:
            raise Untileable(op, "dense constants other than index vectors are not tiled")
    if _is_flat(group) and all(_contiguous(shape(v), st) for v, (st, _) in strided.items()):
        n = math.prod(shape(group.outputs[0])) if group.outputs else 1
        values = [*group.inputs, *(r for op in group.ops for r in op.results)]
        flat = IterationSpace(POINTWISE, [n], {v: (0,) for v in values})
        flat.views = {v: ((1,), offset) for v, (_, offset) in strided.items()}
        return flat
    axes = _Axes()
    inputs = [v for v in group.inputs if v not in gathered]
    for v in inputs:
        axes.add(v)
    reduced: set[Node] = set()
    contraction: set[Node] = set()
    matmuls: list[nn.MatmulOp] = []
    for op in group.ops:
        for r in op.results:
            axes.add(r)
        _tie(op, axes, reduced, contraction, matmuls)
    _tie_sibling_reductions(group.ops, axes)
    check_matmuls(matmuls, bool(reduced))
    values = [*inputs, *(r for op in group.ops for r in op.results)]
    classes_of = {
        v: tuple(axes.find((v, i)) for i, n in enumerate(shape(v)) if n != 1) for v in values
    }
    signatures: dict[tuple[Node, ...], SSAValue | None] = {}
    for v in values:
        signatures.setdefault(classes_of[v], v)
    # the outputs first: with a transpose inside, the iteration order is the order the
    # results are written in (coalesced stores); without one, every value agrees
    candidates = [matmuls[0].result] if matmuls else [*group.outputs, *values]
    solved = solve_classes(
        axes.classes(reduced, contraction),
        signatures,
        ((classes_of[v], v) for v in candidates),
        matmuls[0] if matmuls else None,
        _unmergeable(strided, axes),
    )
    space = IterationSpace(solved.kind, solved.sizes)
    for v in values:
        sig = classes_of[v]
        space.spans[v] = tuple(sorted({solved.dim_of[c] for c in sig if c in solved.dim_of}))
        if solved.split is not None and solved.split in sig:
            space.parts[v] = shape(v)[_axis_of(v, solved.split, sig)] // solved.part
        if sig in solved.layouts:
            space.layouts[v] = solved.layouts[sig]
    space.tiled = solved.tiled
    space.gathered = gathered
    for v, (st, offset) in strided.items():
        space.views[v] = (_view_strides(v, st, axes, solved.dim_of), offset)
    space.spans.update({v: () for v in gathered})
    if solved.split is not None:
        space.split_dim = solved.dim_of[solved.split]
    space.reduce_dim = solved.reduce_dim
    if matmuls:
        mm = matmuls[0]
        space.matmul = mm
        space.matmuls = matmuls
        space.m_dim, space.n_dim = len(solved.sizes) - 2, len(solved.sizes) - 1
        a = shape(mm.lhs)
        space.k_size = a[-2] if mm.transpose_a is not None else a[-1]
        check_matmul_operands(matmuls, lambda v: v in group.inputs)
    return space


def _contiguous(dims: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a view of shape `dims` with `strides` is one contiguous run (row-major
    strides on every axis that is not of size 1)."""
    row_major = tile.row_major_strides(dims)
    return all(s == r for n, s, r in zip(dims, strides, row_major, strict=True) if n != 1)


def _unmergeable(strided: Mapping[SSAValue, Strides], axes: _Axes) -> frozenset[tuple[Node, Node]]:
    """Pairs of axis classes that must stay separate iteration dims: adjacent non-unit
    axes of a strided view that are not contiguous in it (both orders)."""
    pairs: set[tuple[Node, Node]] = set()
    for v, (st, _) in strided.items():
        dims = shape(v)
        kept = [i for i, n in enumerate(dims) if n != 1]
        for a, b in itertools.pairwise(kept):
            if st[a] != st[b] * dims[b]:
                ca, cb = axes.find((v, a)), axes.find((v, b))
                pairs |= {(ca, cb), (cb, ca)}
    return frozenset(pairs)


def _view_strides(
    v: SSAValue, st: Sequence[int], axes: _Axes, dim_of: Mapping[Node, int]
) -> tuple[int, ...]:
    """The strides of strided input `v` along the iteration dims it spans, in its axis
    order (`IterationSpace.layout`): a dim merging several of its axes steps by the
    innermost one's stride (they are contiguous: `_unmergeable`)."""
    by_dim: dict[int, int] = {}
    for i, n in enumerate(shape(v)):
        if n != 1:
            by_dim[dim_of[axes.find((v, i))]] = st[i]  # the innermost axis wins
    return tuple(by_dim.values()) or (1,)


def check_matmuls(matmuls: Sequence[nn.MatmulOp], reduced: bool) -> None:
    """Untileable unless the matmuls of a group (in program order) form one GEMM or a
    dual GEMM, without a reduction beside them (`reduced`: an axis is reduced)."""
    for other in matmuls[1:]:
        if not _shares_lhs(matmuls[0], other):
            raise Untileable(other, "several matmuls in one kernel must share A and shapes")
    if matmuls and reduced:
        raise Untileable(matmuls[0], "a matmul and a reduction in one kernel")


def check_matmul_operands(
    matmuls: Sequence[nn.MatmulOp], is_input: Callable[[SSAValue], bool]
) -> None:
    """Untileable for a matrix-vector product (tiled as a reduction later) or a matmul
    operand that is not a kernel input (`is_input`)."""
    mm = matmuls[0]
    if shape(mm.result)[-1] == 1 or shape(mm.result)[-2] == 1:
        raise Untileable(mm, "matrix-vector products are tiled as reductions later")
    for m in matmuls:
        if not is_input(m.lhs) or not is_input(m.rhs):
            raise Untileable(m, "matmul operands must come from outside the kernel")


class AxisSummary:
    """What `analyze` would find about a group's axes, kept up to date as nn-fuse merges
    groups, so that a union of two groups is decided without tying their ops again.

    It holds the element counts of the group's values (every operand and result of its
    ops; splat constants are values like any other) and whether its ops may form a flat
    group; and, once a question needs them (a group that is not flat), the union-find
    over the values' non-unit axes, each class's `AxisClass`, the distinct class
    signatures of the values, and whether an op could not be tied at all (a regrouping
    reshape, a strided slice: the group is Untileable unless flat). Ops are tied only
    then (`pending` until), so an elementwise chain never ties any."""

    def __init__(self, op: Operation | None = None):
        """The summary of the group made of `op` alone (of no op: empty)."""
        values = [*op.operands, *op.results] if op is not None else []
        self.numels = {math.prod(shape(v)) for v in values}
        self.flat_ops = op is None or isinstance(op, FLAT_OPS)
        self.pending: list[Operation] = [op] if op is not None else []
        """Ops not tied yet."""
        self.parent: dict[Node, Node] = {}
        self.classes: dict[Node, AxisClass] = {}
        self.signatures: set[tuple[Node, ...]] = set()
        self.broken = False

    def find(self, node: Node) -> Node:
        """The root (class) of `node`."""
        parent = self.parent
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def union_space(
        self,
        other: AxisSummary,
        matmuls: Sequence[nn.MatmulOp],
        is_input: Callable[[SSAValue], bool],
    ) -> ClassSpace | Untileable:
        """`analyze`'s verdict on the union of both groups (without changing what either
        summarizes): its class-level space (a flat group: one dim, nothing split), or
        the Untileable (possibly `Incomplete`) it would raise. `matmuls`: the union's,
        in program order; `is_input`: whether a value is an input of the union's
        kernel. Raises `AmbiguousDomain` where only the values' order decides (see
        `solve_classes`)."""
        numels = self.numels | other.numels
        if len(numels) == 1 and self.flat_ops and other.flat_ops:
            return ClassSpace(POINTWISE, [next(iter(numels))], {}, None, 0, None, {}, None)
        self._settle()
        other._settle()
        if self.broken or other.broken:
            return Untileable(None, "an op of the group cannot be tied to the others")
        small, large = sorted((self, other), key=lambda s: len(s.parent))
        glue: dict[Node, Node] = {}

        def root(c: Node) -> Node:
            while glue.get(c, c) != c:
                c = glue[c]
            return c

        for node in small.parent:
            if node in large.parent:
                a, b = root(large.find(node)), root(small.find(node))
                if a != b:
                    glue[a] = b
        classes: dict[Node, AxisClass] = {}
        for summary in (large, small):
            for c, info in summary.classes.items():
                r = root(c)
                classes[r] = classes[r].join(info) if r in classes else info
        signatures = {
            tuple(root(c) for c in sig): None for s in (large, small) for sig in s.signatures
        }

        def signature(v: SSAValue) -> tuple[Node, ...]:
            nodes = [(v, i) for i, n in enumerate(shape(v)) if n != 1]
            return tuple(root(large.find(n) if n in large.parent else small.find(n)) for n in nodes)

        # a matmul kernel's domain is its first matmul's result, spanning all or not
        candidates = [(signature(matmuls[0].result), None)] if matmuls else None
        try:
            check_matmuls(matmuls, any(c.reduced for c in classes.values()))
            space = solve_classes(classes, signatures, candidates, matmuls[0] if matmuls else None)
            if matmuls:
                check_matmul_operands(matmuls, is_input)
        except Untileable as e:
            return e
        return space

    @staticmethod
    def merge(a: AxisSummary, b: AxisSummary) -> AxisSummary:
        """The summary of the union of both groups: the one with more tied axes,
        updated in place (the other one is spent)."""
        small, large = sorted((a, b), key=lambda s: len(s.parent))
        large._absorb(small)
        if len(large.pending) < len(small.pending):
            large.pending, small.pending = small.pending, large.pending
        large.pending.extend(small.pending)
        large.numels |= small.numels
        large.flat_ops = large.flat_ops and small.flat_ops
        return large

    def _settle(self) -> None:
        """Tie the pending ops."""
        pending, self.pending = self.pending, []
        for op in pending:
            self._absorb(AxisSummary._tied(op))

    @staticmethod
    def _tied(op: Operation) -> AxisSummary:
        """The summary of `op` alone, tied."""
        summary = AxisSummary(op)
        summary.pending = []
        axes = _Axes()
        values = [*_tied_operands(op), *op.results]
        for v in values:
            axes.add(v)
        reduced: set[Node] = set()
        contraction: set[Node] = set()
        try:
            _tie(op, axes, reduced, contraction, [])
        except Untileable:
            summary.broken = True
        summary.parent = axes.parent
        summary.classes = axes.classes(reduced, contraction)
        summary.signatures = {
            tuple(summary.find((v, i)) for i, n in enumerate(axes.shape(v)) if n != 1)
            for v in values
        }
        return summary

    def _absorb(self, other: AxisSummary) -> None:
        """Add the tied axes of `other` (another group's) to this summary's."""
        for node in other.parent:
            self.parent.setdefault(node, node)
        for node in other.parent:
            x, y = self.find(node), self.find(other.find(node))
            if x != y:
                self.parent[x] = y
        classes: dict[Node, AxisClass] = {}
        for summary in (self, other):
            for c, info in summary.classes.items():
                r = self.find(c)
                classes[r] = classes[r].join(info) if r in classes else info
        self.classes = classes
        self.signatures = {
            tuple(self.find(c) for c in sig) for s in (self, other) for sig in s.signatures
        }
        self.broken = self.broken or other.broken


MAX_TILED_DIMS = 4
"""Most iteration dims one pointwise tile covers when transposes choose them."""


def _tiling_for_transposes(
    n: int, layouts: list[tuple[int, ...]], where: Operation | None
) -> tuple[int, ...]:
    """The dims tiles cover in a pointwise kernel of `n` iteration dims whose transposed
    values span `layouts`: the longest suffix of the iteration dims (up to
    MAX_TILED_DIMS) whose dims every transposed value holds as its own last axes, since
    a load or store covers a buffer's trailing axes. Attention's head transpose
    [b, s, h, d] -> [b, h, s, d] tiles (h, s, d), a 2-D transpose both dims;
    Untileable (at `where`) when not even the innermost dim works for every value (a
    transpose that moves a tiled axis outward)."""
    best: tuple[int, ...] = ()
    for k in range(1, min(n, MAX_TILED_DIMS) + 1):
        suffix = set(range(n - k, n))
        if all(
            set(layout[len(layout) - len(suffix & set(layout)) :]) == suffix & set(layout)
            for layout in layouts
        ):
            best = tuple(sorted(suffix))
    if not best:
        raise Untileable(where, "a transpose moves a tiled axis away from the innermost axes")
    return best


def _follows(classes: list, first: object, second: object) -> bool:
    """Whether `second` comes right after `first` in a value's axis classes, or the
    value spans neither (it spans both or neither: members agree)."""
    if first not in classes:
        return True
    i = classes.index(first)
    return i + 1 < len(classes) and classes[i + 1] == second


def _split_class(classes: dict[Node, AxisClass]) -> tuple[Node | None, int]:
    """The class that slices/concats cut into parts and its part size (None, 0 when
    every cut falls on whole axes)."""
    cut = [c for c, a in classes.items() if a.cut]
    if not cut:
        return None, 0
    if len(cut) > 1:
        raise Untileable(None, "slices or concats cut more than one iteration axis")
    (c,) = cut
    size, part = classes[c].size, classes[c].gcd
    if part == size:
        return None, 0
    if size // part > MAX_PARTS:
        raise Untileable(None, f"slices or concats cut an axis into {size // part} parts")
    return c, part


def _shares_lhs(a: nn.MatmulOp, b: nn.MatmulOp) -> bool:
    """Can `b` run in `a`'s K loop (a dual GEMM: one A tile, one accumulator each)?"""
    return (
        a.lhs is b.lhs
        and (a.transpose_a is None) == (b.transpose_a is None)
        and (a.transpose_b is None) == (b.transpose_b is None)
        and shape(a.rhs) == shape(b.rhs)
        and shape(a.result) == shape(b.result)
    )


def _tied_operands(op: Operation) -> list[SSAValue]:
    """The operands whose axes `op` ties (all but the input an `nn.take` gathers from)."""
    return [op.index] if isinstance(op, nn.TakeOp) else list(op.operands)


def _axis_of(v: SSAValue, cls: Node, signature: tuple[Node, ...]) -> int:
    axes = [i for i, n in enumerate(shape(v)) if n != 1]
    return axes[signature.index(cls)]


def _tie(
    op: Operation,
    axes: _Axes,
    reduced: set[tuple[SSAValue, int]],
    contraction: set[tuple[SSAValue, int]],
    matmuls: list[nn.MatmulOp],
) -> None:
    """Record how `op` ties the axes of its operands and results."""
    if isinstance(op, ELEMENTWISE):
        r = op.results[0]
        for x in op.operands:
            for i in range(len(shape(r))):
                axes.tie(x, i, r, i, op)
    elif isinstance(op, nn.ConstantOp):
        pass
    elif isinstance(op, nn.TakeOp):  # the input is read by address: only the index ties
        for i in range(len(shape(op.result))):
            axes.tie(op.index, i, op.result, i, op)
    elif isinstance(op, nn.BroadcastOp):
        x, r = op.operands[0], op.results[0]
        lead = len(shape(r)) - len(shape(x))
        for i, n in enumerate(shape(x)):
            if n != 1:
                axes.tie(x, i, r, i + lead, op)
    elif isinstance(op, nn.ReshapeOp):
        x, r = op.operands[0], op.results[0]
        xs = [i for i, n in enumerate(shape(x)) if n != 1]
        rs = [i for i, n in enumerate(shape(r)) if n != 1]
        if [shape(x)[i] for i in xs] != [shape(r)[i] for i in rs]:
            raise Untileable(op, "a reshape that regroups dims is not tiled in this group")
        for i, j in zip(xs, rs, strict=True):
            axes.tie(x, i, r, j, op)
    elif isinstance(op, nn.ReductionOp):
        x, r = op.operands[0], op.results[0]
        kept = [i for i in range(len(shape(x))) if i not in op.axis_list]
        keep = op.keepdim is not None
        for j, i in enumerate(kept):
            axes.tie(x, i, r, i if keep else j, op)
        reduced.update((x, i) for i in op.axis_list if shape(x)[i] != 1)
    elif isinstance(op, nn.MatmulOp):
        _tie_matmul(op, axes, contraction)
        matmuls.append(op)
    elif isinstance(op, nn.TransposeOp):
        x, r = op.operands[0], op.results[0]
        for i, p in enumerate(op.perm):
            axes.tie(x, p, r, i, op)
    elif isinstance(op, nn.SliceOp):
        x, r = op.operands[0], op.results[0]
        for i, (lo, hi, step) in enumerate(op.bounds):
            if (lo, hi, step) == (0, shape(x)[i], 1):
                axes.tie(x, i, r, i, op)
            elif step != 1:
                raise Untileable(op, "a strided slice is not tiled in a fused kernel")
            else:
                axes.tie(r, i, x, i, op, cut=lo)
    elif isinstance(op, nn.ConcatOp):
        r = op.results[0]
        axis = nn.normalized_axis(op.axis.value.data, len(shape(r)))
        start = 0
        for x in op.operands:
            for i in range(len(shape(r))):
                axes.tie(x, i, r, i, op, cut=start if i == axis else None)
            start += shape(x)[axis]
    else:
        raise Untileable(op, f"{op.name} is not tiled in a fused kernel")


def _tie_sibling_reductions(ops: Sequence[Operation], axes: _Axes) -> None:
    """Tie the reduced axes of reductions whose kept axes are already in the same classes
    (in order) and whose reduced axes have the same sizes: each reduces its own input
    over the same rows, so both can walk their reduced axes with one loop index (a
    horizontal fusion). Nothing else ties them when their inputs come from outside the
    group: the second stage of two split reductions (cross-entropy's summed losses and
    weights, the chunk means and M2s of a split variance) would be two kernels."""
    reductions = [op for op in ops if isinstance(op, nn.ReductionOp)]
    changed = len(reductions) > 1
    while changed:  # a tie can make the kept classes of others equal
        changed = False
        first: dict[tuple[tuple[Node, ...], tuple[int, ...]], nn.ReductionOp] = {}
        for op in reductions:
            x = op.operands[0]
            dims = axes.shape(x)
            red = [i for i in range(len(dims)) if i in op.axis_list and dims[i] != 1]
            kept = tuple(
                axes.find((x, i))
                for i in range(len(dims))
                if i not in op.axis_list and dims[i] != 1
            )
            key = (kept, tuple(dims[i] for i in red))
            other = first.setdefault(key, op)
            if other is op:
                continue
            y = other.operands[0]
            y_dims = axes.shape(y)
            y_red = [i for i in range(len(y_dims)) if i in other.axis_list and y_dims[i] != 1]
            for i, j in zip(red, y_red, strict=True):
                if axes.find((x, i)) != axes.find((y, j)):
                    axes.tie(x, i, y, j, op)
                    changed = True


def _tie_matmul(op: nn.MatmulOp, axes: _Axes, contraction: set[tuple[SSAValue, int]]) -> None:
    a, b, r = op.lhs, op.rhs, op.result
    ra, rb, rr = len(shape(a)), len(shape(b)), len(shape(r))
    ta, tb = op.transpose_a is not None, op.transpose_b is not None
    a_m, a_k = (ra - 1, ra - 2) if ta else (ra - 2, ra - 1)
    b_k, b_n = (rb - 1, rb - 2) if tb else (rb - 2, rb - 1)
    for i in range(ra - 2):
        axes.tie(a, i, r, i, op)
    if rb > 2:
        for i in range(rb - 2):
            axes.tie(b, i, r, i, op)
    axes.tie(a, a_m, r, rr - 2, op)
    axes.tie(b, b_n, r, rr - 1, op)
    axes.tie(a, a_k, b, b_k, op)
    contraction.update({(a, a_k), (b, b_k)} if shape(a)[a_k] != 1 else set())


def check_shapes(values: Sequence[SSAValue]) -> None:
    """Raise Untileable for a value without a static tensor shape."""
    for v in values:
        if not isinstance(v.type, TensorType) or any(d < 0 for d in shape(v)):
            raise Untileable(None, f"a value of type {v.type} is not a static tensor")
