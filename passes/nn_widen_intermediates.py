"""`nn-widen-intermediates`: a fusion group computes in f32 and rounds once, at its outputs.

fuseopt's numerics policy. Inside an `nn.fusion` region every f16/bf16 intermediate is
computed in f32; a 16-bit result is rounded once, where the group yields it. This is what
torch.compile does inside a fused kernel, and it is never less accurate than eager
PyTorch, which rounds every op's result to its dtype. Skipping this pass keeps eager's
per-op rounding (the `precision="eager"` option of the backends).

Preconditions: the module verifies and has been through `nn-fuse` (ops outside
`nn.fusion` regions are left alone: they run one op at a time, as eager does).
Postcondition: inside each region no op but a library `nn.matmul`, a 16-bit
`nn.trunc_div` and the `nn.cast`s that narrow a yielded value, a matmul or trunc_div
operand or a float-to-integer conversion has a 16-bit float result.

Algorithm, per region, in program order (the block is rebuilt, old ops erased):
1. a 16-bit block argument is widened by one `nn.cast`, placed where a widened op first
   reads it (so a backend that loads at first use still does); views of it (broadcast,
   reshape, transpose, slice, concat) and gathers from it (`nn.take`, which reads its
   input from memory by address) stay 16-bit and are widened after, so a broadcast
   weight or an embedding table is still indexed in memory rather than staged;
2. an explicit `nn.cast` between float types keeps its meaning: to f16/bf16 it rounds
   (readers in the group widen the rounded value), to f32 it is the source's f32 value.
   Only the rounding each 16-bit op implies is dropped, as torch.compile drops it;
3. a conversion from a 16-bit float to an integer or i1 reads the rounded value, so an
   explicit `x.to(torch.int64)` truncates what eager truncates;
4. `nn.matmul` reads 16-bit operands; in a group routed to a generated kernel its result
   is its f32 accumulator, in a `library_gemm` group it keeps its type (the library
   writes it to memory, as eager does);
4b. the rounding ops (floor, ceil, trunc, floor_div, remainder, fmod) read their 16-bit
   operands rounded, as eager does, and compute in f32: they jump at integers (or
   multiples of the divisor), where an unrounded f32 operand may sit on the other
   side; a 16-bit `nn.trunc_div` keeps its type: its meaning also rounds the quotient
   to 16 bits before truncating it (bf16 1 / 0.1 is 10, the f32 quotient truncates
   to 9);
5. every other op is rebuilt with its 16-bit float operands and results in f32
   (constants keep their value: a 16-bit constant is exact in f32);
6. `nn.yield` reads each 16-bit output through one narrowing `nn.cast`.

Example:
    nn.fusion ins(%x : tensor<8xbf16>) -> tensor<8xbf16> {
    ^bb0(%a: tensor<8xbf16>):
      %e = nn.exp %a : tensor<8xbf16>
      %m = nn.mul %e, %e : tensor<8xbf16>
      nn.yield %m : tensor<8xbf16>
    }
becomes
    ^bb0(%a: tensor<8xbf16>):
      %w = nn.cast %a : tensor<8xbf16> -> tensor<8xf32>
      %e = nn.exp %w : tensor<8xf32>
      %m = nn.mul %e, %e : tensor<8xf32>
      %r = nn.cast %m : tensor<8xf32> -> tensor<8xbf16>
      nn.yield %r : tensor<8xbf16>
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    ModuleOp,
    TensorType,
    f32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import is_float
from fuseopt.passes.nn_fuse.legality import VIEW_TYPES

MOVES_ELEMENTS = (*VIEW_TYPES, nn.TakeOp)
"""Ops that only move elements: kept in their operands' type, widened after."""

ROUNDING_OPS = (
    nn.FloorOp,
    nn.CeilOp,
    nn.TruncOp,
    nn.FloorDivOp,
    nn.RemainderOp,
    nn.FmodOp,
)
"""Ops that jump at integers or multiples of the divisor: they read 16-bit operands
rounded, as eager does (step 4b)."""


def is_narrow_float(t: Attribute) -> bool:
    """Whether `t` is a tensor of a 16-bit float (f16, bf16)."""
    return isinstance(t, TensorType) and isinstance(t.element_type, Float16Type | BFloat16Type)


def _widened(t: Attribute) -> Attribute:
    """`t` with a 16-bit float element type replaced by f32 (other types unchanged)."""
    if is_narrow_float(t):
        assert isinstance(t, TensorType)
        return TensorType(f32, t.get_shape())
    return t


