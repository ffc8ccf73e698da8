"""Shapes for splitting reductions (nn-split-reductions): how a row splits into chunks
(`plan_split`), how the long reduced axes of a column reduction do (`plan_column_split`),
and a value seen in the split shape with its elementwise prologue rebuilt there
(`reshaped`), so that nn-fuse fuses the prologue into the chunk reductions and the
reshapes are views of the inputs."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerType, TensorType, i64
from xdsl.ir import Operation, SSAValue

from fuseopt.dialects import nn
from fuseopt.passes.convert_nn_to_tile.heuristics import next_pow2
from fuseopt.passes.nn_fuse.cost_model import value_bytes


@dataclass(frozen=True)
class SplitPlan:
    """How one reduction splits: its reduced axes `first` to `last` (adjacent) are read
    as `splits` chunks of `chunk` elements; stage one reduces each chunk (axis
    `first + 1` of `split_shape`), stage two the chunks' results (axis `first`)."""

    first: int
    last: int
    splits: int
    chunk: int
    length: int | None = None
    """The reduced count when it is less than splits * chunk (a *ragged* split, of a
    count with no usable divisor: the last chunk is part padding), else None."""

    @property
    def ragged(self) -> bool:
        """Whether the chunks overhang the reduced count (`length`)."""
        return self.length is not None

    def split_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """`shape` with the reduced axes as (splits, chunk)."""
        return (*shape[: self.first], self.splits, self.chunk, *shape[self.last + 1 :])


