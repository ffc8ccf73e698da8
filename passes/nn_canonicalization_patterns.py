"""Canonicalization patterns for the nn dialect, run by xDSL's `canonicalize` pass.

Each nn op's `NNCanonicalization` trait asks `patterns_for(op_type)` for its patterns:
- identities: x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1 -> x (splat constants);
- no-op shape/type ops: cast, reshape, broadcast to the same type, identity transpose;
- chains: transpose of transpose -> one transpose; reshape of reshape -> one reshape;
  broadcast of broadcast -> one broadcast; a widening cast undone by the reverse cast;
- matmuls: a transpose of an operand's last two dims becomes the matmul's transpose
  flag; a contraction of one element (an outer product, Hugging Face's rotary
  `inv_freq @ position_ids`) becomes a broadcast multiply, fused like any elementwise op;
- reductions of nothing: a sum over an axis of size 0 is 0 and a mean NaN, as in
  PyTorch (a max or min of nothing has no value and is left alone);
- an identity gather: `nn.take` whose index, computed from constants only, is every
  flat position of its input in order (advanced indexing by aranges over every axis,
  as Hugging Face's padding masks are built) is a reshape of its input;
- grouped-query attention: an `nn.attention` whose key and value are repeated over
  their query groups (`repeat_kv`) reads them unrepeated;
- constant folding: an op whose operands are all constants folds to a constant when
  every operand is a splat (any size: elementwise and layout ops map splats to
  splats), the result has at most `MAX_FOLD_ELEMENTS` elements, or the result is a
  splat or an index vector of at most `MAX_INDEX_FOLD_ELEMENTS` (`arange(n) + 1`:
  kernels compute both from their tile indices, so a compile-time-constant chain such
  as Hugging Face's position ids and packed-sequence test folds away whole); a
  broadcast of an index vector stays (a kernel computes it from its tile indices, a
  dense constant would be read from memory), and so does an elementwise op on an
  index vector whose result would be neither a splat nor an index vector, at any size (a padding or
  triangle mask computed from indices costs the kernel nothing; a folded one is data).
Folding evaluates the op with the reference interpreter, so it has the same numerics,
on one element for a splat. It never materializes an operand of more than
`MAX_EVAL_ELEMENTS` elements: a reduction of a larger splat folds symbolically (max and
min: the splat; mean: the splat; sum: the splat times the element count, rounded once to
the element type; float sums only), anything else of that size is left alone. A dense
constant is recognized as a splat from its bytes, without unpacking its elements.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    Float32Type,
    IntegerType,
    ModuleOp,
    TensorType,
)
from xdsl.interpreter import Interpreter
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import int_array, is_float, static_shape
from fuseopt.interpreter.dtypes import to_element_type
from fuseopt.interpreter.errors import InterpretError
from fuseopt.passes.nn_builder import NNBuilder

MAX_FOLD_ELEMENTS = 1024
"""Largest non-splat result that constant folding materializes."""

MAX_INDEX_FOLD_ELEMENTS = 1 << 16
"""Largest index-vector result (`arange(n) + 1`, Hugging Face's position ids and the
packed-sequence test built on them) that constant folding materializes: kernels compute
such a constant from their tile indices, so folding it costs no memory traffic."""

MAX_EVAL_ELEMENTS = 1 << 20
"""Largest operand constant folding materializes to evaluate an op (8 MiB as f64); a
100000 x 100000 splat summed to a scalar once asked for 74.5 GiB."""

SPLAT_CHECK_BYTES = 1 << 16
"""How many bytes of a dense constant are compared at a time when looking for a splat."""

# Ops that map splat operands to a splat result (so folding never grows IR).
SPLAT_PRESERVING = (
    *nn.UNARY_OPS,
    *nn.BINARY_OPS,
    nn.CompareOp,
    nn.SelectOp,
    nn.CastOp,
    nn.BroadcastOp,
    nn.ReshapeOp,
    nn.TransposeOp,
    nn.SliceOp,
)


def splat_of(value: SSAValue) -> float | int | None:
    """The scalar a value equals everywhere, if it is a splat nn.constant."""
    owner = value.owner
    if not isinstance(owner, nn.ConstantOp):
        return None
    if isinstance(owner.value, DenseIntOrFPElementsAttr):
        return dense_splat(owner.value)
    return owner.splat_value


def dense_splat(attr: DenseIntOrFPElementsAttr) -> float | int | None:
    """The scalar every element of `attr` equals, or None, found without unpacking the
    elements (`ConstantOp.splat_value` builds a tuple of them all): the elements'
    bytes are compared with the first element's, a block at a time. Equal values with
    different bytes (0.0 and -0.0) count as a splat only in small constants, and NaN
    never does, as for `splat_value`."""
    count = len(attr)
    if count == 0:
        return None
    data = memoryview(attr.data.data)
    size = len(data) // count
    first = data[:size].tobytes()
    block = first * max(1, SPLAT_CHECK_BYTES // size)
    same = all(
        data[i : i + len(block)] == block[: len(data[i : i + len(block)])]
        for i in range(0, len(data), len(block))
    )
    if not same:
        return nn.ConstantOp(attr, attr.type).splat_value if count <= MAX_FOLD_ELEMENTS else None
    value = attr.get_element_type().unpack(first, 1)[0]
    return None if value != value else value  # NaN != NaN


class FoldIdentityOperand(RewritePattern):
    """x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1 -> x."""

    RIGHT_IDENTITIES = {nn.AddOp: 0, nn.SubOp: 0, nn.MulOp: 1, nn.DivOp: 1}
    COMMUTATIVE = (nn.AddOp, nn.MulOp)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.BinaryElementwiseOp, rewriter: PatternRewriter) -> None:
        unit = self.RIGHT_IDENTITIES.get(type(op))
        if unit is None:
            return
        if splat_of(op.rhs) == unit:
            rewriter.replace(op, [], [op.lhs])
        elif isinstance(op, self.COMMUTATIVE) and splat_of(op.lhs) == unit:
            rewriter.replace(op, [], [op.rhs])


class FoldConstantCondition(RewritePattern):
    """select(true, a, b) -> a; select(false, a, b) -> b; select(c, a, a) -> a (a mask
    built from an all-true constant, as `ones(...).tril()` leaves one)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.SelectOp, rewriter: PatternRewriter) -> None:
        cond, a, b = op.operands
        if a is b:
            rewriter.replace(op, [], [a])
            return
        value = splat_of(cond)
        if value is not None:
            rewriter.replace(op, [], [a if value else b])