class _RegionWidener:
    """Rebuilds one fusion block in f32; see the module docstring for the steps."""

    def __init__(self, block: Block, wide_matmuls: bool):
        self.block = block
        self.wide_matmuls = wide_matmuls
        self.new_ops: list[Operation] = []
        self.value_of: dict[SSAValue, SSAValue] = {}
        """Each original value's replacement (f32 where the original is 16-bit)."""
        self.narrow_of: dict[SSAValue, SSAValue] = {}
        """Each original 16-bit value's rounded replacement, made once when first read."""
        self.wide_of: dict[SSAValue, SSAValue] = {}
        """Each 16-bit value the new block reads (an argument, a matmul result) in f32."""

    def run(self) -> None:
        old_ops = list(self.block.ops)
        for op in old_ops:
            self._rebuild(op)
        anchor = self.block.first_op
        assert anchor is not None
        self.block.insert_ops_before(self.new_ops, anchor)
        for op in reversed(old_ops):  # users before their producers
            self.block.erase_op(op)

    # --- reading operands ------------------------------------------------------------

    def wide(self, v: SSAValue) -> SSAValue:
        """`v`'s replacement, in f32 if `v` is a 16-bit float."""
        value = self.value_of.get(v, v)  # block arguments stand for themselves
        if not is_narrow_float(value.type):
            return value
        if value not in self.wide_of:
            self.wide_of[value] = self._add(nn.CastOp(value, _widened(value.type)))
        return self.wide_of[value]

    def rounded_wide(self, v: SSAValue) -> SSAValue:
        """`v` rounded to its own type (if it was widened), then in f32."""
        return self.wide(self.narrow(v))

    def narrow(self, v: SSAValue) -> SSAValue:
        """`v`'s replacement in `v`'s own type: rounded once if it was widened."""
        value = self.value_of.get(v, v)
        if value.type == v.type:
            return value
        if v not in self.narrow_of:
            self.narrow_of[v] = self._add(nn.CastOp(value, v.type))
        return self.narrow_of[v]

    def _add(self, op: Operation) -> SSAValue:
        self.new_ops.append(op)
        return op.results[0]

    # --- rebuilding ops ----------------------------------------------------------------

    def _rebuild(self, op: Operation) -> None:
        if isinstance(op, nn.YieldOp):
            self.new_ops.append(nn.YieldOp(*[self.narrow(v) for v in op.operands]))
            return
        if isinstance(op, nn.CastOp):
            self._rebuild_cast(op)
            return
        if isinstance(op, nn.MatmulOp):
            operands = [self.narrow(v) for v in op.operands]
            result_type = _widened(op.result.type) if self.wide_matmuls else op.result.type
            self._clone(op, operands, [result_type])
            return
        if isinstance(op, nn.TruncDivOp) and is_narrow_float(op.result.type):
            self._clone(op, [self.narrow(v) for v in op.operands], [op.result.type])
            return
        if isinstance(op, ROUNDING_OPS):
            operands = [self.rounded_wide(v) for v in op.operands]
            self._clone(op, operands, [_widened(r.type) for r in op.results])
            return
        if isinstance(op, nn.ConstantOp) and is_narrow_float(op.result.type):
            value = op.value
            if isinstance(value, DenseIntOrFPElementsAttr):
                value = DenseIntOrFPElementsAttr.from_list(
                    _widened(value.type), [float(x) for x in value.get_values()]
                )
            new = nn.ConstantOp(value, _widened(op.result.type))
            new.attributes.update({k: a for k, a in op.attributes.items() if k != "value"})
            self.value_of[op.result] = self._add(new)
            return
        current = [self.value_of.get(v, v) for v in op.operands]
        if isinstance(op, MOVES_ELEMENTS) and all(
            c.type == v.type for c, v in zip(current, op.operands, strict=True)
        ):
            self._clone(op, current, [r.type for r in op.results])  # widened after the view
            return
        operands = [self.wide(v) for v in op.operands]
        self._clone(op, operands, [_widened(r.type) for r in op.results])

    def _rebuild_cast(self, op: nn.CastOp) -> None:
        source_type = op.input.type
        result_type = op.result.type
        assert isinstance(source_type, TensorType) and isinstance(result_type, TensorType)
        to_float = is_float(result_type.element_type)
        if is_float(source_type.element_type) and to_float:
            source = self.wide(op.input)
            if is_narrow_float(result_type):
                # an explicit narrowing conversion rounds, as written (a user's
                # `x.half().float()` quantizes); readers widen the rounded value
                self._clone(op, [source], [result_type])
            else:  # widening to f32: the group's f32 value already is that
                self.value_of[op.result] = source
            return
        if to_float:  # integer or i1 to float: straight to f32
            self._clone(op, [self.value_of.get(op.input, op.input)], [_widened(result_type)])
            return
        # float (rounded as eager rounds it) or integer to integer
        self._clone(op, [self.narrow(op.input)], [result_type])

    def _clone(
        self, op: Operation, operands: list[SSAValue], result_types: list[Attribute]
    ) -> None:
        new = type(op).create(
            operands=operands,
            result_types=result_types,
            properties=dict(op.properties),
            attributes=dict(op.attributes),
        )
        for old, fresh in zip(op.results, new.results, strict=True):
            fresh.name_hint = old.name_hint
            self.value_of[old] = fresh
        self.new_ops.append(new)


def widen_fusion(fusion: nn.FusionOp) -> None:
    """Rewrite `fusion`'s body to compute in f32 and round once at its outputs."""
    block = fusion.body.block
    if not any(is_narrow_float(v.type) for op in block.ops for v in (*op.operands, *op.results)):
        return
    library = fusion.route_kind == nn.Route.LIBRARY_GEMM
    _RegionWidener(block, wide_matmuls=not library).run()


@dataclass(frozen=True)
class NNWidenIntermediatesPass(ModulePass):
    """Compute every fusion group's 16-bit float intermediates in f32 (round once)."""

    name = "nn-widen-intermediates"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fusion in [o for o in op.walk() if isinstance(o, nn.FusionOp)]:
            widen_fusion(fusion)
