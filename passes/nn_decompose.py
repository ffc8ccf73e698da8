"""`nn-decompose`: expand every composite nn op into primitives.

Preconditions: the module verifies; shapes are static.
Postcondition: no composite op (softmax, log_softmax, rms_norm, layer_norm, linear)
survives; the pass checks this and fails with a located error otherwise.

Numerics, the way PyTorch's own kernels do it:
- softmax and log_softmax subtract the row max before `exp`;
- f16/bf16 inputs are widened to f32 for the whole computation of softmax, log_softmax
  and the norms (accumulation in f32) and narrowed once at the end;
- layer_norm's variance is two-pass, around a mean that is exact for a constant row
  (`row_mean`), so a constant row normalizes to exactly 0, as eager's Welford does;
- a composite of an empty input is that input (no reduction over an axis of size 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, TensorType, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from fuseopt.diagnostics import error_at
from fuseopt.dialects import nn
from fuseopt.dialects.syntax import is_bool
from fuseopt.passes.convert_nn_to_tile.attention import attention_schedule_refusal
from fuseopt.passes.nn_builder import NNBuilder


def _element_type(x: SSAValue):  # noqa: ANN202 - an xDSL type attribute
    assert isinstance(x.type, TensorType)
    return x.type.element_type


class SoftmaxLowering(RewritePattern):
    """softmax(x) = exp(x - max) / sum(exp(x - max)), along the axis."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.SoftmaxOp, rewriter: PatternRewriter) -> None:
        if _replaced_if_empty(op, rewriter):
            return
        b = NNBuilder()
        shifted, axes = _shifted_by_max(b, op)
        e = b.unary(nn.ExpOp, shifted)
        y = b.binary(nn.DivOp, e, b.reduce(nn.SumOp, e, axes))
        _replace(op, b, y, rewriter)


class LogSoftmaxLowering(RewritePattern):
    """log_softmax(x) = (x - max) - log(sum(exp(x - max))), along the axis."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.LogSoftmaxOp, rewriter: PatternRewriter) -> None:
        if _replaced_if_empty(op, rewriter):
            return
        b = NNBuilder()
        shifted, axes = _shifted_by_max(b, op)
        lse = b.unary(nn.LogOp, b.reduce(nn.SumOp, b.unary(nn.ExpOp, shifted), axes))
        y = b.binary(nn.SubOp, shifted, lse)
        _replace(op, b, y, rewriter)


class RmsNormLowering(RewritePattern):
    """rms_norm(x) = x * rsqrt(mean(x^2) + eps) [* weight], in f32 for narrow floats."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.RmsNormOp, rewriter: PatternRewriter) -> None:
        if _replaced_if_empty(op, rewriter):
            return
        b = NNBuilder()
        x = b.to_f32(op.input)
        axes = _trailing_axes(op)
        ms = b.reduce(nn.MeanOp, b.add(nn.MulOp(x, x)), axes)
        y = _scale(b, op, x, ms)
        _replace(op, b, y, rewriter)


class LayerNormLowering(RewritePattern):
    """layer_norm(x) = (x - mean) * rsqrt(var + eps) [* weight] [+ bias], biased var,
    two-pass: var = mean((x - mean)^2), with the mean of `row_mean` (exact for a
    constant row, so that its output is exactly 0 * weight + bias, as eager's)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.LayerNormOp, rewriter: PatternRewriter) -> None:
        if _replaced_if_empty(op, rewriter):
            return
        b = NNBuilder()
        x = b.to_f32(op.input)
        axes = _trailing_axes(op)
        centered = b.binary(nn.SubOp, x, row_mean(b, x, axes))
        var = b.reduce(nn.MeanOp, b.add(nn.MulOp(centered, centered)), axes)
        y = _scale(b, op, centered, var)
        if op.bias is not None:
            y = b.binary(nn.AddOp, y, b.to_f32(op.bias))
        _replace(op, b, y, rewriter)


class LinearLowering(RewritePattern):
    """linear(x, w, b) = matmul(x, w, transpose_b) [+ broadcast(b)]."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.LinearOp, rewriter: PatternRewriter) -> None:
        b = NNBuilder()
        x = op.input
        x_type = op.input.type
        assert isinstance(x_type, TensorType)
        vector = len(x_type.get_shape()) == 1
        if vector:  # matmul needs rank >= 2: view [K] as [1, K]
            x = b.add(nn.ReshapeOp(x, TensorType(x_type.element_type, (1, *x_type.get_shape()))))
        y = b.add(nn.MatmulOp(x, op.weight, transpose_b=True))
        if op.bias is not None:
            y = b.binary(nn.AddOp, y, op.bias)
        if vector:
            y = b.add(nn.ReshapeOp(y, op.result.type))
        _take_location(op, b)
        rewriter.replace(op, b.ops, [y])