class FoldNoOpConversion(RewritePattern):
    """cast, reshape or broadcast to the operand's own type -> the operand."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.ConversionOp, rewriter: PatternRewriter) -> None:
        no_op_kinds = nn.CastOp | nn.ReshapeOp | nn.BroadcastOp
        if isinstance(op, no_op_kinds) and op.input.type == op.result.type:
            rewriter.replace(op, [], [op.input])


class FoldTransposes(RewritePattern):
    """transpose(transpose(x)) -> transpose(x) with the composed permutation;
    an identity permutation -> x; a permutation that moves only axes of size 1 (a
    decode step's [B, 1, H, D] -> [B, H, 1, D]) -> a reshape: the elements keep their
    order, so it is a view, not a copy."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.TransposeOp, rewriter: PatternRewriter) -> None:
        perm = op.perm
        if list(perm) == sorted(perm):
            rewriter.replace(op, [], [op.input])
            return
        dims = op.input.type.get_shape()  # type: ignore[union-attr]
        moved = [p for p in perm if dims[p] != 1]
        if moved == sorted(moved):
            rewriter.replace(op, nn.ReshapeOp(op.input, op.result.type))
            return
        inner = op.input.owner
        if isinstance(inner, nn.TransposeOp):
            composed = [inner.perm[p] for p in perm]
            rewriter.replace(
                op,
                nn.TransposeOp.build(
                    operands=[inner.input],
                    result_types=[op.result.type],
                    attributes={"permutation": int_array(composed)},
                ),
            )


class FoldTransposeIntoMatmul(RewritePattern):
    """matmul(transpose(a), b) -> matmul(a, b, transpose_a) when the transpose swaps only the
    last two dimensions (likewise for b): the GEMM reads the operand transposed instead of a
    copy being made (PyTorch's `linear` arrives as `mm(x, t(w))`)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.MatmulOp, rewriter: PatternRewriter) -> None:
        operands = [op.lhs, op.rhs]
        flags = [op.transpose_a is not None, op.transpose_b is not None]
        changed = False
        for i, v in enumerate(operands):
            inner = v.owner
            if isinstance(inner, nn.TransposeOp) and _swaps_last_two(list(inner.perm)):
                operands[i] = inner.input
                flags[i] = not flags[i]
                changed = True
        if changed:
            rewriter.replace(op, nn.MatmulOp(operands[0], operands[1], flags[0], flags[1]))


class FoldOuterProductMatmul(RewritePattern):
    """matmul with a contraction of one element (K = 1) -> a broadcast multiply: an
    outer product is elementwise work a kernel fuses, not a GEMM (a library call of its
    own). Hugging Face's rotary embeddings compute `inv_freq @ position_ids` so, [1, 64,
    1] @ [1, 1, S], before cos and sin. Each element is one product of two operands
    converted to the result type, which is what the f32-accumulating matmul rounds
    (16-bit operands: the f32 product is exact)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.MatmulOp, rewriter: PatternRewriter) -> None:
        a, b, out = (v.type for v in (op.lhs, op.rhs, op.result))
        assert isinstance(a, TensorType) and isinstance(b, TensorType)
        assert isinstance(out, TensorType)
        sa, sb, shape = a.get_shape(), b.get_shape(), out.get_shape()
        contraction = sa[-2] if op.transpose_a is not None else sa[-1]
        if contraction != 1 or not is_float(out.element_type):
            return
        builder = NNBuilder()
        element = out.element_type
        # either orientation holds the same elements in the same order when K = 1
        lhs = builder.reshape(builder.cast(op.lhs, element), (*shape[:-1], 1))
        rhs = builder.reshape(builder.cast(op.rhs, element), (*sb[:-2], 1, shape[-1]))
        product = builder.add(
            nn.MulOp(builder.broadcast(lhs, op.result), builder.broadcast(rhs, op.result))
        )
        rewriter.replace(op, builder.ops, [product])


