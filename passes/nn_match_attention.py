"""`nn-match-attention`: attention written out as ops becomes one `nn.attention`.

Models that do not call `scaled_dot_product_attention` (Hugging Face's "eager"
attention, hand-written blocks) compute it as

    softmax((q @ k^T) * scale [+ mask | masked with -inf]) @ v

and the frontend imports that as nn ops: a batched matmul (the 4-d operands reshaped
to [B*H, L, E], the key transposed, or the matmul's own transpose flag), a multiply or
divide by a constant, an additive mask (usually an `nn.broadcast` of a smaller one) or a
select of -inf, a softmax over the last axis (between casts to f32 and back for 16-bit
models), and a second batched matmul. This pass finds that chain, anchored at the second
matmul, and replaces it with one `nn.attention` (a flash-attention kernel later: the
L x S scores never reach memory). Grouped-query heads repeated by a broadcast
(`repeat_kv`) are read unrepeated (`unrepeated_kv`, which canonicalization also applies
to every nn.attention).

A chain is taken only when every value it drops is used by the chain alone (attention
weights a model returns keep the ops), the shapes are those of attention (rank 4, the
batch and heads merged by the reshapes, the key's head dim the query's), the scale is a
splat constant, and the mask broadcasts to [B, H, L, S]; a `masked_fill(drop, -inf)`
keeps the keys where `drop` is false. A select whose false value is
finite (a `finfo.min` fill) is not attention's -inf mask (a row masked whole would differ)
and stays as it is. Preconditions: shapes are static. Run before nn-decompose (it matches
`nn.softmax`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import Float32Type, Float64Type, ModuleOp, TensorType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.traits import Pure

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import is_bool, is_float, static_shape
from fuseopt.passes.nn_canonicalization_patterns import splat_of, unrepeated_kv


def _element(v: SSAValue):  # noqa: ANN202 - an xDSL type attribute
    t = v.type
    assert isinstance(t, TensorType)
    return t.element_type


def _owner(v: SSAValue, kind: type[Operation]) -> Operation | None:
    """`v`'s producer when it is a `kind` op used only by this chain (once)."""
    op = v.owner
    return op if isinstance(op, kind) and v.has_one_use() else None


def _splat(v: SSAValue) -> float | int | None:
    """The value of a (broadcast) splat constant, else None."""
    return splat_of(unbroadcast(v))


def _widening(cast: Operation) -> bool:
    """A cast from f16/bf16 to f32 (exact: dropping it keeps every value)."""
    return _is_narrow_float(_element(cast.operands[0])) and isinstance(
        _element(cast.results[0]), Float32Type
    )


def _narrowing(cast: Operation) -> bool:
    """A cast from f32 to f16/bf16 (a rounding nn.attention makes once at its output,
    computing in f32 in between, as PyTorch's fused attention does)."""
    return isinstance(_element(cast.operands[0]), Float32Type) and _is_narrow_float(
        _element(cast.results[0])
    )


def _is_narrow_float(t: object) -> bool:
    return is_float(t) and not isinstance(t, Float32Type | Float64Type)


def unbroadcast(v: SSAValue, max_rank: int | None = None) -> SSAValue:
    """`v` with the `nn.broadcast`s producing it peeled off (only down to sources of at
    most `max_rank` dims, when given)."""
    while isinstance(v.owner, nn.BroadcastOp) and (
        max_rank is None or len(static_shape(v.owner.input)) <= max_rank
    ):
        v = v.owner.input
    return v


def _four_d(v: SSAValue) -> SSAValue | None:
    """The 4-d [B, H, N, D] tensor a 3-d batched-matmul operand [B*H, N, D] was
    reshaped from (or `v` itself when it is 4-d already)."""
    if len(static_shape(v)) == 4:
        return v
    reshape = _owner(v, nn.ReshapeOp)
    if reshape is None:
        return None
    src = reshape.input
    s, r = static_shape(src), static_shape(v)
    if len(s) != 4 or len(r) != 3 or s[0] * s[1] != r[0] or s[2:] != r[1:]:
        return None
    return src


@dataclass
class _Scores:
    """What the scores chain matched: q, k ([B, H, S, E]), the scale."""

    query: SSAValue
    key: SSAValue
    scale: float


def _scores(v: SSAValue) -> _Scores | None:
    """`v` = (q @ k^T) [* c | / c], 4-d; a 16-bit product scaled in f32 (widened, scaled,
    rounded back: how the frontend imports a Python-scalar multiply) too."""
    scale = 1.0
    narrow = _owner(v, nn.CastOp)
    if narrow is not None and _narrowing(narrow):
        v = narrow.input
    for kind in (nn.MulOp, nn.DivOp):
        op = _owner(v, kind)
        if op is not None:
            c = _splat(op.operands[1])
            if c is None or c == 0 or not math.isfinite(c):
                return None
            scale = c if kind is nn.MulOp else 1.0 / c
            v = op.operands[0]
            break
    widen = _owner(v, nn.CastOp)
    if widen is not None and _widening(widen):
        v = widen.input
    if len(static_shape(v)) == 4 and isinstance(v.owner, nn.ReshapeOp):
        v3 = v.owner.input
        if not v.has_one_use() or len(static_shape(v3)) != 3:
            return None
    else:
        v3 = v
    mm = _owner(v3, nn.MatmulOp)
    if mm is None or mm.transpose_a is not None:
        return None
    query = _four_d(mm.lhs)
    if query is None:
        return None
    if mm.transpose_b is not None:
        key = _four_d(mm.rhs)
    else:  # k^T as a transpose of the 4-d key, then reshaped
        key_t = _four_d(mm.rhs)
        transpose = _owner(key_t, nn.TransposeOp) if key_t is not None else None
        if transpose is None or list(transpose.perm) != [0, 1, 3, 2]:
            return None
        key = transpose.input
    if key is None:
        return None
    return _Scores(query, key, scale)