class AttentionLowering(RewritePattern):
    """attention(q, k, v) = safe_softmax(q @ k^T * scale, masked) @ v (the softmax
    written out: max, exp, sum, divide; a row with no key kept is zeros), in f32 for
    narrow floats: key/value heads broadcast over their query group, a causal mask as
    an index comparison, and a row with no key kept yields zeros (as the op defines).

    Applied to every nn.attention with `nn-decompose{attention=true}`, else only to
    those the fused schedule does not take (`attention_schedule_refusal`)."""

    def __init__(self, every: bool):
        self.every = every

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.AttentionOp, rewriter: PatternRewriter) -> None:
        if not self.every and attention_schedule_refusal(op) is None:
            return
        b = NNBuilder()
        y = decompose_attention(b, op)
        _take_location(op, b)
        rewriter.replace(op, b.ops, [y])


def decompose_every_attention(module: ModuleOp) -> None:
    """Expand every nn.attention of `module` into matmul, softmax and matmul (what the
    frontend option `attention="nn"` asks for)."""
    PatternRewriteWalker(AttentionLowering(every=True), apply_recursively=False).rewrite_module(
        module
    )


def decompose_attention(b: NNBuilder, op: nn.AttentionOp) -> SSAValue:
    """`op` as nn primitives appended to `b`; returns the result value."""
    q, k, v = (b.to_f32(x) for x in (op.query, op.key, op.value))
    batch, heads, lq, _ = _shape(q)
    s = _shape(k)[2]
    k, v = _repeat_heads(b, k, heads), _repeat_heads(b, v, heads)
    compute = _element_type(q)
    full = (batch, heads, lq, s)
    scores = b.add(nn.MatmulOp(q, k, transpose_b=True))
    scores = b.binary(nn.MulOp, scores, b.constant(op.scale_value, scores))
    neg_inf = b.constant(float("-inf"), scores)
    if op.is_causal:
        rows = b.add(nn.ReshapeOp(_index_vector(b, lq), TensorType(i64, (lq, 1))))
        cols = b.add(nn.ReshapeOp(_index_vector(b, s), TensorType(i64, (1, s))))
        row_t, col_t = (TensorType(i64, full) for _ in range(2))
        keep = b.add(
            nn.CompareOp(
                "le", b.add(nn.BroadcastOp(cols, col_t)), b.add(nn.BroadcastOp(rows, row_t))
            )
        )
        scores = b.add(nn.SelectOp(keep, scores, neg_inf))
    if op.mask is not None:
        m = op.mask
        if is_bool(_element_type(m)):
            keep = b.add(nn.BroadcastOp(m, TensorType(_element_type(m), full)))
            scores = b.add(nn.SelectOp(keep, scores, neg_inf))
        else:
            scores = b.binary(nn.AddOp, scores, b.cast(m, compute))
    # a softmax whose rows with no finite score are zeros (not NaN)
    peak = b.broadcast(b.reduce(nn.ReduceMaxOp, scores, [3]), scores)
    dead = b.add(nn.CompareOp("eq", peak, neg_inf))
    zeros = b.constant(0.0, scores)
    e = b.unary(nn.ExpOp, b.add(nn.SubOp(scores, b.add(nn.SelectOp(dead, zeros, peak)))))
    total = b.broadcast(b.reduce(nn.SumOp, e, [3]), e)
    empty = b.add(nn.CompareOp("eq", total, zeros))
    probs = b.add(nn.DivOp(e, b.add(nn.SelectOp(empty, b.constant(1.0, e), total))))
    out = b.add(nn.MatmulOp(probs, v))
    return b.cast(out, _element_type(op.query))


def _shape(x: SSAValue) -> tuple[int, ...]:
    assert isinstance(x.type, TensorType)
    return tuple(x.type.get_shape())


def _index_vector(b: NNBuilder, count: int) -> SSAValue:
    """The i64 vector 0, 1, ..., count - 1 (kernels compute it from tile indices)."""
    if count == 1:
        return b.add(nn.ConstantOp(0, TensorType(i64, (1,))))
    dense = DenseIntOrFPElementsAttr.from_list(TensorType(i64, (count,)), list(range(count)))
    return b.add(nn.ConstantOp(dense, dense.type))