def _swaps_last_two(perm: list[int]) -> bool:
    k = len(perm)
    return k >= 2 and perm == [*range(k - 2), k - 1, k - 2]


class FoldConversionChain(RewritePattern):
    """reshape(reshape(x)) -> reshape(x); broadcast(broadcast(x)) -> broadcast(x);
    cast(cast(x: A -> B) -> A) -> x when A -> B is exact (widening float)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.ConversionOp, rewriter: PatternRewriter) -> None:
        inner = op.input.owner
        chainable = nn.ReshapeOp | nn.BroadcastOp | nn.CastOp
        if type(inner) is not type(op) or not isinstance(op, chainable):
            return
        assert isinstance(inner, nn.ConversionOp)
        if isinstance(op, nn.CastOp):
            if inner.input.type == op.result.type and _exact_widening(inner):
                rewriter.replace(op, [], [inner.input])
            return
        rewriter.replace(op, type(op)(inner.input, op.result.type))


def _exact_widening(cast: nn.ConversionOp) -> bool:
    src, dst = cast.input.type, cast.result.type
    assert isinstance(src, TensorType) and isinstance(dst, TensorType)
    return (
        is_float(src.element_type)
        and isinstance(dst.element_type, Float32Type)
        and not isinstance(src.element_type, Float32Type)
    )


@cache
def _folding_interpreter() -> Interpreter:
    from fuseopt.interpreter.nn_semantics import NNFunctions

    interpreter = Interpreter(ModuleOp([]))
    interpreter.register_implementations(NNFunctions())
    return interpreter


LAYOUT_OPS = (nn.BroadcastOp, nn.ReshapeOp, nn.TransposeOp, nn.SliceOp)
"""Ops that move elements without changing values: a splat stays the same splat."""


class FoldConstants(RewritePattern):
    """Evaluate an op whose operands are all constants (see module docstring)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if isinstance(op, nn.ConstantOp | nn.FusionOp | nn.YieldOp) or len(op.results) != 1:
            return
        if not op.operands or not all(isinstance(v.owner, nn.ConstantOp) for v in op.operands):
            return
        result_type = op.results[0].type
        assert isinstance(result_type, TensorType)
        splats = [splat_of(v) for v in op.operands]
        if isinstance(op, SPLAT_PRESERVING) and all(s is not None for s in splats):
            value = splats[0] if isinstance(op, LAYOUT_OPS) else _evaluate_on_one_element(op)
            rewriter.replace(op, nn.ConstantOp(value, result_type))
            return
        if isinstance(op, nn.ReductionOp) and splats[0] is not None:
            reduced = _reduce_splat(op, splats[0])
            if reduced is not None:
                rewriter.replace(op, nn.ConstantOp(reduced, result_type))
                return
        count = _elements(result_type)
        if count > MAX_EVAL_ELEMENTS or _broadcasts_index_vector(op):
            return
        if any(_elements(v.type) > MAX_EVAL_ELEMENTS for v in op.operands):
            return
        args = tuple(_run(v.owner, ()) for v in op.operands)
        try:
            out = np.asarray(_run(op, args))
        except InterpretError:  # e.g. the max of no elements: not ours to decide here
            return
        from_indices = isinstance(op, FREE_IN_KERNELS) and any(
            _index_derived(v) for v in op.operands
        )
        if (count > MAX_FOLD_ELEMENTS or from_indices) and not _may_be_free_in_kernels(out, count):
            return
        folded = nn.ConstantOp(_value_attr(out, result_type), result_type)
        if folded.splat_value is None and folded.arange is None:
            if count > MAX_FOLD_ELEMENTS or from_indices:
                # a dense constant would be read from memory (or built by the host),
                # where the ops compute it from tile indices: keep computing it
                return
        rewriter.replace(op, folded)