def plan_split(
    shape: tuple[int, ...],
    axes: tuple[int, ...],
    max_rows: int,
    min_length: int,
    min_chunk: int,
    max_chunk: int,
    programs: int,
) -> SplitPlan | None:
    """The split of a reduction over `axes` of `shape`, or None to leave it as it is."""
    rank = len(shape)
    if not axes or sorted(axes) != list(range(rank - len(axes), rank)):
        return None  # not the trailing axes
    length = math.prod(shape[rank - len(axes) :])
    rows = math.prod(shape[: rank - len(axes)])
    if rows >= max_rows or length < min_length:
        return None
    cap = max(min_chunk, min(max_chunk, length * rows // programs))
    chunk = _row_chunk(length, rows, min_chunk, max_chunk, cap, programs)
    if chunk is None:  # no usable divisor (a prime length): chunks of a power of two
        chunk = 1 << (cap.bit_length() - 1)
        splits = -(-length // chunk)
        if chunk < min_chunk or splits < 2 or splits * chunk == length:
            return None
        return SplitPlan(rank - len(axes), rank - 1, splits, chunk, length)
    return SplitPlan(rank - len(axes), rank - 1, length // chunk, chunk)


def _row_chunk(
    length: int, rows: int, min_chunk: int, max_chunk: int, cap: int, programs: int
) -> int | None:
    """The chunk C a row of `length` elements splits into (at least 2 chunks).

    The largest power-of-two factor of the length up to `cap` (enough programs, each a
    whole block), when it is `min_chunk` or more. Else, since vocabulary sizes are
    rarely powers of two (Llama 3's 128256 is 2^8 x 501), any divisor from `min_chunk`
    to `max_chunk`, read as a masked power-of-two block: the one with the least
    estimated time, the waves of `programs` programs times the block each reads, then
    the best filled block, then the most programs (128256 over 8 rows: 64 chunks of
    2004, one wave of 2048-element blocks). None without such a divisor (a prime):
    `plan_split` then splits it ragged."""
    chunk = 1
    while chunk * 2 <= cap and length % (chunk * 2) == 0:
        chunk *= 2
    if chunk >= min_chunk and length // chunk >= 2:
        return chunk
    candidates = [d for d in divisors(length) if min_chunk <= d <= max_chunk and length // d >= 2]
    if not candidates:
        return None

    def cost(d: int) -> tuple[int, float, int]:
        waves = -(-rows * (length // d) // programs)
        return (waves * next_pow2(d), -d / next_pow2(d), d)  # the masked block it reads

    return min(candidates, key=cost)


MIN_COLUMN_SPLITS = 4
"""The fewest chunks a column reduction splits into, and so the largest grid it splits
(a quarter of `programs`): such a grid (two programs per SM at the default) streams near
bandwidth already, and a second launch would cost more than it saves (sum over the
first axis of 1024 x 64 x 512: 2 chunks took the kernel from 22.7 to 19.9 us)."""


def divisors(n: int) -> list[int]:
    """The divisors of `n` > 0, ascending (trial division up to its square root)."""
    low, high = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            low.append(d)
            if d * d != n:
                high.append(n // d)
        d += 1
    return low + high[::-1]


def plan_column_split(
    shape: tuple[int, ...],
    axes: tuple[int, ...],
    programs: int,
    columns_per_program: int,
    min_chunk: int,
    min_elements: int,
) -> SplitPlan | None:
    """The split of a column reduction over `axes` of `shape`, or None to leave it.

    A column reduction's program holds up to `columns_per_program` of the kept elements
    after the reduced axes (fewer when there are fewer) for one index of the kept axes
    before them, and loops over the reduced axes; so few outputs (a bias gradient: 4096
    sums of 16384 rows, 64 programs) make a grid that cannot keep enough loads in flight.
    It splits when that grid is under a quarter of `programs` (`MIN_COLUMN_SPLITS`) and
    its input has at least `min_elements` elements: into the fewest chunks S that bring
    the grid to `programs`, or when no divisor of the reduced count does, the most that
    keep `min_chunk` elements a chunk (at least `MIN_COLUMN_SPLITS`), S a divisor of the
    reduced count (any divisor: a chunk is a loop bound, not a block). Without such a
    divisor (a prime count) the split is ragged: as many chunks as would reach
    `programs` with `min_chunk` elements each, the last one part padding."""
    if not axes or sorted(axes) != list(range(min(axes), max(axes) + 1)):
        return None  # not one run of adjacent axes
    first, last = min(axes), max(axes)
    inner = math.prod(shape[last + 1 :])
    if inner <= 1:
        return None  # a row reduction (nothing kept after the reduced axes)
    length = math.prod(shape[first : last + 1])
    if not math.prod(shape) or math.prod(shape) < min_elements:
        return None
    width = min(1 << (inner - 1).bit_length(), columns_per_program)
    grid = math.prod(shape[:first]) * -(-inner // width)
    wanted = -(-programs // grid)
    if wanted < MIN_COLUMN_SPLITS:
        return None
    usable = [d for d in divisors(length) if d >= MIN_COLUMN_SPLITS and length // d >= min_chunk]
    if not usable:  # a prime count: chunks of equal size, the last one part padding
        splits = min(wanted, length // min_chunk)
        if splits < MIN_COLUMN_SPLITS:
            return None
        chunk = -(-length // splits)
        return SplitPlan(first, last, -(-length // chunk), chunk, length)
    splits = next((d for d in usable if d >= wanted), usable[-1])
    return SplitPlan(first, last, splits, length // splits)


ELEMENTWISE = (
    nn.UnaryElementwiseOp,
    nn.BinaryElementwiseOp,
    nn.CompareOp,
    nn.SelectOp,
    nn.CastOp,
)
"""Ops a reshape moves through: same-shaped operands and result, element by element."""

MAX_CONE = 64
"""How many elementwise ops above the reduction a reshape is pushed through at most."""


def _same_shape_elementwise(op: Operation | None, shape: tuple[int, ...]) -> bool:
    """Whether a reshape to a split shape moves through `op`: an elementwise op with
    operands of `shape`, or an `nn.take` with an index of `shape` (a gather is
    elementwise in its index; the input it reads by address stays as it is)."""
    if isinstance(op, nn.TakeOp):
        return tuple(op.index.type.get_shape()) == shape  # type: ignore[attr-defined]
    return (
        isinstance(op, ELEMENTWISE)
        and len(op.results) == 1
        and all(x.type.get_shape() == shape for x in op.operands)  # type: ignore[attr-defined]
    )


def _moved_operands(op: Operation) -> Sequence[SSAValue]:
    """The operands a reshape moved above `op` is pushed to (a take's index only)."""
    return [op.index] if isinstance(op, nn.TakeOp) else op.operands


def movable_cone(value: SSAValue, user: Operation, recompute: bool = False) -> set[Operation]:
    """The elementwise ops computing `value` (all of its shape) that the reshape can move
    above: every use of each one's result is by `user` or by another op of the set (a
    value used twice inside, as smooth-L1's |a - b|, moves; one also used outside stays
    and is reshaped where it is). An op used outside whose every use is an elementwise op
    or a reduction of its shape (`never_stored`) is rebuilt too, when that reads no more
    bytes than the cone without it (cross-entropy's per-row weights and ignore mask,
    rebuilt from the targets the loss reads anyway: no kernel stores them); a shared
    value computed from more than it weighs (`d = a * b + c * e` also returned through
    `-d`) stays. With `recompute` every op moves (those used outside are computed twice:
    where they are, and rebuilt in the new shape). At most `MAX_CONE` ops, nearest
    first."""
    shape = tuple(value.type.get_shape())  # type: ignore[attr-defined]
    cone: list[Operation] = []
    frontier = [value.owner]
    while frontier and len(cone) < MAX_CONE:
        op = frontier.pop(0)
        if op in cone or not _same_shape_elementwise(op, shape):  # type: ignore[arg-type]
            continue
        cone.append(op)  # type: ignore[arg-type]
        frontier += [x.owner for x in _moved_operands(op)]  # type: ignore[union-attr]
    if recompute:
        return _reachable(value, set(cone))
    strict = _used_inside(value, set(cone), user, lambda op: False)
    wider = _used_inside(value, set(cone), user, never_stored)
    # left out, a shared value is written by some kernel and read here; rebuilt, its
    # inputs are read here instead
    stored = {x for x in _reads(value, strict) if x.owner in wider}
    kept_cost = sum(map(value_bytes, _reads(value, strict))) + sum(map(value_bytes, stored))
    if sum(map(value_bytes, _reads(value, wider))) <= kept_cost:
        return wider
    return strict


def _used_inside(
    value: SSAValue,
    candidates: set[Operation],
    user: Operation,
    also: Callable[[Operation], bool],
) -> set[Operation]:
    """The ops of `candidates` that `value` (the one `user` reads) depends on through
    them, after dropping, until none is left, each op with a use outside the set (and
    `user`) that `also` does not allow."""
    inside = set(candidates)
    changed = True
    while changed:
        changed = False
        for op in list(inside):
            users = {use.operation for r in op.results for use in r.uses}
            if not users <= inside | {user} and not also(op):
                inside.discard(op)
                changed = True
    if value.owner not in inside:
        return set()
    return _reachable(value, inside)


def _reads(value: SSAValue, cone: set[Operation]) -> set[SSAValue]:
    """The values the rebuilt cone reads: those its ops take from outside it (splat
    constants are free; a take's input is read one element per index, counted as
    nothing, unless the cone computes it: a rebuilt take still reads the original, which
    must then be stored), or `value` itself for an empty cone."""
    if not cone:
        return {value}
    gathered = {op.input for op in cone if isinstance(op, nn.TakeOp) and op.input.owner in cone}
    return gathered | {
        x
        for op in cone
        for x in _moved_operands(op)
        if x.owner not in cone
        and not (isinstance(x.owner, nn.ConstantOp) and x.owner.splat_value is not None)
    }


def never_stored(op: Operation) -> bool:
    """Whether every use of `op`'s value is by an elementwise op or a reduction reading
    operands of its shape: nn-fuse computes it inside the kernels of those users, so it
    is stored only when one of those kernels must also write it for a reshape."""
    shape = op.results[0].type.get_shape()  # type: ignore[attr-defined]
    return all(
        (
            _same_shape_elementwise(use.operation, shape)
            and not (isinstance(use.operation, nn.TakeOp) and use.index == 0)
        )
        or (
            isinstance(use.operation, nn.ReductionOp)
            and use.operation.operands[0].type.get_shape() == shape  # type: ignore[attr-defined]
        )
        for r in op.results
        for use in r.uses
    )


def _reachable(value: SSAValue, inside: set[Operation]) -> set[Operation]:
    """The ops of `inside` that `value` depends on through ops of `inside`."""
    found: set[Operation] = set()
    stack = [value.owner]
    while stack:
        op = stack.pop()
        if op in inside and op not in found:
            found.add(op)  # type: ignore[arg-type]
            stack += [x.owner for x in _moved_operands(op)]  # type: ignore[union-attr, arg-type]
    return found


def split_broadcast_input(op: nn.BroadcastOp, plan: SplitPlan) -> tuple[int, ...] | None:
    """The shape `op`'s input takes so that broadcasting it to the split shape gives
    the split of `op`'s result: its shape padded to the result's rank, with the reduced
    axes as (1, 1) when it is broadcast along all of them (a row's mean along the
    columns of a LayerNorm weight gradient) or as (S, C) when it has all of them (a
    per-row value broadcast along the kept axes). None when it mixes the two: the
    broadcast is then reshaped where it is, which writes it out (a bounded cost, where
    leaving a reduction of a few long rows unsplit is not)."""
    source = tuple(op.input.type.get_shape())  # type: ignore[attr-defined]
    result = tuple(op.result.type.get_shape())  # type: ignore[attr-defined]
    padded = (1,) * (len(result) - len(source)) + source
    run = padded[plan.first : plan.last + 1]
    if all(n == 1 for n in run):
        middle: tuple[int, ...] = (1, 1)
    elif run == result[plan.first : plan.last + 1] and not plan.ragged:
        middle = (plan.splits, plan.chunk)
    else:
        return None
    return (*padded[: plan.first], *middle, *padded[plan.last + 1 :])


def split_index_vector(
    op: nn.ConstantOp, plan: SplitPlan, add: Callable[[Operation], SSAValue]
) -> SSAValue | None:
    """An integer index vector (`nn.ConstantOp.arange`) along a reduced axis, in the
    split shape: the sum of one along the chunks (start + step * chunk * s) and one
    within a chunk (step * c), which kernels compute from their tile indices as they
    did the original; reshaped whole it would be a constant along two axes, which a
    kernel writes out and the reduction reads. None for any other constant."""
    t = op.result.type
    assert isinstance(t, TensorType)
    if op.arange is None:
        return None
    return _split_arange(op.arange, t, plan, add)


def split_index_broadcast(
    op: nn.BroadcastOp,
    shape: tuple[int, ...],
    plan: SplitPlan,
    add: Callable[[Operation], SSAValue],
) -> SSAValue | None:
    """The input of broadcast `op` in its split `shape` (`split_broadcast_input`) as
    `split_index_vector` makes it, when that input is an index vector, reshaped or not
    (argmax's row numbers, [n] -> [n, 1], broadcast along the columns): reshaped whole
    it would be a constant along two axes, which the kernel reads from memory (and the
    CUDA backend broadcast through shared memory with two barriers per loop step).
    None for any other input."""
    source = op.input
    owner = source.owner
    if isinstance(owner, nn.ReshapeOp):
        owner = owner.operands[0].owner
    if not isinstance(owner, nn.ConstantOp) or owner.arange is None:
        return None
    t = source.type
    result = op.result.type
    assert isinstance(t, TensorType) and isinstance(result, TensorType)
    dims = tuple(t.get_shape())
    padded = (1,) * (len(result.get_shape()) - len(dims)) + dims
    if sum(n > 1 for n in padded) != 1:
        return None
    index = _split_arange(owner.arange, TensorType(t.element_type, padded), plan, add)
    if index is None or tuple(index.type.get_shape()) != shape:  # type: ignore[attr-defined]
        return None
    return index


def _split_arange(
    arange: tuple[int, int], t: TensorType, plan: SplitPlan, add: Callable[[Operation], SSAValue]
) -> SSAValue | None:
    """`split_index_vector` of an index vector `start + step * i` (`arange`) of type
    `t` (one axis longer than 1)."""
    shape = tuple(t.get_shape())
    if not isinstance(t.element_type, IntegerType):
        return None
    (axis,) = (k for k, n in enumerate(shape) if n > 1)
    if not plan.first <= axis <= plan.last:
        return None
    start, step = arange
    target = TensorType(t.element_type, plan.split_shape(shape))
    if plan.ragged:  # start + step * (the position, clamped into the count)
        if plan.first != plan.last:
            return None
        position = ragged_position(plan, target, add, clamped=True)
        scale = add(nn.ConstantOp(step, target))
        return add(nn.AddOp(add(nn.MulOp(position, scale)), add(nn.ConstantOp(start, target))))
    parts = []
    for k, values in (
        (plan.first, [start + step * plan.chunk * i for i in range(plan.splits)]),
        (plan.first + 1, [step * i for i in range(plan.chunk)]),
    ):
        along = [len(values) if j == k else 1 for j in range(len(target.get_shape()))]
        vector = TensorType(t.element_type, along)
        dense = DenseIntOrFPElementsAttr.from_list(vector, values)
        parts.append(add(nn.BroadcastOp(add(nn.ConstantOp(dense, vector)), target)))
    return add(nn.AddOp(*parts))


def reshaped(
    value: SSAValue,
    plan: SplitPlan,
    add: Callable[[Operation], SSAValue],
    user: Operation,
    recompute: bool = False,
) -> SSAValue:
    """`value` in `plan`'s split shape: the elementwise ops of its `movable_cone` (with
    `recompute`) are rebuilt on split operands (each value once), splat constants made in
    the new shape, a broadcast rebuilt from its input in the split shape when it can be
    (`split_broadcast_input`: it stays indexing, never written out), any other value
    reshaped where it is."""
    cone = movable_cone(value, user, recompute)
    done: dict[SSAValue, SSAValue] = {}

    def build(v: SSAValue) -> SSAValue:
        if v in done:
            return done[v]
        t = v.type
        assert isinstance(t, TensorType)
        target = TensorType(t.element_type, plan.split_shape(tuple(t.get_shape())))
        op = v.owner
        if isinstance(op, nn.ConstantOp) and op.splat_value is not None:
            done[v] = add(nn.ConstantOp(op.splat_value, target))
        elif isinstance(op, nn.TakeOp) and op in cone:  # gathers from the same input
            done[v] = add(nn.TakeOp(op.input, build(op.index)))
            done[v].owner.location = op.location  # type: ignore[union-attr]
        elif op in cone:
            assert isinstance(op, Operation)
            rebuilt = type(op).create(
                operands=[build(x) for x in op.operands],
                result_types=[target],
                attributes=dict(op.attributes),
                properties=dict(op.properties),
            )
            done[v] = add(rebuilt)
            rebuilt.location = op.location  # the rebuilt op is the one the user wrote
        elif isinstance(op, nn.ConstantOp) and (index := split_index_vector(op, plan, add)):
            done[v] = index
        elif isinstance(op, nn.BroadcastOp) and (shape := split_broadcast_input(op, plan)):
            source = split_index_broadcast(op, shape, plan, add) or add(
                nn.ReshapeOp(op.input, TensorType(t.element_type, shape))
            )
            done[v] = add(nn.BroadcastOp(source, target))
        elif plan.ragged:  # read at positions clamped into the count (masked later)
            done[v] = add(nn.TakeOp(v, ragged_index(plan, tuple(t.get_shape()), add)))
        else:
            done[v] = add(nn.ReshapeOp(v, target))
        return done[v]

    return build(value)


def ragged_position(
    plan: SplitPlan, target: TensorType, add: Callable[[Operation], SSAValue], clamped: bool
) -> SSAValue:
    """The i64 position along the reduced count of each element of `target` (a ragged
    plan's split shape): s * chunk + c, clamped to the last element when `clamped`
    (then every read is in bounds; the padding reads the last element again)."""
    rank = len(target.get_shape())
    shape = tuple(target.get_shape())
    parts = []
    for axis, values in (
        (plan.first, [plan.chunk * i for i in range(plan.splits)]),
        (plan.first + 1, list(range(plan.chunk))),
    ):
        along = [len(values) if k == axis else 1 for k in range(rank)]
        vector = TensorType(i64, along)
        dense = DenseIntOrFPElementsAttr.from_list(vector, values)
        parts.append(add(nn.BroadcastOp(add(nn.ConstantOp(dense, vector)), TensorType(i64, shape))))
    position = add(nn.AddOp(*parts))
    if clamped:
        assert plan.length is not None
        last = add(nn.ConstantOp(plan.length - 1, TensorType(i64, shape)))
        position = add(nn.MinOp(position, last))
    if target.element_type != i64:
        position = add(nn.CastOp(position, TensorType(target.element_type, shape)))
    return position


def ragged_index(
    plan: SplitPlan, shape: tuple[int, ...], add: Callable[[Operation], SSAValue]
) -> SSAValue:
    """The flat position in a contiguous tensor of `shape` of each element of its ragged
    split (`plan`), its reduced position clamped into the count: what `nn.take` reads
    the split from."""
    split = plan.split_shape(shape)
    rank = len(split)
    inner = math.prod(shape[plan.last + 1 :])
    target = TensorType(i64, split)
    position = ragged_position(plan, target, add, clamped=True)
    terms = [add(nn.MulOp(position, add(nn.ConstantOp(inner, target)))) if inner > 1 else position]
    kept = [k for k in range(rank) if k not in (plan.first, plan.first + 1)]
    strides = {k: math.prod(split[k + 1 :]) for k in kept if k > plan.first + 1}
    outer = math.prod(shape[plan.first :])
    strides |= {k: outer * math.prod(split[k + 1 : plan.first]) for k in kept if k < plan.first}
    for k in kept:
        if split[k] == 1:
            continue
        along = [split[k] if j == k else 1 for j in range(rank)]
        vector = TensorType(i64, along)
        values = [strides[k] * i for i in range(split[k])]
        dense = DenseIntOrFPElementsAttr.from_list(vector, values)
        terms.append(add(nn.BroadcastOp(add(nn.ConstantOp(dense, vector)), target)))
    index = terms[0]
    for term in terms[1:]:
        index = add(nn.AddOp(index, term))
    return index