def _repeat_heads(b: NNBuilder, x: SSAValue, heads: int) -> SSAValue:
    """(B, Hkv, S, D) -> (B, heads, S, D), each key/value head serving heads/Hkv queries."""
    batch, hkv, s, d = _shape(x)
    if hkv == heads:
        return x
    element = _element_type(x)
    grouped = b.add(nn.ReshapeOp(x, TensorType(element, (batch, hkv, 1, s, d))))
    wide = b.add(nn.BroadcastOp(grouped, TensorType(element, (batch, hkv, heads // hkv, s, d))))
    return b.add(nn.ReshapeOp(wide, TensorType(element, (batch, heads, s, d))))


def row_mean(b: NNBuilder, x: SSAValue, axes: Sequence[int]) -> SSAValue:
    """The keepdim mean of float `x` over `axes`, exact for a constant row: where
    min(x) == max(x), the row's value itself, else mean(x).

    A backend sums in f32 in its own order, and n copies of c rarely sum to exactly
    n * c (3.7 is not a multiple of its partial sums' ulps), so `mean` of a constant
    row misses c by ulps and `x - mean` is not 0: a layer_norm scales it by
    rsqrt(eps) ~ 316 (1e-3 off eager's exact bias), a variance is not exactly 0.
    min and max are exact in any order; they read the row in the same pass as the
    mean, and the online variance of long rows (`online`) recognizes this form.
    A row holding NaN has min != max (NaN compares unequal) and keeps mean(x): NaN.
    """
    mean = b.reduce(nn.MeanOp, x, axes)
    t = x.type
    assert isinstance(t, TensorType)
    if math.prod(t.get_shape()[a] for a in axes) <= 1:
        return mean  # one element is its own mean; none has no min or max (mean: NaN)
    low, high = b.reduce(nn.ReduceMinOp, x, axes), b.reduce(nn.ReduceMaxOp, x, axes)
    return b.add(nn.SelectOp(b.add(nn.CompareOp("eq", low, high)), low, mean))


def _shifted_by_max(b: NNBuilder, op: nn.RowwiseOp) -> tuple[SSAValue, list[int]]:
    """`x - max(x)` along the op's axis (in f32 for narrow floats), and that axis."""
    x = b.to_f32(op.input)
    axes = [op.axis.value.data]
    return b.binary(nn.SubOp, x, b.reduce(nn.ReduceMaxOp, x, axes)), axes


def _scale(b: NNBuilder, op: nn.NormOp, x: SSAValue, second_moment: SSAValue) -> SSAValue:
    """`x * rsqrt(second_moment + eps)`, times the weight when the norm has one."""
    eps = b.constant(op.eps.value.data, second_moment)
    y = b.binary(nn.MulOp, x, b.unary(nn.RsqrtOp, b.add(nn.AddOp(second_moment, eps))))
    if op.weight is not None:
        y = b.binary(nn.MulOp, y, b.to_f32(op.weight))
    return y


def _replaced_if_empty(op: nn.RowwiseOp | nn.NormOp, rewriter: PatternRewriter) -> bool:
    """Replace an op of an empty input by that input (its result has the same shape and
    no element, as in PyTorch), so no reduction runs over an axis of size 0 (a max of
    nothing is undefined). Returns whether it did."""
    t = op.input.type
    assert isinstance(t, TensorType)
    if math.prod(t.get_shape()):
        return False
    b = NNBuilder()
    _replace(op, b, op.input, rewriter)
    return True


def _trailing_axes(op: nn.NormOp) -> list[int]:
    t = op.input.type
    assert isinstance(t, TensorType)
    rank = len(t.get_shape())
    return list(range(rank - op.norm_rank, rank))


def _replace(
    op: nn.RowwiseOp | nn.NormOp, b: NNBuilder, y: SSAValue, rewriter: PatternRewriter
) -> None:
    """Narrow `y` back to the op's element type and replace the op with `b.ops`."""
    y = b.cast(y, _element_type(op.input))
    _take_location(op, b)
    rewriter.replace(op, b.ops, [y])


def _take_location(op: Operation, b: NNBuilder) -> None:
    """Give the primitives the composite's source location (as MLIR's rewriter does),
    so later diagnostics about them point at the line the user wrote."""
    for new in b.ops:
        new.location = op.location


@dataclass(frozen=True)
class NNDecomposePass(ModulePass):
    """Expand softmax, log_softmax, rms_norm, layer_norm and linear into nn primitives;
    nn.attention too where its fused schedule does not apply, or everywhere with
    `attention=true`."""

    name = "nn-decompose"

    attention: bool = False
    """Decompose every nn.attention into matmul, softmax and matmul (default: only
    those the fused attention schedule does not take)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        walker = PatternRewriteWalker(
            GreedyRewritePatternApplier(
                [
                    SoftmaxLowering(),
                    LogSoftmaxLowering(),
                    RmsNormLowering(),
                    LayerNormLowering(),
                    LinearLowering(),
                    AttentionLowering(self.attention),
                ]
            ),
            apply_recursively=False,
        )
        walker.rewrite_module(op)
        for inner in op.walk():
            if isinstance(inner, nn.COMPOSITE_OPS):
                raise error_at(inner, f"nn-decompose left a composite op '{inner.name}' behind")