def _may_be_free_in_kernels(values: np.ndarray, count: int) -> bool:
    """A cheap numeric test of whether `values` (a folded result larger than
    MAX_FOLD_ELEMENTS) can be a splat, or an index vector of at most
    MAX_INDEX_FOLD_ELEMENTS elements: constants a kernel makes from its tile indices
    instead of reading memory (`nn.ConstantOp.arange` then decides)."""
    flat = values.reshape(-1)
    if np.all(flat == flat[0]):
        return True
    if count > MAX_INDEX_FOLD_ELEMENTS or sum(n > 1 for n in values.shape) != 1:
        return False
    steps = np.diff(flat)
    return bool(np.all(steps == steps[0]))


FREE_IN_KERNELS = (
    nn.UnaryElementwiseOp,
    nn.BinaryElementwiseOp,
    nn.CompareOp,
    nn.SelectOp,
    nn.CastOp,
)
"""Ops a kernel computes on an index vector's values for nothing (elementwise): on an
index vector they fold only to splats and index vectors. Others (a cumsum, a gather)
fold to dense constants as any op does: computed, they would be kernels of their own."""


def _index_derived(v: SSAValue) -> bool:
    """Whether constant `v` is an integer index vector (kernels compute it from their
    tile indices), so ops on it fold only to splats and index vectors."""
    owner, t = v.owner, v.type
    return (
        isinstance(owner, nn.ConstantOp)
        and isinstance(t, TensorType)
        and isinstance(t.element_type, IntegerType)
        and owner.arange is not None
    )


