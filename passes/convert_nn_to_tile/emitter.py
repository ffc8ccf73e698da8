"""Builds one `tile.kernel` from a fusion group, its iteration space and block sizes.

Algorithm:
1. parameters: each group input and output becomes a global buffer viewed with the
   sizes of the iteration dims it spans (a free reinterpretation of the host buffer);
2. the program id is split into one offset per iteration dim (row-major program order;
   matmul programs go in groups of GROUP_M rows of tiles for L2 reuse);
3. values are emitted on demand, memoized per context (depth first, on an explicit
   stack of suspended emissions, so a chain of any length nests no Python calls): an
   input is a masked
   `tile.load` at the context's offsets, an nn op is re-created on tiles (elementwise
   ops keep their nn name; `nn.broadcast` becomes `tile.broadcast`; `nn.take` becomes
   `tile.gather` from the input's buffer at the index tile's positions; squeeze-only
   reshapes are free; reductions become `tile.reduce` with out-of-bounds elements
   replaced by the identity); a value's tile has one dim per tiled iteration dim it spans;
   a value holding several parts of a split dim (slices/concats, `analysis`)
   is emitted part by part: part p of an input is the box at `p * part size` along
   that dim, a slice or concat picks parts, a reduction over the dim combines them;
4. schedules: pointwise and single-pass row reduction emit straight-line code; a
   looped row reduction runs one `scf.for` over column chunks per level of dependent
   reductions (accumulators as iter_args), then a last loop that stores full rows;
   a softmax's max and sum, or a mean and variance, share the first loop (online
   statistics, `online`), so such a kernel reads the row twice, not three times;
   matmul runs the K loop of `tile.dot` into an f32 accumulator (one per matmul of a
   dual GEMM, sharing the A tile), then the epilogue on it;
5. every group output is stored at its offsets, part by part (stores mask the ragged
   edges; blocks along a split dim divide the part size, so parts never overlap).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    StridedLayoutAttr,
    StringAttr,
    TensorType,
    f32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from fuseopt.dialects import nn, tile
from fuseopt.dialects.syntax import int_array, is_float
from fuseopt.passes.convert_nn_to_tile import online
from fuseopt.passes.convert_nn_to_tile.analysis import (
    ELEMENTWISE,
    MATMUL,
    REDUCTION,
    Group,
    IterationSpace,
    Untileable,
    shape,
)
from fuseopt.passes.convert_nn_to_tile.heuristics import Blocks, candidates, tiled_dims
from fuseopt.passes.convert_nn_to_tile.index_constants import IndexConstants
from fuseopt.passes.convert_nn_to_tile.matmul import emit_matmul
from fuseopt.passes.reduction_pairs import softmax_exponentials

REDUCE_KIND = {nn.SumOp: "sum", nn.MeanOp: "sum", nn.ReduceMaxOp: "max", nn.ReduceMinOp: "min"}
COMBINE = {"sum": nn.AddOp, "max": nn.MaxOp, "min": nn.MinOp}
DEFERRED_REDUCE_ELEMENTS = 8192
"""The largest input tile a looped reduction accumulates whole (`_defers`): 32 f32
registers a thread at 8 warps."""

Steps = Generator["Steps", SSAValue, SSAValue]
"""A suspended emission: yields the steps of each value it needs, is sent that value's
tile back, and returns its own tile (see `KernelEmitter._drive`)."""


@dataclass
class Context:
    """Where ops go and what is known: offsets per iteration dim, emitted tiles."""

    block: Block
    offsets: dict[int, SSAValue]
    cache: dict[tuple[SSAValue, int], SSAValue] = field(default_factory=dict)
    """Emitted tiles per (nn value, part)."""
    outer: Context | None = None
    masks: dict[tuple[int, ...], SSAValue] = field(default_factory=dict)


class KernelEmitter:
    """Emits the kernel of one group; `build()` returns it with its launch grid."""

    def __init__(
        self,
        name: str,
        group: Group,
        space: IterationSpace,
        blocks: Blocks,
        online_stats: bool = True,
        column_statistics: bool = True,
        row_cache_bytes: int = 0,
        exp2_sums: bool = True,
    ):
        self.name, self.group, self.space, self.blocks = name, group, space, blocks
        self.online_stats = online_stats
        self.column_statistics = column_statistics
        self.row_cache_bytes = row_cache_bytes
        self.tiled = set(tiled_dims(space))
        self.constants = IndexConstants()
        self.operands = {v for m in space.matmuls for v in (m.lhs, m.rhs)}
        self.varies = self._part_dependent()
        self.part_offsets: dict[tuple[SSAValue, int, int], SSAValue] = {}
        self.exp2_sums = exp2_sums
        self.summed_exps = softmax_exponentials(group.ops) if exp2_sums else set()

    def _part_dependent(self) -> set[SSAValue]:
        """Values whose tiles differ between parts of the split dim (a broadcast along
        the split dim, or a splat, is the same tile for every part; an index vector
        along it is not)."""
        sp, varies = self.space, set()
        for v in self.group.inputs:
            if sp.parts_of(v) > 1:
                varies.add(v)
        for op in self.group.ops:
            for r in op.results:
                index_vector = isinstance(op, nn.ConstantOp) and op.arange is not None
                if sp.parts_of(r) > 1 and (
                    isinstance(op, nn.ConcatOp)
                    or index_vector
                    or any(x in varies for x in op.operands)
                ):
                    varies.add(r)
        return varies

    # ------------------------------------------------------------------ types

    def tile_shape(self, v: SSAValue) -> list[int]:
        """The tile of `v`: one dim per tiled iteration dim it spans."""
        return [self.blocks.dims[d] for d in self.space.span(v) if d in self.tiled]

    def tile_type(self, v: SSAValue, element: Attribute | None = None) -> TensorType:
        """The tile type of `v` (optionally with another element type)."""
        t = v.type
        assert isinstance(t, TensorType)
        return TensorType(element or t.element_type, self.tile_shape(v))

    def view_type(self, v: SSAValue, operand: bool = True) -> MemRefType:
        """The kernel parameter type of group input/output `v` (`operand`: a matmul
        operand in the view its K loop reads, else the view pointwise loads read)."""
        t = v.type
        assert isinstance(t, TensorType)
        mm = self.space.matmul
        if operand and mm is not None and v in self.operands:
            return MemRefType(t.element_type, self.operand_view(v)[0])
        if v in self.space.gathered:  # read by address only: the buffer in its own shape
            return MemRefType(t.element_type, list(shape(v)) or [1])
        dims = [self.space.extent(v, d) for d in self.space.layout(v)] or [1]
        view = self.space.views.get(v)
        if view is not None:  # read in place: a strided view of the buffer passed
            strides, offset = view
            return MemRefType(t.element_type, dims, StridedLayoutAttr(list(strides), offset))
        return MemRefType(t.element_type, dims)

    def operand_view(self, v: SSAValue) -> tuple[list[int], list[int]]:
        """(view shape, batch dims) of a matmul operand: batch sizes then its last two."""
        sp = self.space
        batch = [d for d in sp.span(v) if d not in (sp.m_dim, sp.n_dim)]
        return [*(sp.sizes[d] for d in batch), *shape(v)[-2:]], batch

    def _read_by_epilogue(self, v: SSAValue) -> bool:
        """Whether an op of the group other than a matmul reads `v` as a tile (a take
        gathers from the operand's own parameter: any view keeps the flat order)."""
        ops = set(self.group.ops)
        return any(
            u.operation in ops and not isinstance(u.operation, nn.MatmulOp | nn.TakeOp)
            for u in v.uses
        )

    # ------------------------------------------------------------------ helpers

    def _memory_order(self, v: SSAValue) -> tuple[list[int], list[int] | None]:
        """The tiled dims of `v` in its buffer's axis order, and the permutation that
        takes a tile loaded in that order to the iteration order (None: the same)."""
        canonical = [d for d in self.space.span(v) if d in self.tiled]
        stored = [d for d in self.space.layout(v) if d in self.tiled]
        if stored == canonical:
            return stored, None
        return stored, [stored.index(d) for d in canonical]

    def index(self, n: int) -> SSAValue:
        """An index constant (hoisted to the kernel entry)."""
        return self.constants(n)

    @staticmethod
    def add(ctx: Context, op: Operation) -> SSAValue:
        """Append `op` to the context's block; return its first result."""
        ctx.block.add_op(op)
        return op.results[0]

    def splat(self, ctx: Context, value: float | int, t: TensorType) -> SSAValue:
        """A splat constant tile."""
        if is_float(t.element_type):
            value = float(value)
        return self.add(ctx, nn.ConstantOp(value, t))

    def cast(self, ctx: Context, x: SSAValue, element: Attribute) -> SSAValue:
        """`x` converted to `element` (no op when it already is)."""
        t = x.type
        assert isinstance(t, TensorType)
        if t.element_type == element:
            return x
        return self.add(ctx, nn.CastOp(x, TensorType(element, t.get_shape())))

    # ------------------------------------------------------------------ build

    def build(self) -> tuple[tile.KernelOp, list[int]]:
        """The kernel and its 1-D launch grid; `launch_inputs` then lists the nn values
        the launch passes before the outputs, one per input parameter."""
        g, sp = self.group, self.space
        # a matmul operand the epilogue also reads (A of K = 1 times its own broadcast,
        # say) is passed twice: once in the operand's view, once in the epilogue's
        twice = [v for v in g.inputs if v in self.operands and self._read_by_epilogue(v)]
        self.launch_inputs = [*g.inputs, *twice]
        params = [self.view_type(v) for v in g.inputs]
        params += [self.view_type(v, operand=False) for v in twice]
        params += [self.view_type(v) for v in g.outputs]
        kernel = tile.KernelOp(self.name, 1, params)
        self._annotate(kernel)
        entry = kernel.body.block
        n, k = len(self.launch_inputs), len(g.inputs)
        self.operand_params = dict(zip(g.inputs, entry.args[:k], strict=True))
        # what pointwise loads read: the epilogue's own parameter where there is one
        self.params = {**self.operand_params, **dict(zip(twice, entry.args[k:n], strict=True))}
        self.out_params = list(entry.args[n:])
        ctx = Context(entry, {})
        if sp.kind == MATMUL:
            grid = emit_matmul(self, ctx)
        else:
            grid = self._program_offsets(ctx)
            if sp.kind == REDUCTION and self.blocks.looped:
                self._looped_reduction(ctx)
            else:
                if sp.reduce_dim is not None:
                    ctx.offsets[sp.reduce_dim] = self.index(0)
                self.store(ctx, list(range(len(g.outputs))))
        entry.add_op(tile.ReturnOp())
        self.constants.hoist(entry)
        return kernel, [grid]

    def _annotate(self, kernel: tile.KernelOp) -> None:
        """Record the schedule, sizes and autotuning candidates on `kernel`."""
        sp, b = self.space, self.blocks
        schedule = (
            tile.Schedule(sp.kind)
            if sp.kind != REDUCTION
            else (tile.Schedule.ROW_REDUCTION_LOOPED if b.looped else tile.Schedule.ROW_REDUCTION)
        )
        kernel.schedule = StringAttr(schedule.value)
        kernel.iteration_sizes = int_array(sp.sizes)
        kernel.block_sizes = int_array([b.dims.get(d, 1) for d in range(len(sp.sizes))])
        if sp.kind == MATMUL:
            kernel.block_k = IntegerAttr(b.block_k, i64)
            kernel.group_m = IntegerAttr(b.group_m, i64)
        if sp.reduce_dim is not None:
            kernel.reduce_dim = IntegerAttr(sp.reduce_dim, i64)
        kernel.candidates = ArrayAttr(
            [
                DictionaryAttr({k: IntegerAttr(v, i64) for k, v in c.items()})
                for c in candidates(sp, b)
            ]
        )

    def blocks_along(self, d: int) -> int:
        """How many blocks cover iteration dim `d`."""
        return math.ceil(self.space.sizes[d] / self.blocks.dims.get(d, 1))

    def _program_offsets(self, ctx: Context) -> int:
        """Split program id 0 into per-dim offsets; return the number of programs."""
        sp = self.space
        dims = [d for d in range(len(sp.sizes)) if d != sp.reduce_dim]
        pid = self.add(ctx, tile.ProgramIdOp(0))
        remaining = self._grid_size(dims)
        for d in reversed(dims):
            n = self.blocks_along(d)
            if n == 1:
                ctx.offsets[d] = self.index(0)
                continue
            if remaining == n:  # the slowest dim left: the quotient is the index
                idx = pid
            else:
                idx = self.add(ctx, arith.RemSIOp(pid, self.index(n)))
                pid = self.add(ctx, arith.DivSIOp(pid, self.index(n)))
            remaining //= n
            ctx.offsets[d] = self.scaled(ctx, idx, self.blocks.dims.get(d, 1))
        return self._grid_size(dims)

    def _grid_size(self, dims: list[int]) -> int:
        return math.prod(self.blocks_along(d) for d in dims)

    def scaled(self, ctx: Context, idx: SSAValue, block: int) -> SSAValue:
        """`idx * block` (the offset of block `idx`), emitted in `ctx`."""
        return idx if block == 1 else self.add(ctx, arith.MuliOp(idx, self.index(block)))

    # ------------------------------------------------------------------ values

    def emit(self, v: SSAValue, ctx: Context, part: int = 0) -> SSAValue:
        """The tile of nn value `v` (its part `part` along the split dim) in `ctx`,
        emitting what it needs."""
        return self._drive(self._emit_steps(v, ctx, part))

    @staticmethod
    def _drive(steps: Steps) -> SSAValue:
        """Run `steps` to its result, emitting each value it asks for first.

        Emission is recursive in the operands (a value needs its operands' tiles), but
        a chain of thousands of ops must not nest Python calls that deep: each request
        is a generator on an explicit stack, resumed with the tile it asked for, so ops
        come out in the same order as a depth-first recursion would give."""
        stack = [steps]
        value: SSAValue | None = None
        while True:
            try:
                request = stack[-1].send(value)
            except StopIteration as done:
                stack.pop()
                value = done.value
                if not stack:
                    assert value is not None
                    return value
                continue
            stack.append(request)
            value = None

    def _emit_steps(self, v: SSAValue, ctx: Context, part: int) -> Steps:
        """`emit` as steps (see `_drive`): yields the emission of each value it needs."""
        if v not in self.varies:
            part = 0
        key = (v, part)
        if key in ctx.cache:
            return ctx.cache[key]
        sp = self.space
        if ctx.outer is not None and sp.reduce_dim not in sp.span(v):
            ctx.cache[key] = yield self._emit_steps(v, ctx.outer, part)
            return ctx.cache[key]
        if v in self.params:
            offsets = self.offsets(ctx, v, part)
            stored, perm = self._memory_order(v)
            box = [self.blocks.dims[d] for d in stored]
            result = self.add(ctx, tile.LoadOp(self.params[v], offsets, box))
            if perm is not None:  # a transposed input: into the iteration order
                result = self.add(ctx, tile.TransposeOp(result, perm))
        else:
            op = v.owner
            assert isinstance(op, Operation)
            result = yield from self._lower_steps(op, ctx, part)
        ctx.cache[key] = result
        return result

    def offsets(self, ctx: Context, v: SSAValue, part: int) -> list[SSAValue]:
        """Where the tile of group input/output `v` (part `part`) sits in its buffer."""
        sp = self.space
        offsets = []
        for d in sp.layout(v):
            off = ctx.offsets[d]
            if d == sp.split_dim and part:
                key = (off, part, id(ctx.block))
                if key not in self.part_offsets:
                    shift = arith.AddiOp(off, self.index(part * sp.sizes[d]))
                    self.part_offsets[key] = self.add(ctx, shift)
                off = self.part_offsets[key]
            offsets.append(off)
        return offsets or [self.index(0)]

    def _operand_part(self, op: Operation, part: int) -> list[tuple[SSAValue, int]]:
        """(operand, part) pairs that part `part` of `op`'s result reads: a slice along
        the split dim reads the operand's part at its start, a concat the operand
        holding that part; other ops read the same part of every operand."""
        sp = self.space
        if isinstance(op, nn.SliceOp):
            x = op.operands[0]
            cut = [
                lo
                for i, (lo, hi, st) in enumerate(op.bounds)
                if (lo, hi, st) != (0, shape(x)[i], 1)
            ]
            if cut and sp.split_dim is not None:
                return [(x, cut[0] // sp.sizes[sp.split_dim] + part)]
        if isinstance(op, nn.ConcatOp) and sp.parts_of(op.results[0]) > 1:
            for x in op.operands:
                if part < sp.parts_of(x):
                    return [(x, part)]
                part -= sp.parts_of(x)
            raise AssertionError("concat part out of range")
        return [(x, part) for x in op.operands]

    def _lower_steps(self, op: Operation, ctx: Context, part: int) -> Steps:
        """Re-create `op` on tiles (steps: yields the emission of its operands)."""
        r = op.results[0]
        t = r.type
        assert isinstance(t, TensorType)
        if isinstance(op, nn.ConstantOp):
            value = op.splat_value
            if value is not None:
                return self.splat(ctx, value, self.tile_type(r))
            arange = op.arange  # an index vector: computed from the tile's position
            assert arange is not None
            (offset,) = self.offsets(ctx, r, part)
            return self.add(ctx, tile.IotaOp(offset, *arange, self.tile_type(r)))
        if isinstance(op, nn.TakeOp):  # any view of the input has its flat order
            index = yield self._emit_steps(op.index, ctx, part)
            return self.add(ctx, tile.GatherOp(self.params[op.input], index))
        if isinstance(op, nn.ReductionOp) and self.space.reduce_dim in self.space.span(
            op.operands[0]
        ):
            partial = yield from self._reduce_parts_steps(op, ctx, part)
            return self._finish_reduce(op, partial, ctx)
        xs = []
        for x, p in self._operand_part(op, part):
            xs.append((yield self._emit_steps(x, ctx, p)))
        if isinstance(op, nn.SliceOp | nn.ConcatOp | nn.TransposeOp):
            return xs[0]  # tiles are in iteration order: a transpose only moves loads
        if op in self.summed_exps:
            return self.summed_exp(ctx, xs[0])
        if isinstance(op, ELEMENTWISE):
            new = type(op).build(
                operands=xs, result_types=[self.tile_type(r)], attributes=dict(op.attributes)
            )
            return self.add(ctx, new)
        if isinstance(op, nn.ReshapeOp):
            return xs[0]
        if isinstance(op, nn.BroadcastOp):
            return self._broadcast(ctx, xs[0], op.operands[0], r)
        if isinstance(op, nn.ReductionOp):  # over unit or untiled axes only
            return xs[0]
        raise Untileable(op, f"{op.name} cannot be lowered here")

    def summed_exp(self, ctx: Context, x: SSAValue) -> SSAValue:
        """`exp(x)` of an f32 tile whose terms are only added up (a softmax's sum of
        exponentials): `exp2(x * log2(e))`, see `reduction_pairs.softmax_exponentials`."""
        t = x.type
        assert isinstance(t, TensorType)
        log2e = self.splat(ctx, math.log2(math.e), t)
        return self.add(ctx, nn.Exp2Op(self.add(ctx, nn.MulOp(x, log2e))))

    def _broadcast(
        self,
        ctx: Context,
        x: SSAValue,
        src: SSAValue,
        dst: SSAValue,
        element: Attribute | None = None,
    ) -> SSAValue:
        """Tile `x` (of nn value `src`'s dims) broadcast to `dst`'s tile, in `dst`'s
        element type or `element`."""
        src_dims = [d for d in self.space.span(src) if d in self.tiled]
        dst_dims = [d for d in self.space.span(dst) if d in self.tiled]
        if src_dims == dst_dims:
            return x
        positions = [dst_dims.index(d) for d in src_dims]
        return self.add(ctx, tile.BroadcastOp(x, positions, self.tile_type(dst, element)))

    # ------------------------------------------------------------------ reductions

    def _acc_element(self, element: Attribute) -> Attribute:
        return f32 if is_float(element) else i64

    def _identity(self, kind: str, element: Attribute) -> float | int:
        """The identity of reduction `kind` in its accumulator (f32 or i64): the max of
        integers starts at INT64_MIN, which a column of INT64_MIN must be able to equal."""
        if kind == "sum":
            return 0
        if is_float(element):
            return -math.inf if kind == "max" else math.inf
        return -(2**63) if kind == "max" else 2**63 - 1

    def _reduce_parts(self, op: nn.ReductionOp, ctx: Context, part: int) -> SSAValue:
        """This context's partial reduction for part `part` of `op`'s result: over every
        part of the input when the reduce dim is the split dim, else over the same part."""
        return self._drive(self._reduce_parts_steps(op, ctx, part))

    def _reduce_parts_steps(self, op: nn.ReductionOp, ctx: Context, part: int) -> Steps:
        """`_reduce_parts` as steps (see `_drive`)."""
        sp, x = self.space, op.operands[0]
        if sp.reduce_dim != sp.split_dim or sp.parts_of(x) == 1:
            tile_x = yield self._emit_steps(x, ctx, part)
            return self._partial_reduce(op, tile_x, ctx)
        combine = COMBINE[REDUCE_KIND[type(op)]]
        total = self._partial_reduce(op, (yield self._emit_steps(x, ctx, 0)), ctx)
        for q in range(1, sp.parts_of(x)):
            partial = self._partial_reduce(op, (yield self._emit_steps(x, ctx, q)), ctx)
            total = self.add(ctx, combine(total, partial))
        return total

    def _partial_reduce(self, op: nn.ReductionOp, x: SSAValue, ctx: Context) -> SSAValue:
        """Reduce this context's tile of `op`'s input along the reduce dim (masked)."""
        x, axis = self._reduction_input(op, x, ctx)
        return self.add(ctx, tile.ReduceOp(REDUCE_KIND[type(op)], x, axis))

    def _defers(self, op: nn.ReductionOp) -> bool:
        """Whether a looped reduction accumulates whole tiles and reduces once after the
        loop (Inductor's scheme): each iteration is then loads and elementwise combines,
        no cross-thread reduction; kept to tiles small enough for the accumulator to
        stay in registers, and to results of one part."""
        src = op.operands[0]
        return (
            self.space.parts_of(src) == 1
            and self.space.parts_of(op.results[0]) == 1
            and math.prod(self.tile_shape(src)) <= DEFERRED_REDUCE_ELEMENTS
        )

    def _reduction_input(
        self, op: nn.ReductionOp, x: SSAValue, ctx: Context
    ) -> tuple[SSAValue, int]:
        """This context's tile of `op`'s input ready to reduce (out-of-bounds elements
        replaced by the identity, in the accumulator's type) and the tile axis of the
        reduce dim."""
        src = op.operands[0]
        kind = REDUCE_KIND[type(op)]
        xt = x.type
        assert isinstance(xt, TensorType)
        mask = self.chunk_mask(src, ctx)
        if mask is not None:
            ident = self.splat(ctx, self._identity(kind, xt.element_type), xt)
            x = self.add(ctx, nn.SelectOp(mask, x, ident))
        return self.cast(ctx, x, self._acc_element(xt.element_type)), self.reduce_axis(src)

    def reduce_axis(self, v: SSAValue) -> int:
        """The axis of the reduce dim in `v`'s tile."""
        k = self.space.reduce_dim
        assert k is not None
        return [d for d in self.space.span(v) if d in self.tiled].index(k)

    def chunk_mask(self, v: SSAValue, ctx: Context, last: bool = False) -> SSAValue | None:
        """Which elements of this context's tile of `v` are inside the reduce dim (None
        when the block divides it): one mask per tile shape and context; with `last`,
        those of the last (ragged) chunk, wherever `ctx` is."""
        sp, k = self.space, self.space.reduce_dim
        assert k is not None
        block = self.blocks.dims[k]
        if not sp.sizes[k] % block:
            return None
        shape_key = tuple(self.tile_shape(v))
        mask = None if last else ctx.masks.get(shape_key)
        if mask is None:
            tiled = [d for d in sp.span(v) if d in self.tiled]
            offsets = dict(ctx.offsets)
            if last:
                offsets[k] = self.index((sp.sizes[k] - 1) // block * block)
            mask = self.add(
                ctx,
                tile.MaskOp(
                    [offsets[d] for d in tiled], [sp.sizes[d] for d in tiled], self.tile_shape(v)
                ),
            )
            if not last:
                ctx.masks[shape_key] = mask
        return mask

    def _finish_reduce(self, op: nn.ReductionOp, total: SSAValue, ctx: Context) -> SSAValue:
        """The reduction's value from its accumulated total (mean divides; then round)."""
        t = total.type
        assert isinstance(t, TensorType)
        if isinstance(op, nn.MeanOp):
            src = shape(op.operands[0])
            n = math.prod(src[a] for a in op.axis_list)
            count = self.splat(ctx, float(n), t)
            total = self.add(ctx, nn.DivOp(total, count))
        rt = op.results[0].type
        assert isinstance(rt, TensorType)
        return self.cast(ctx, total, rt.element_type)

    def _looped_reduction(self, outer: Context) -> None:
        """One scf.for over column chunks per level of dependent reductions, then a
        last loop that stores the full-row outputs; per-row outputs are stored after."""
        sp, k = self.space, self.space.reduce_dim
        assert k is not None
        phases = online.reduction_phases(sp, self.group.ops)
        pairs = []
        # Online statistics along rows merge each chunk's partial reductions, a
        # cross-thread reduction per iteration; across columns (the reduce dim not
        # innermost) two passes of whole-tile accumulation (`_defers`) cost one more
        # read and no such reduction, which is faster. A per-lane variance (Welford,
        # `online.per_lane`) has neither cost, and joins the first loop either way; a
        # per-lane argmax joins it across columns only (`online.merges`).
        innermost = k == len(sp.sizes) - 1
        online_ok = self.online_stats and not online.rows_fit_cache(self)
        if online_ok and sp.split_dim is None and 0 in phases and 1 in phases:
            # statistics in one pass: a softmax's sum or a variance joins the first loop
            pairs = [
                p
                for p in online.online_pairs(phases[0], phases[1])
                if online.merges(self, p, innermost)
            ]
            merged = {id(p.second) for p in pairs}
            phases[1] = [r for r in phases[1] if id(r) not in merged]
            if not phases[1]:
                del phases[1]
        for lv in sorted(phases):
            # one accumulator per reduction and part of its result
            accs = [(r, q) for r in phases[lv] for q in range(sp.parts_of(r.results[0]))]
            lv_pairs = pairs if lv == 0 else []
            paired = {id(p.first) for p in lv_pairs} | online.absorbed(self, lv_pairs)
            accs = [(r, q) for r, q in accs if id(r) not in paired]
            inits = []
            deferred = {id(r) for r, _ in accs if self._defers(r)}
            for r, _ in accs:
                rt = self.tile_type(r.results[0])
                if id(r) in deferred:  # the accumulator is a whole input tile
                    rt = self.tile_type(r.operands[0])
                acc_t = TensorType(self._acc_element(rt.element_type), rt.get_shape())
                inits.append(
                    self.splat(
                        outer, self._identity(REDUCE_KIND[type(r)], acc_t.element_type), acc_t
                    )
                )
            widths = []
            for pair in lv_pairs:
                pair_inits = online.initial(self, outer, pair)
                widths.append(len(pair_inits))
                inits.extend(pair_inits)
            body = Block(arg_types=[IndexType(), *(i.type for i in inits)])
            inner = Context(body, {**outer.offsets, k: body.args[0]}, outer=outer)
            new_accs = []
            axes: dict[int, int] = {}
            for (r, q), acc in zip(accs, body.args[1:], strict=False):
                if id(r) in deferred:
                    x = self.emit(r.operands[0], inner, q)
                    part, axes[id(r)] = self._reduction_input(r, x, inner)
                else:
                    part = self._reduce_parts(r, inner, q)
                new_accs.append(self.add(inner, COMBINE[REDUCE_KIND[type(r)]](acc, part)))
            at = 1 + len(accs)
            for pair, n in zip(lv_pairs, widths, strict=True):
                new_accs.extend(online.update(self, inner, pair, list(body.args[at : at + n])))
                at += n
            body.add_op(scf.YieldOp(*new_accs))
            loop = self._loop(outer, body, inits)
            for (r, q), total in zip(accs, loop.results, strict=False):
                if id(r) in deferred:
                    kind = REDUCE_KIND[type(r)]
                    total = self.add(outer, tile.ReduceOp(kind, total, axes[id(r)]))
                outer.cache[(r.results[0], q)] = self._finish_reduce(r, total, outer)
            at, finished = len(accs), []
            for pair, n in zip(lv_pairs, widths, strict=True):
                finished.append((pair, list(loop.results[at : at + n])))
                at += n
            online.finish_all(self, outer, finished)
        full = [i for i, v in enumerate(self.group.outputs) if k in sp.span(v)]
        rows = [i for i, v in enumerate(self.group.outputs) if k not in sp.span(v)]
        if full:
            body = Block(arg_types=[IndexType()])
            inner = Context(body, {**outer.offsets, k: body.args[0]}, outer=outer)
            self.store(inner, full)
            body.add_op(scf.YieldOp())
            self._loop(outer, body, [])
        self.store(outer, rows)

    def _loop(self, ctx: Context, body: Block, inits: list[SSAValue]) -> scf.ForOp:
        k = self.space.reduce_dim
        assert k is not None
        step = self.blocks.dims[k]
        loop = scf.ForOp(
            self.index(0), self.index(self.space.sizes[k]), self.index(step), inits, body
        )
        ctx.block.add_op(loop)
        return loop

    def store(self, ctx: Context, outputs: list[int]) -> None:
        """Store group outputs `outputs` (indices) at their offsets, part by part."""
        for i in outputs:
            v = self.group.outputs[i]
            for part in range(self.space.parts_of(v)):
                value = self.emit(v, ctx, part)
                offsets = self.offsets(ctx, v, part)
                stored, perm = self._memory_order(v)
                if perm is not None:  # a transposed output: into its buffer's order
                    canonical = [stored[p] for p in perm]
                    back = [canonical.index(d) for d in stored]
                    value = self.add(ctx, tile.TransposeOp(value, back))
                ctx.block.add_op(tile.StoreOp(value, self.out_params[i], offsets))
