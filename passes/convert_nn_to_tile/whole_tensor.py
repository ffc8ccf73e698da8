"""The fallback kernel for one nn op the tiler cannot index: a single program loads
every operand whole, applies the op to the whole tiles and stores the result
(`schedule = "whole_tensor"`; both backends print these specially)."""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, StringAttr, TensorType
from xdsl.ir import Operation, SSAValue

from fuseopt.dialects import tile


def whole_tensor_kernel(name: str, op: Operation) -> tuple[tile.KernelOp, list[SSAValue]]:
    """The fallback kernel for an op the tiler cannot index (transpose, strided slice,
    a concat of pieces with no common part size, regrouping reshape, reductions over
    scattered axes): one program loads every
    operand whole, applies the nn op to the whole tiles and stores the result.

    Returns the kernel and its inputs (the op's distinct operands, then its result).
    """
    inputs = list(dict.fromkeys(op.operands))
    r = op.results[0]

    def param(v: SSAValue) -> MemRefType:
        t = v.type
        assert isinstance(t, TensorType)
        return MemRefType(t.element_type, list(t.get_shape()) or [1])

    kernel = tile.KernelOp(name, 1, [param(v) for v in [*inputs, r]])
    kernel.schedule = StringAttr(tile.Schedule.WHOLE_TENSOR.value)
    entry = kernel.body.block
    zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
    entry.add_op(zero)
    mapping: dict[SSAValue, SSAValue] = {}
    for v, p in zip(inputs, entry.args, strict=False):
        t = v.type
        assert isinstance(t, TensorType)
        offsets = [zero.result] * max(1, len(t.get_shape()))
        load = tile.LoadOp(p, offsets, list(t.get_shape()))
        entry.add_op(load)
        mapping[v] = load.result
    new = op.clone(value_mapper=mapping)
    entry.add_op(new)
    rt = r.type
    assert isinstance(rt, TensorType)
    offsets = [zero.result] * max(1, len(rt.get_shape()))
    entry.add_op(tile.StoreOp(new.results[0], entry.args[-1], offsets))
    entry.add_op(tile.ReturnOp())
    return kernel, [*inputs, r]