def _broadcasts_index_vector(op: Operation) -> bool:
    owner = op.operands[0].owner
    return (
        isinstance(op, nn.BroadcastOp)
        and isinstance(owner, nn.ConstantOp)
        and (owner.arange is not None)
    )


def _elements(t: object) -> int:
    assert isinstance(t, TensorType)
    return math.prod(t.get_shape())


def _reduce_splat(op: nn.ReductionOp, splat: float | int) -> float | int | None:
    """A reduction of a splat, without materializing it: max and min are the splat at
    any size; above MAX_EVAL_ELEMENTS a mean is the splat and a float sum the splat
    times the element count; each rounded once to the result's element type, as the
    interpreter rounds. None: evaluate it (or leave it)."""
    t, result = op.input.type, op.result.type
    assert isinstance(t, TensorType) and isinstance(result, TensorType)
    value: float | int
    if isinstance(op, nn.ReduceMaxOp | nn.ReduceMinOp):
        if any(t.get_shape()[a] == 0 for a in op.axis_list):
            return None  # no identity: left for the kernel (or PyTorch) to reject
        value = splat
    elif _elements(t) <= MAX_EVAL_ELEMENTS or not is_float(t.element_type):
        return None
    elif isinstance(op, nn.MeanOp):
        value = splat
    elif isinstance(op, nn.SumOp):  # of the splat as stored (an f32 0.1 is not 0.1)
        stored = to_element_type(np.asarray(splat), t.element_type).item()
        value = stored * math.prod(t.get_shape()[a] for a in op.axis_list)
    else:
        return None
    return to_element_type(np.asarray(value), result.element_type).item()


def _run(op: Operation, args: tuple[np.ndarray, ...]) -> np.ndarray:
    (out,) = _folding_interpreter().run_op(op, args)
    return out


def _evaluate_on_one_element(op: Operation) -> float | int:
    """Apply an elementwise op to its splat operands, each viewed as one element."""
    args = []
    for v in op.operands:
        t = v.type
        assert isinstance(t, TensorType)
        one = np.full((1,) * len(t.get_shape()), splat_of(v))
        args.append(to_element_type(one, t.element_type))
    return np.asarray(_run(op, tuple(args))).reshape(-1)[0].item()


def _value_attr(values: np.ndarray, t: TensorType) -> DenseIntOrFPElementsAttr | float | int:
    """A splat scalar when all elements are equal, else dense elements of type `t`."""
    flat = values.reshape(-1)
    if flat.size and np.all(flat == flat[0]):
        return flat[0].item()
    items = [float(x) for x in flat] if is_float(t.element_type) else [int(x) for x in flat]
    return DenseIntOrFPElementsAttr.from_list(t, items)


def unrepeated_kv(v: SSAValue) -> SSAValue:
    """A [B, H, S, D] key or value that is [B, Hkv, S, D] repeated over its query group
    (reshape to [B, Hkv, 1, S, D], broadcast to [B, Hkv, G, S, D], reshape back: Hugging
    Face's `repeat_kv`), as the unrepeated [B, Hkv, S, D]; else `v`."""
    flat = v.owner
    wide = flat.input.owner if isinstance(flat, nn.ReshapeOp) else None
    grouped = wide.input.owner if isinstance(wide, nn.BroadcastOp) else None
    if not isinstance(grouped, nn.ReshapeOp) or len(static_shape(v)) != 4:
        return v
    b, h, s, d = static_shape(v)
    source = grouped.input
    ws, ss = static_shape(wide.result), static_shape(source)
    if len(ws) != 5 or len(ss) != 4 or ws[0] != b or ws[1] * ws[2] != h or ws[3:] != (s, d):
        return v
    if ss != (b, ws[1], s, d) or static_shape(grouped.result) != (b, ws[1], 1, s, d):
        return v
    return source