class MatchAttention(RewritePattern):
    """softmax(q @ k^T * scale + mask) @ v, anchored at the second matmul."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.MatmulOp, rewriter: PatternRewriter) -> None:
        if op.transpose_a is not None or op.transpose_b is not None:
            return
        out = op.result
        target: Operation = op
        if len(static_shape(out)) == 3:  # [B*H, L, Dv], reshaped back to [B, H, L, Dv]
            back = out.get_user_of_unique_use() if out.has_one_use() else None
            if not isinstance(back, nn.ReshapeOp) or len(static_shape(back.result)) != 4:
                return
            target = back
        elif len(static_shape(out)) != 4:
            return
        final = target.results[0]
        b, h, lq, dv = static_shape(final)
        probs, value = _four_d(op.lhs), _four_d(op.rhs)
        if probs is None or value is None:
            return
        narrow = _owner(probs, nn.CastOp)  # softmax in f32, rounded to the model's type
        if narrow is not None and _narrowing(narrow):
            probs = narrow.input
        softmax = _owner(probs, nn.SoftmaxOp)
        if softmax is None or softmax.axis.value.data != 3:
            return
        x = softmax.operands[0]
        widen = _owner(x, nn.CastOp)
        if widen is not None and _widening(widen):
            x = widen.input
        mask: SSAValue | None = None
        negate = False
        add = _owner(x, nn.AddOp)
        select = _owner(x, nn.SelectOp)
        scores = None
        if add is not None:  # scores + mask, or mask + scores
            for i in (0, 1):
                scores = _scores(add.operands[i])
                if scores is not None:
                    mask = unbroadcast(add.operands[1 - i])
                    break
        elif select is not None and _splat(select.operands[2]) == float("-inf"):
            scores, mask = _scores(select.operands[1]), unbroadcast(select.operands[0])
        elif select is not None and _splat(select.operands[1]) == float("-inf"):
            # masked_fill(drop, -inf): keep where `drop` is false
            scores, mask = _scores(select.operands[2]), unbroadcast(select.operands[0])
            negate = True
        else:
            scores = _scores(x)
        if scores is None:
            return
        query, key, value = scores.query, unrepeated_kv(scores.key), unrepeated_kv(value)
        element = _element(query)
        if not is_float(element) or _element(final) != element:
            return
        if not (_element(key) == _element(value) == element):
            return
        s, e = static_shape(key)[2], static_shape(query)[3]
        if (
            static_shape(query)[:3] != (b, h, lq)
            or static_shape(key)[3] != e
            or static_shape(key)[:1] != (b,)
        ):
            return
        hkv = static_shape(key)[1]
        if static_shape(value) != (b, hkv, s, dv) or hkv == 0 or h % hkv:
            return
        prologue: list[Operation] = []
        if mask is not None:
            mask, prologue = _mask4(mask, (b, h, lq, s), element)
            if mask is None:
                return
            if negate:  # keep = select(drop, false, true), at the mask's own shape
                t = mask.type
                assert isinstance(t, TensorType)
                no, yes = nn.ConstantOp(False, t), nn.ConstantOp(True, t)
                keep = nn.SelectOp(mask, no.result, yes.result)
                prologue += [no, yes, keep]
                mask = keep.result
        attention = nn.AttentionOp(query, key, value, mask, scores.scale)
        attention.location = target.location
        rewriter.replace(target, [*prologue, attention], [attention.result])


def _mask4(
    mask: SSAValue, full: tuple[int, ...], element: object
) -> tuple[SSAValue | None, list[Operation]]:
    """`mask` as nn.attention's mask operand (rank 4, each dim 1 or full; i1, the
    query's type or f32) and the ops making it, or (None, []) when it cannot be."""
    shape = static_shape(mask)
    if len(shape) > 4:
        return None, []
    shape4 = (1,) * (4 - len(shape)) + shape
    if any(d not in (1, f) for d, f in zip(shape4, full, strict=True)):
        return None, []
    t = _element(mask)
    if not (is_bool(t) or t == element or isinstance(t, Float32Type)):
        return None, []
    if shape4 == shape:
        return mask, []
    reshape = nn.ReshapeOp(mask, TensorType(t, shape4))
    return reshape.result, [reshape]


@dataclass(frozen=True)
class NNMatchAttentionPass(ModulePass):
    """Replace softmax(q @ k^T * scale + mask) @ v chains with nn.attention."""

    name = "nn-match-attention"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(MatchAttention(), apply_recursively=False).rewrite_module(op)
        for fn in [f for f in op.walk() if isinstance(f, func.FuncOp)]:
            for block in fn.body.blocks:
                _erase_dead(block)


def _erase_dead(block: Block) -> None:
    """Erase the pure nn ops whose results nothing uses (the matched chains), last
    first (an op with effects, nn.torch_call, stays)."""
    for op in reversed(list(block.ops)):
        unused = op.results and not any(r.first_use for r in op.results)
        if op.dialect_name() == "nn" and unused and op.has_trait(Pure):
            block.erase_op(op)
