"""Online argmax / argmin across columns: an extreme-index pair
(`reduction_pairs.INDEX`, the extreme and the first position holding it) in its
extreme's loop, per lane (`online.per_lane`; rows keep a loop per level,
`online.merges`).

Each lane keeps a running extreme `m` and least position `i`; per element
`m' = max(m, x)` (NaN wins), the element's candidate taken against `m'`, and
`i' = min(kept, candidate)` where `kept` is `i` if the extreme stands (`m' == m`, or `m`
is NaN already), else the value of the non-matching elements (`past`), or the min's
identity while nothing was seen: exact in any order. Positions that rise along the loop
(the frontend's, `IndexCandidates.ordered`) take the cheaper form: the element replaces
`(m, i)` where it is beyond `m` (`_ordered_update`). After the loop the lanes combine
by the same rule against the column's extreme.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from fuseopt.dialects import nn, tile
from fuseopt.passes.reduction_pairs import StatisticsPair

if TYPE_CHECKING:
    from fuseopt.passes.convert_nn_to_tile.emitter import Context, KernelEmitter


def initial(em: KernelEmitter, ctx: Context, pair: StatisticsPair) -> list[SSAValue]:
    """The accumulators' initial tiles, (m, i) per lane: the extreme's and the min's
    identities."""
    m_t, i_t = _types(em, pair)
    return [
        em.splat(ctx, em._identity(_extreme_kind(pair), m_t.element_type), m_t),
        em.splat(ctx, em._identity("min", i_t.element_type), i_t),
    ]


def _extreme_kind(pair: StatisticsPair) -> str:
    """ "max" for an argmax's extreme, "min" for an argmin's."""
    return "max" if isinstance(pair.first, nn.ReduceMaxOp) else "min"


def _types(em: KernelEmitter, pair: StatisticsPair) -> tuple[TensorType, TensorType]:
    """The accumulators' tile types of an extreme index: the chunk tile's (per lane)."""
    acc_m = em._acc_element(_element(pair.first.results[0]))
    acc_i = em._acc_element(_element(pair.second.results[0]))
    return em.tile_type(pair.source, acc_m), em.tile_type(pair.second.operands[0], acc_i)


def update(
    em: KernelEmitter, ctx: Context, pair: StatisticsPair, accs: list[SSAValue]
) -> list[SSAValue]:
    """Each lane's running extreme and least position after its element of this
    chunk (index pairs merge only per lane: `merges`)."""
    m, i = accs
    first, second, cand = pair.first, pair.second, pair.candidates
    assert cand is not None
    if cand.ordered:
        return _ordered_update(em, ctx, pair, m, i)
    combine = nn.MaxOp if _extreme_kind(pair) == "max" else nn.MinOp
    x, _ = em._reduction_input(first, em.emit(pair.source, ctx), ctx)
    m_new = em.add(ctx, combine(m, x))
    et = cand.extreme.type
    assert isinstance(et, TensorType)
    ctx.cache[(cand.extreme, 0)] = em.cast(ctx, m_new, et.element_type)
    terms, _ = em._reduction_input(second, em.emit(second.operands[0], ctx), ctx)
    kept = _kept_index(em, ctx, pair, m, i, m_new)
    return [m_new, em.add(ctx, nn.MinOp(kept, terms))]


def _ordered_update(
    em: KernelEmitter, ctx: Context, pair: StatisticsPair, m: SSAValue, i: SSAValue
) -> list[SSAValue]:
    """Each lane's extreme and position after its element of this chunk, for positions
    that rise along the loop (`IndexCandidates.ordered`): the element replaces them
    where it is strictly beyond the extreme, a NaN where the extreme is not NaN yet, or
    the lane has seen nothing (the first element, -inf included); ties keep the earlier
    position. A few compares and selects an element (one i64 select), no min over
    candidates."""
    cand = pair.candidates
    assert cand is not None
    x, _ = em._reduction_input(pair.first, em.emit(pair.source, ctx), ctx)
    beyond = em.add(ctx, nn.CompareOp("gt" if _extreme_kind(pair) == "max" else "lt", x, m))
    if cand.nan_first:  # x NaN: taken unless the lane holds a NaN already
        is_nan = em.add(ctx, nn.CompareOp("ne", x, x))
        holds_number = em.add(ctx, nn.CompareOp("eq", m, m))
        beyond = em.add(ctx, nn.SelectOp(is_nan, holds_number, beyond))
    unseen = _unseen(em, ctx, i, _nothing(em, ctx, i))
    take = em.add(ctx, nn.SelectOp(unseen, unseen, beyond))
    mask = em.chunk_mask(pair.source, ctx)
    if mask is not None:  # elements past the row are never taken
        take = em.add(ctx, nn.SelectOp(mask, take, mask))
    it = i.type
    assert isinstance(it, TensorType)
    position = em.cast(ctx, em.emit(cand.index, ctx), it.element_type)
    return [em.add(ctx, nn.SelectOp(take, x, m)), em.add(ctx, nn.SelectOp(take, position, i))]


def _nothing(em: KernelEmitter, ctx: Context, i: SSAValue) -> SSAValue:
    """The position of a lane that has seen nothing: the min's identity, in `i`'s type."""
    it = i.type
    assert isinstance(it, TensorType)
    return em.splat(ctx, em._identity("min", it.element_type), it)


def _unseen(em: KernelEmitter, ctx: Context, i: SSAValue, nothing: SSAValue) -> SSAValue:
    """Lanes whose position `i` is still `nothing` (`_nothing`)."""
    return em.add(ctx, nn.CompareOp("eq", i, nothing))


def _kept_index(
    em: KernelEmitter, ctx: Context, pair: StatisticsPair, m: SSAValue, i: SSAValue, m_new: SSAValue
) -> SSAValue:
    """What the elements behind `(m, i)` (an extreme and the least position holding it)
    contribute under the extreme `m_new`: `i` where `m_new == m` or `m` is NaN (their
    candidates are unchanged), else `past` (none of them holds `m_new`), or the min's
    identity where nothing was seen."""
    cand = pair.candidates
    assert cand is not None
    it = i.type
    assert isinstance(it, TensorType)
    nothing = _nothing(em, ctx, i)
    moved = em.add(
        ctx, nn.SelectOp(_unseen(em, ctx, i, nothing), nothing, em.splat(ctx, cand.past, it))
    )
    kept = em.add(ctx, nn.SelectOp(em.add(ctx, nn.CompareOp("eq", m, m_new)), i, moved))
    if cand.nan_first:
        kept = em.add(ctx, nn.SelectOp(em.add(ctx, nn.CompareOp("ne", m, m)), i, kept))
    return kept


def finish(em: KernelEmitter, ctx: Context, pair: StatisticsPair, results: list[SSAValue]) -> None:
    """Record an extreme index's extreme and position from its lanes' (each lane's
    position kept where its extreme is the row's)."""
    lanes_m, lanes_i = results
    axis = em.reduce_axis(pair.source)
    m = em.add(ctx, tile.ReduceOp(_extreme_kind(pair), lanes_m, axis))
    mt = lanes_m.type
    assert isinstance(mt, TensorType)
    row_m = em._broadcast(ctx, m, pair.first.results[0], pair.source, mt.element_type)
    kept = _kept_index(em, ctx, pair, lanes_m, lanes_i, row_m)
    i = em.add(ctx, tile.ReduceOp("min", kept, axis))
    ctx.cache[(pair.first.results[0], 0)] = em._finish_reduce(pair.first, m, ctx)
    ctx.cache[(pair.second.results[0], 0)] = em._finish_reduce(pair.second, i, ctx)


def _element(v: SSAValue):  # noqa: ANN202
    t = v.type
    assert isinstance(t, TensorType)
    return t.element_type