class FoldRepeatedKeyValue(RewritePattern):
    """attention(q, repeat_kv(k), repeat_kv(v)) -> attention(q, k, v): query head h reads
    key/value head h // G of the unrepeated [B, Hkv, S, D] tensors (grouped-query
    attention), so no kernel copies the keys and values G times (Hugging Face's SDPA
    path repeats them before calling `scaled_dot_product_attention`)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.AttentionOp, rewriter: PatternRewriter) -> None:
        key, value = unrepeated_kv(op.key), unrepeated_kv(op.value)
        if key is op.key or value is op.value or static_shape(key)[1] != static_shape(value)[1]:
            return
        new = nn.AttentionOp(op.query, key, value, op.mask, op.scale_value, op.is_causal)
        rewriter.replace(op, new)


@cache
class FoldEmptyReduction(RewritePattern):
    """sum / mean over an axis of size 0 -> the constant 0 / NaN of the result type
    (a kernel has nothing to read there; the value needs no input)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.SumOp | nn.MeanOp, rewriter: PatternRewriter) -> None:
        t, result = op.input.type, op.result.type
        assert isinstance(t, TensorType) and isinstance(result, TensorType)
        if not any(t.get_shape()[a] == 0 for a in op.axis_list):
            return
        if isinstance(op, nn.MeanOp):
            if not is_float(result.element_type):
                return
            value: float | int = math.nan
        else:
            value = 0.0 if is_float(result.element_type) else 0
        rewriter.replace(op, nn.ConstantOp(value, result))


CONSTANT_EXPRESSION_OPS = (*nn.BINARY_OPS, *LAYOUT_OPS, nn.CastOp)
"""Ops `constant_expression` evaluates."""


def constant_expression(value: SSAValue, depth: int = 8) -> np.ndarray | None:
    """The values of `value` when it is computed from constants only, through at most
    `depth` elementwise and layout ops, each of at most MAX_EVAL_ELEMENTS elements;
    None otherwise (a broadcast of an index vector is such an expression: folding keeps
    it unfolded so that kernels compute it)."""
    op = value.owner
    if _elements(value.type) > MAX_EVAL_ELEMENTS:
        return None
    if isinstance(op, nn.ConstantOp):
        return np.asarray(_run(op, ()))
    if depth == 0 or not isinstance(op, CONSTANT_EXPRESSION_OPS):
        return None
    args = [constant_expression(v, depth - 1) for v in op.operands]
    if any(a is None for a in args):
        return None
    try:
        return np.asarray(_run(op, tuple(args)))  # type: ignore[arg-type]
    except InterpretError:
        return None


class FoldIdentityTake(RewritePattern):
    """`nn.take %x, %i` where `%i` is every flat position of `%x` in order (a constant
    expression): a reshape of `%x` (no gather)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.TakeOp, rewriter: PatternRewriter) -> None:
        count = _elements(op.input.type)
        if count != _elements(op.index.type):
            return
        index = constant_expression(op.index)
        if index is None or not np.array_equal(index.reshape(-1), np.arange(count)):
            return
        rewriter.replace(op, nn.ReshapeOp(op.input, op.result.type))


def patterns_for(op_type: type[Operation]) -> tuple[RewritePattern, ...]:
    """The canonicalization patterns that apply to ops of `op_type`."""
    found: list[RewritePattern] = [FoldConstants()]
    if issubclass(op_type, nn.BinaryElementwiseOp):
        found.append(FoldIdentityOperand())
    if issubclass(op_type, nn.CastOp | nn.ReshapeOp | nn.BroadcastOp):
        found += [FoldNoOpConversion(), FoldConversionChain()]
    if op_type is nn.SelectOp:
        found.append(FoldConstantCondition())
    if op_type is nn.TransposeOp:
        found.append(FoldTransposes())
    if op_type is nn.MatmulOp:
        found += [FoldTransposeIntoMatmul(), FoldOuterProductMatmul()]
    if op_type in (nn.SumOp, nn.MeanOp):
        found.append(FoldEmptyReduction())
    if op_type is nn.AttentionOp:
        found.append(FoldRepeatedKeyValue())
    if op_type is nn.TakeOp:
        found.append(FoldIdentityTake())
    return tuple(found)
