"""`convert-nn-to-tile`: tile every fusion group into a `tile.kernel` and turn each
function into host code that allocates buffers and launches the kernels.

Preconditions: composites are decomposed (nn-decompose) and shapes are static. After
the pass no nn op is left outside a kernel, and the pass checks that.

Host calling convention (what the backends' launchers implement):
- a function `@f(%x: tensor<A>, ...) -> (tensor<R>, ...)` becomes
  `@f(%x: memref<A>, ..., %out0: memref<R> {tile.output}, ...)` returning nothing:
  inputs are read-only global buffers, every result is written into a caller-provided
  out-param buffer (marked `{tile.output}`), in result order;
- intermediates between kernels are `tile.alloc` global temporaries (freed by the
  runtime after the call); a kernel writes a returned value straight into its
  out-param; a returned input, or a value returned twice, is copied by a copy kernel;
- `tile.launch @k grid [n] (ins..., outs...)` passes each group's inputs, then its
  outputs; a buffer may be passed with another shape of the same element count (a
  free row-major view), and kernels see it with the shape of their iteration space.

Lowering of groups:
- each `nn.fusion` is one group; each nn op left outside a fusion is a group of its
  own, except shape-only `nn.reshape`, which is a host-side `tile.view` (no copy), and
  `nn.matmul`, which calls `tile.gemm` (nn-fuse bypassed it: the library GEMM, as eager),
  and an `nn.broadcast` read only by unfused elementwise ops, which joins each of their
  kernels as indexing (no buffer, no kernel of its own);
- `route = "library_gemm"` fusions call `tile.gemm` (taking a bias add into the
  library's epilogue: `gemm_bias.py`) and tile the rest of the epilogue alone;
- nn-fuse only forms groups that fit one iteration space (`legality`), so each
  of its fusions is one kernel; a hand-written fusion that does not fit (see
  `analysis`) is split into runs of consecutive ops that do
  (`tileable_subgroups`), one kernel each; a single matmul that does not tile
  (matrix-vector) calls `tile.gemm`; a single op that does not tile (transpose,
  strided slice, a concat of pieces with no common part size, a regrouping reshape)
  is a one-program `whole_tensor` kernel (both backends print these specially),
  except `nn.cumsum`, a `scan` kernel (`scan.py`) where the target prints one;
  anything else is a located error; unit-step slices and concats inside a group are
  indexed (split dims, see `analysis`), not split off;
- schedules, tile sizes and autotuning candidates: `emitter` and
  `heuristics`; sizes can be forced with the options below (powers of two).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    TensorType,
    UnitAttr,
    f32,
)
from xdsl.ir import Block, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass

from fuseopt.diagnostics import CompileError, error_at
from fuseopt.dialects import nn, tile
from fuseopt.dialects.dtypes import element_bytes
from fuseopt.identifiers import unique_name
from fuseopt.passes.convert_nn_to_tile.analysis import (
    AmbiguousDomain,
    AxisSummary,
    Group,
    IterationSpace,
    Untileable,
    analyze,
    shape,
)
from fuseopt.passes.convert_nn_to_tile.attention import (
    AttentionPlan,
    attention_kernel,
    attention_schedule_refusal,
    attention_shapes,
    combine_kernel,
    plan_attention,
    seq_major_shape,
    sequence_major_operands,
)
from fuseopt.passes.convert_nn_to_tile.emitter import KernelEmitter
from fuseopt.passes.convert_nn_to_tile.gemm_bias import match_gemm_bias
from fuseopt.passes.convert_nn_to_tile.heuristics import (
    MAX_TILE_ELEMENTS,
    Blocks,
    TileOptions,
    choose_blocks,
    group_options,
    largest_tile,
)
from fuseopt.passes.convert_nn_to_tile.scan import scan_launches
from fuseopt.passes.convert_nn_to_tile.strided_views import (
    StridedView,
    peel_input_reshapes,
    reads_in_place,
    reshape_view,
    slice_view,
)
from fuseopt.passes.convert_nn_to_tile.whole_tensor import whole_tensor_kernel

MAX_GRID = 2**31 - 1
"""Most programs in one launch (CUDA's grid.x limit)."""
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


@dataclass(frozen=True)
class ConvertNNToTilePass(TileOptions, ModulePass):
    """Tile nn.fusion groups into tile.kernels; functions become buffer-passing host code.

    Options force tile sizes (powers of two): `block` (flat pointwise), `block-rows` /
    `block-cols` (2-D pointwise, row reductions: rows per program, row block or chunk),
    `block-m` / `block-n` / `block-k` / `group-m` (matmul), `attention-block-m` /
    `attention-block-n` (the most queries per tile and keys per step of an attention
    kernel: fewer for shorter sequences, both halved for head dims above 128),
    `attention-query-tiles` (independent query tiles per attention program; default:
    `attention.takes_query_tiles`' choice),
    `max-row-block` (longest
    row kept whole before a reduction loops over chunks), `row-chunk` (the chunk such a
    loop reads per step, default 2048), `statistics-row-block` / `statistics-row-chunk`
    (the same two for a kernel computing a normalization's mean and variance, the
    first also for one storing only a softmax's per-row statistics; default: as other
    rows; `heuristics.group_options`), `column-statistics` (false: a variance over a
    non-innermost dim keeps a loop per level instead of accumulating per lane in one),
    `online-stats` (false: a
    looped softmax or variance keeps one loop per reduction level instead of computing
    its statistics in one pass; see `online`), `row-cache-bytes` (the shared
    memory a backend's row cache will hold per program, 0 for none: a looped reduction
    whose rows fit keeps one loop per level, since the cache makes re-reads cheap),
    `scan` (false: `nn.cumsum` is a whole-tensor kernel instead of a scan, `scan.py`),
    `exp2-sums` (false: a softmax's exponentials that a kernel only sums stay `exp`
    instead of `exp2` of the deviation in base 2).
    """

    name = "convert-nn-to-tile"

    # the options are TileOptions' fields (heuristics.py), declared there once

    def options(self) -> TileOptions:
        """The forced sizes as TileOptions (a CompileError when one is invalid)."""
        opts = TileOptions(**{f.name: getattr(self, f.name) for f in fields(TileOptions)})
        try:
            opts.check()
        except ValueError as e:
            raise CompileError(f"convert-nn-to-tile: {e}") from None
        return opts

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        opts = self.options()
        names = {o.sym_name.data for o in op.ops if isinstance(o, func.FuncOp | tile.KernelOp)}
        for f in [o for o in op.ops if isinstance(o, func.FuncOp)]:
            if _needs_lowering(f):
                HostLowering(op, f, opts, names).run()


def _whole_tensor_ok(op: Operation) -> bool:
    """Can `op` run as a whole-tensor kernel (one nn op with static tensor types)?"""
    values = [*op.operands, *op.results]
    return (
        op.dialect_name() == "nn"
        and len(op.results) == 1
        and not isinstance(op, (nn.FusionOp, nn.YieldOp, *nn.COMPOSITE_OPS))
        and all(
            isinstance(v.type, TensorType) and all(d >= 0 for d in v.type.get_shape())
            for v in values
        )
    )


def contiguous_slice_offset(op: nn.SliceOp) -> int | None:
    """Where `op`'s result starts in its operand's row-major buffer, in elements, when
    the result is one contiguous run of that buffer (unit steps; every dim after the
    last one it cuts is whole, every dim before that keeps one index: `x[:, 1:]` of a
    1 x n tensor, rows `x[2:5]` or part of one row `x[1, 2:5]` of a matrix); else None.
    The host takes such a slice as a view only when its start is 16-byte aligned:
    kernels are specialized for aligned pointers (Triton's divisibility specialization,
    the CUDA backend's vector loads), so a misaligned view would cost a slower launch
    path or narrower loads on every call, more than the one-program copy it saves."""
    shape = [int(n) for n in op.input.type.get_shape()]  # type: ignore[union-attr]
    bounds = list(op.bounds)
    if any(step != 1 for _, _, step in bounds):
        return None
    cuts = [i for i, (lo, hi, _) in enumerate(bounds) if (lo, hi) != (0, shape[i])]
    if cuts and any(hi - lo != 1 for lo, hi, _ in bounds[: cuts[-1]]):
        return None
    offset, stride = 0, 1
    for i in reversed(range(len(shape))):
        offset += bounds[i][0] * stride
        stride *= shape[i]
    return offset


def _view_broadcasts(block: Block, returned: set[SSAValue]) -> set[Operation]:
    """The unfused `nn.broadcast` ops that need no buffer: every user is an unfused
    elementwise op, which reads the broadcast as indexing in its own kernel (eager PyTorch
    broadcasts by strides; materializing it would be a kernel and a tensor more)."""
    elementwise = (*nn.UNARY_OPS, *nn.BINARY_OPS, nn.CompareOp, nn.SelectOp, nn.CastOp)
    found: set[Operation] = set()
    for op in block.ops:
        if not isinstance(op, nn.BroadcastOp) or op.result in returned:
            continue
        if op.input.owner in found or not op.result.uses:
            continue
        if all(isinstance(u.operation, elementwise) for u in op.result.uses):
            found.add(op)
    return found


def _reshaped_outputs(
    block: Block, out_param: dict[SSAValue, SSAValue], view_broadcasts: set[Operation]
) -> dict[SSAValue, SSAValue]:
    """Values returned only through a reshape, mapped to that reshape's out-param:
    the op computing such a value writes it into the out-param viewed in its shape, so
    the reshape costs nothing (a copy kernel otherwise). Only values a kernel or call
    computes into a buffer of their own qualify: not arguments, views (reshapes, view
    broadcasts) or values returned themselves."""
    found: dict[SSAValue, SSAValue] = {}
    claimed: set[SSAValue] = set()
    for op in block.ops:
        if not isinstance(op, nn.ReshapeOp) or op.result not in out_param:
            continue
        source, param = op.input, out_param[op.result]
        producer = source.owner
        if (
            not isinstance(producer, Operation)
            or isinstance(producer, nn.ReshapeOp)
            or producer in view_broadcasts
            or source in out_param
            or source in found
            or param in claimed
        ):
            continue
        found[source] = param
        claimed.add(param)
    return found


def _needs_lowering(f: func.FuncOp) -> bool:
    types = [*f.function_type.inputs.data, *f.function_type.outputs.data]
    if any(isinstance(t, TensorType) for t in types):
        return True
    return any(o.dialect_name() == "nn" for o in f.walk())


class HostLowering:
    """Rewrites one function: kernels go into the module, the body becomes host code."""

    def __init__(self, module: ModuleOp, f: func.FuncOp, opts: TileOptions, names: set[str]):
        self.module, self.f, self.opts, self.names = module, f, opts, names
        self.buffers: dict[SSAValue, SSAValue] = {}
        self.block = Block()
        self.view_broadcasts: set[Operation] = set()
        self.strided: dict[SSAValue, StridedView] = {}
        """Unfused slices read in place (`strided_views`): no buffer of their own."""

    # ------------------------------------------------------------------ driver

    def run(self) -> None:
        f = self.f
        if f.body.blocks.first is None:
            raise error_at(f, "convert-nn-to-tile: function declarations are not lowered")
        old = f.body.block
        ins, outs = f.function_type.inputs.data, f.function_type.outputs.data
        types = [self._memref(t, f, f"argument {i}") for i, t in enumerate(ins)]
        types += [self._memref(t, f, f"result {i}") for i, t in enumerate(outs)]
        self.block = Block(arg_types=types)
        args = self.block.args
        self.buffers = dict(zip(old.args, args[: len(ins)], strict=True))
        ret = old.last_op
        if not isinstance(ret, func.ReturnOp):
            raise error_at(f, "convert-nn-to-tile: the function must end in func.return")
        self.out_param: dict[SSAValue, SSAValue] = {}
        for v, p in zip(ret.arguments, args[len(ins) :], strict=True):
            self.out_param.setdefault(v, p)
        self.written_params: set[SSAValue] = set()
        """Out-params that already hold a value (a set: a dict of buffers scanned per
        result was quadratic in a function with thousands of results)."""
        self.view_broadcasts = _view_broadcasts(old, set(self.out_param))
        self.reshaped_outputs = _reshaped_outputs(old, self.out_param, self.view_broadcasts)
        self.seq_major = sequence_major_operands(old, self._attention_plan)
        self.absorbed = {
            o for roles in self.seq_major.values() for read in roles.values() for o in read.ops
        }
        """Head transposes an attention kernel reads or writes through, and the reshapes and
        column slices it reads past (never lowered)."""
        for op in list(old.ops):
            self._lower_top(op)
        for v, p in zip(ret.arguments, args[len(ins) :], strict=True):
            if self.buffers[v] is not p:
                self._group(Group([], [v], [v]), {v: self.buffers[v]}, {v: p}, "copy")
        self.block.add_op(func.ReturnOp())
        f.body.detach_block(old)
        old.erase(safe_erase=False)
        f.body.add_block(self.block)
        f.function_type = FunctionType.from_lists(types, [])
        attrs = [DictionaryAttr({}) for _ in ins] + [
            DictionaryAttr({tile.OUTPUT_ATTR: UnitAttr()}) for _ in outs
        ]
        f.arg_attrs = ArrayAttr(attrs)
        f.res_attrs = None

    @staticmethod
    def _memref(t: object, f: func.FuncOp, what: str) -> MemRefType:
        if not isinstance(t, TensorType) or any(d < 0 for d in t.get_shape()):
            raise error_at(f, f"convert-nn-to-tile: {what} must be a static tensor, got {t}")
        return MemRefType(t.element_type, t.get_shape())

    def _lower_top(self, op: Operation) -> None:
        if isinstance(op, func.ReturnOp) or op in self.absorbed:
            return
        if isinstance(op, nn.FusionOp):
            block = op.body.block
            ops = [o for o in block.ops if not isinstance(o, nn.YieldOp)]
            yielded = block.last_op
            assert isinstance(yielded, nn.YieldOp)
            used = {x for o in ops for x in o.operands} | set(yielded.values)
            group = Group(ops, [a for a in block.args if a in used], list(yielded.values))
            pairs = [(a, x) for a, x in zip(block.args, op.inputs, strict=True) if a in used]
            ins, views = self._inputs(pairs)
            outs: dict[SSAValue, SSAValue] = {}
            for inner, r in zip(yielded.values, op.outputs, strict=True):
                if inner not in outs:
                    outs[inner] = self._result_buffer(r)
                self.buffers[r] = outs[inner]
            hint = op.kernel_name.data if op.kernel_name is not None else "fused"
            if op.route_kind == nn.Route.LIBRARY_GEMM:
                self._library_gemm(group, ins, outs, hint)
            else:
                self._group(group, ins, outs, hint, views)
            for inner, r in zip(yielded.values, op.outputs, strict=True):
                if self.buffers[r] is not outs[inner]:  # pragma: no cover - defensive
                    raise error_at(op, "convert-nn-to-tile: inconsistent output buffers")
            return
        if isinstance(op, nn.COMPOSITE_OPS):
            raise error_at(
                op, f"convert-nn-to-tile: run nn-decompose first ({op.name} is a composite)"
            )
        if isinstance(op, nn.TorchCallOp):
            self._torch_call(op)
            return
        if isinstance(op, nn.AttentionOp):
            self._attention(op)
            return
        if op.dialect_name() != "nn":
            raise error_at(op, f"convert-nn-to-tile: cannot lower {op.name} on the host")
        r = op.results[0]
        if isinstance(op, nn.ReshapeOp) and op.input in self.strided and r not in self.out_param:
            view = reshape_view(op, self.strided[op.input])
            if view is not None:  # a reshape of a slice read in place: one view
                self.strided[r] = view
                return
            self._materialized(op.input)
        if isinstance(op, nn.ReshapeOp) and self._reshape_is_written(op):
            self.buffers[r] = self.out_param[r]  # its operand was computed into it
            return
        if isinstance(op, nn.ReshapeOp) and r not in self.out_param:
            t = r.type
            assert isinstance(t, TensorType)
            view = tile.ViewOp(
                self.buffers[op.operands[0]], MemRefType(t.element_type, t.get_shape())
            )
            self.block.add_op(view)
            self.buffers[r] = view.result
            return
        if isinstance(op, nn.SliceOp) and r not in self.out_param:
            if not r.uses:
                return  # read by nothing
            base = self.strided.get(op.input)
            in_place = reads_in_place(op, self.view_broadcasts, slice_view(op, base))
            if in_place and base is not None:  # a slice of a view: one view
                self.strided[r] = slice_view(op, base)
                return
            source = self._materialized(op.input)
            offset = contiguous_slice_offset(op)
            t = r.type
            assert isinstance(t, TensorType)
            aligned = offset is not None and offset * element_bytes(t.element_type) % 16 == 0
            if aligned:  # a run of the operand's elements, 16-byte aligned: no copy
                view = tile.ViewOp(source, MemRefType(t.element_type, t.get_shape()), offset)
                self.block.add_op(view)
                self.buffers[r] = view.result
                return
            if in_place:
                self.strided[r] = slice_view(op, None)
                return
        if op in self.view_broadcasts:
            return  # read as indexing by each elementwise user (see `_view_broadcasts`)
        if isinstance(op, nn.MatmulOp):
            # nn-fuse left it unfused (bypassed): what eager runs, the library's GEMM.
            self.buffers[r] = self._result_buffer(r)
            self._gemm(op, {x: self.buffers[x] for x in op.operands}, self.buffers[r])
            return
        ops: list[Operation] = []
        inputs: list[SSAValue] = []
        for x in op.operands:
            producer = x.owner
            if isinstance(producer, nn.BroadcastOp) and producer in self.view_broadcasts:
                if producer not in ops:
                    ops.append(producer)
                inputs.append(producer.input)
            else:
                inputs.append(x)
        inputs = list(dict.fromkeys(inputs))
        self.buffers[r] = self._result_buffer(r)
        group = Group([*ops, op], inputs, [r])
        ins, views = self._inputs([(x, x) for x in inputs])
        outs = {r: self.buffers[r]}
        if isinstance(op, nn.TransposeOp):
            # a lone transpose is a copy: the whole-tensor kernel each backend prints as
            # its own tuned copy (PyTorch's on Triton, element-parallel on CUDA); the
            # tiler indexes transposes inside fused groups
            self._whole_tensor(op, ins, outs, self._hint(op))
            return
        self._group(group, ins, outs, self._hint(op), views)

    def _inputs(
        self, pairs: Sequence[tuple[SSAValue, SSAValue]]
    ) -> tuple[dict[SSAValue, SSAValue], dict[SSAValue, StridedView]]:
        """For (group input, nn value) pairs: the buffer each input is passed, and the
        inputs that are strided views of theirs (unfused slices read in place)."""
        ins: dict[SSAValue, SSAValue] = {}
        views: dict[SSAValue, StridedView] = {}
        for inner, x in pairs:
            view = self.strided.get(x)
            if view is None:
                ins[inner] = self.buffers[x]
            else:
                ins[inner], views[inner] = self.buffers[view.source], view
        return ins, views

    def _materialized(self, x: SSAValue) -> SSAValue:
        """The buffer of nn value `x`; for a slice read in place so far, a copy made now
        (for a reader that cannot take the view) and kept for later readers; for a
        reshape of one, a view of the slice's copy."""
        view = self.strided.pop(x, None)
        if view is None:
            return self.buffers[x]
        op = x.owner
        if isinstance(op, nn.ReshapeOp):  # a reshape of a view: of the copy
            t = x.type
            assert isinstance(t, TensorType)
            reshaped = tile.ViewOp(
                self._materialized(op.input), MemRefType(t.element_type, t.get_shape())
            )
            self.block.add_op(reshaped)
            self.buffers[x] = reshaped.result
            return self.buffers[x]
        assert isinstance(op, nn.SliceOp)
        source = self._materialized(op.input)
        self.buffers[x] = self._temp(x)
        group = Group([op], [op.input], [x])
        self._group(group, {op.input: source}, {x: self.buffers[x]}, self._hint(op))
        return self.buffers[x]

    def _reshape_is_written(self, op: nn.ReshapeOp) -> bool:
        """Whether `op`'s operand was computed straight into the out-param that `op`'s
        result is returned in (see `_reshaped_outputs`)."""
        param = self.out_param.get(op.result)
        source = self.buffers.get(op.input)
        return (
            param is not None
            and self.reshaped_outputs.get(op.input) is param
            and isinstance(source, OpResult)
            and isinstance(source.op, tile.ViewOp)
            and source.op.source is param
        )

    def _torch_call(self, op: nn.TorchCallOp) -> None:
        """`tile.torch_call` on the operands' buffers, into a buffer per result."""
        outs = []
        for r in op.outputs:
            self.buffers[r] = self._result_buffer(r)
            outs.append(self.buffers[r])
        ins = [self.buffers[x] for x in op.inputs]
        self.block.add_op(tile.TorchCallOp(op.target.data, op.call.data, ins, outs))

    def _hint(self, op: Operation) -> str:
        return f"{self.f.sym_name.data}_{op.name.split('.')[-1]}"

    def _result_buffer(self, v: SSAValue) -> SSAValue:
        """The out-param for a returned value (first use); for a value returned only
        reshaped, the out-param viewed in its shape (no copy kernel); else a new
        temporary."""
        if v in self.out_param and self.out_param[v] not in self.written_params:
            self.written_params.add(self.out_param[v])
            return self.out_param[v]
        t = v.type
        assert isinstance(t, TensorType)
        param = self.reshaped_outputs.get(v)
        if param is not None and param not in self.written_params:
            self.written_params.add(param)
            view = tile.ViewOp(param, MemRefType(t.element_type, t.get_shape()))
            self.block.add_op(view)
            return view.result
        alloc = tile.AllocOp(MemRefType(t.element_type, t.get_shape()))
        self.block.add_op(alloc)
        return alloc.result

    def _kernel_name(self, hint: str) -> str:
        return unique_name(hint if IDENTIFIER.fullmatch(hint) else "kernel", self.names)

    # ------------------------------------------------------------------ groups

    def _group(
        self,
        group: Group,
        ins: dict[SSAValue, SSAValue],
        outs: dict[SSAValue, SSAValue],
        hint: str,
        views: dict[SSAValue, StridedView] | None = None,
    ) -> None:
        """Lower one group into a kernel and its launch (or its fallbacks). `views`:
        inputs read in place from strided views of the buffers `ins` gives them; when the
        kernel cannot read one that way, they are copied first."""
        if not group.outputs:  # dead code (nothing leaves the group)
            return
        if all(math.prod(shape(v)) == 0 for v in group.outputs):
            return  # every output is empty: nothing to compute or store
        empty = [v for v in [*group.inputs, *group.outputs] if math.prod(shape(v)) == 0]
        if empty:
            raise error_at(
                self._where(group),
                f"convert-nn-to-tile: a kernel reads an empty tensor ({empty[0].type}) to "
                "make a non-empty one (a reduction over a zero-size axis); not supported",
            )
        unpeeled, unpeeled_ins, unpeeled_views = group, ins, views
        if views:
            group, ins, views = peel_input_reshapes(group, ins, views)
        try:
            space = analyze(group, {v: view.layout for v, view in (views or {}).items()})
            opts = group_options(space, group.ops, group.outputs, self.opts)
            blocks = choose_blocks(space, opts)
            self._check_tile_size(group, space, blocks)
            emitter = KernelEmitter(
                self._kernel_name(hint),
                group,
                space,
                blocks,
                online_stats=self.opts.online_stats,
                column_statistics=self.opts.column_statistics,
                row_cache_bytes=self.opts.row_cache_bytes,
                exp2_sums=self.opts.exp2_sums,
            )
            kernel, grid = emitter.build()
        except Untileable as e:
            if views:  # read them from copies: a kernel of their own each, as before
                assert unpeeled_views is not None
                copies = {v: self._materialized(view.value) for v, view in unpeeled_views.items()}
                self._group(unpeeled, {**unpeeled_ins, **copies}, outs, hint)
                return
            self._fallback(group, ins, outs, hint, e)
            return
        if grid[0] > MAX_GRID:
            where = group.ops[0] if group.ops else self.f
            raise error_at(where, f"convert-nn-to-tile: {grid[0]} programs exceed one launch")
        kernel.location = self._where(group).location  # where its diagnostics point
        self.module.body.block.insert_op_before(kernel, self.f)
        args = [ins[v] for v in emitter.launch_inputs] + [outs[v] for v in group.outputs]
        self.block.add_op(tile.LaunchOp(kernel.sym_name.data, grid, args))

    def _where(self, group: Group) -> Operation:
        """Where to report a problem with `group`: its first op that is not a constant
        cloned in, else the function."""
        return next((op for op in group.ops if not isinstance(op, nn.ConstantOp)), self.f)

    def _check_tile_size(self, group: Group, space: IterationSpace, blocks: Blocks) -> None:
        """A located error when (forced) sizes make a tile too large for any backend."""
        elements = largest_tile(space, blocks)
        if elements > MAX_TILE_ELEMENTS:
            raise error_at(
                self._where(group),
                f"convert-nn-to-tile: these tile sizes make a tile of {elements} elements "
                f"(at most {MAX_TILE_ELEMENTS}); force smaller block sizes",
            )

    def _fallback(
        self,
        group: Group,
        ins: dict[SSAValue, SSAValue],
        outs: dict[SSAValue, SSAValue],
        hint: str,
        why: Untileable,
    ) -> None:
        if len(group.ops) == 1 and isinstance(group.ops[0], nn.MatmulOp):
            mm = group.ops[0]
            self._gemm(mm, ins, outs[mm.result])
            return
        if len(group.ops) == 1 and isinstance(group.ops[0], nn.CumsumOp) and self.opts.scan:
            scan = group.ops[0]
            if not math.prod(shape(scan.result)):
                return
            launches, partial_t = scan_launches(lambda s: self._kernel_name(hint + s), scan)
            roles = {"input": ins[scan.input], "result": outs[scan.result]}
            if partial_t is not None:
                roles["partials"] = self._alloc(partial_t)
            for launch in launches:
                self._launch_at(
                    scan, launch.kernel, launch.programs, [roles[a] for a in launch.args]
                )
            if launches:
                return
        if len(group.ops) == 1 and _whole_tensor_ok(group.ops[0]):
            self._whole_tensor(group.ops[0], ins, outs, hint)
            return
        if len(group.ops) <= 1:
            where = why.op or (group.ops[0] if group.ops else self.f)
            raise error_at(where, f"convert-nn-to-tile: cannot tile {where.name}: {why.reason}")
        known = dict(ins)
        parts = tileable_subgroups(group)
        if len(parts) == 1:  # it analyzes whole but does not emit: one kernel per op
            parts = single_op_groups(group)
        for part in parts:
            part_outs = {r: outs[r] if r in outs else self._temp(r) for r in part.outputs}
            known.update(part_outs)
            self._group(part, {v: known[v] for v in part.inputs}, part_outs, hint)

    def _whole_tensor(
        self,
        op: Operation,
        ins: dict[SSAValue, SSAValue],
        outs: dict[SSAValue, SSAValue],
        hint: str,
    ) -> None:
        """A one-program `whole_tensor` kernel for `op` and its launch."""
        if all(math.prod(shape(r)) == 0 for r in op.results):
            return  # an empty result: nothing to compute
        kernel, values = whole_tensor_kernel(self._kernel_name(hint), op)
        self.module.body.block.insert_op_before(kernel, self.f)
        both = {**ins, **outs}
        self.block.add_op(tile.LaunchOp(kernel.sym_name.data, [1], [both[v] for v in values]))

    def _attention(self, op: nn.AttentionOp) -> None:
        """The flash-attention kernel of `op` and its launch (`attention.py`)."""
        refusal = attention_schedule_refusal(op)
        if refusal is not None:
            raise error_at(
                op, f"convert-nn-to-tile: no attention schedule ({refusal}); run nn-decompose"
            )
        plan = self._attention_plan(op)
        shapes = attention_shapes(op, plan)
        roles = self.seq_major.get(op, {})
        if "out" in roles:  # written sequence-major, straight into the transpose's result
            moved = roles["out"].source
            out = self._result_buffer(moved)
            self.buffers[moved] = out
            rows_out = self._view(out, seq_major_shape(shape(op.result)))
        else:
            out = self._result_buffer(op.result)
            self.buffers[op.result] = out
            rows_out = out
        operands = []
        for role, v in (("query", op.query), ("key", op.key), ("value", op.value)):
            if role in roles:  # read sequence-major: the transpose's input, or its rows
                read = roles[role]
                source = self.buffers[read.source]
                operands.append(self._view(source, seq_major_shape(shape(v), read.columns)))
            else:
                operands.append(self.buffers[v])
        query = operands[0]
        if plan.packed:  # the group's query heads as rows: free views of both buffers
            query = self._view(query, shapes.query)
            rows_out = self._view(out, shapes.out)
        mask = [self.buffers[op.mask]] if op.mask is not None else []
        inputs = [query, *operands[1:], *mask]
        layouts = {role: (r.columns, r.offset) for role, r in roles.items()}
        # a split plan's combine kernel writes the output, the attention kernel partials
        own = {r: lay for r, lay in layouts.items() if plan.splits == 1 or r != "out"}
        kernel, programs = attention_kernel(self._kernel_name("attention"), op, plan, own)
        if plan.splits == 1:
            self._launch_at(op, kernel, programs, [*inputs, rows_out])
            return
        assert shapes.partial_out is not None and shapes.partial_stats is not None
        partial_out = self._alloc(MemRefType(f32, shapes.partial_out))
        partial_max = self._alloc(MemRefType(f32, shapes.partial_stats))
        partial_sum = self._alloc(MemRefType(f32, shapes.partial_stats))
        partials = [partial_out, partial_max, partial_sum]
        self._launch_at(op, kernel, programs, [*inputs, *partials])
        combine, programs = combine_kernel(
            self._kernel_name("attention_combine"), op, plan, layouts.get("out")
        )
        self._launch_at(op, combine, programs, [*partials, rows_out])

    def _attention_plan(self, op: nn.AttentionOp) -> AttentionPlan:
        """How `op`'s kernels are laid out under this pass's block options."""
        hint = self.module.attributes.get(nn.SIZE_HINT_ATTR)
        keys = shape(op.key)[2]
        return plan_attention(
            op,
            self.opts.attention_block_m or 0,
            self.opts.attention_block_n or 0,
            self.opts.attention_query_tiles or 0,
            dynamic_keys=isinstance(hint, IntegerAttr) and keys % hint.value.data == 0,
        )

    def _view(self, buffer: SSAValue, shape: Sequence[int]) -> SSAValue:
        """`buffer` (contiguous) under another shape (itself under its own)."""
        t = buffer.type
        assert isinstance(t, MemRefType)
        if tuple(t.get_shape()) == tuple(shape):
            return buffer
        view = tile.ViewOp(buffer, MemRefType(t.element_type, list(shape)))
        self.block.add_op(view)
        return view.result

    def _alloc(self, t: MemRefType) -> SSAValue:
        """A temporary buffer of type `t`."""
        alloc = tile.AllocOp(t)
        self.block.add_op(alloc)
        return alloc.result

    def _launch_at(
        self, op: Operation, kernel: tile.KernelOp, programs: int, args: list[SSAValue]
    ) -> None:
        """Insert `kernel` (located at `op`) and launch it over `programs` programs."""
        if programs > MAX_GRID:
            raise error_at(op, f"convert-nn-to-tile: {programs} programs exceed one launch")
        kernel.location = op.location
        self.module.body.block.insert_op_before(kernel, self.f)
        self.block.add_op(tile.LaunchOp(kernel.sym_name.data, [programs], args))

    def _temp(self, v: SSAValue) -> SSAValue:
        t = v.type
        assert isinstance(t, TensorType)
        return self._alloc(MemRefType(t.element_type, t.get_shape()))

    def _gemm(
        self,
        mm: nn.MatmulOp,
        ins: dict[SSAValue, SSAValue],
        c: SSAValue,
        bias: SSAValue | None = None,
    ) -> None:
        """`tile.gemm` (the library's GEMM) computing `mm` (plus the `bias` buffer) into
        the buffer `c`."""
        transpose_a, transpose_b = mm.transpose_a is not None, mm.transpose_b is not None
        self.block.add_op(tile.GemmOp(ins[mm.lhs], ins[mm.rhs], c, transpose_a, transpose_b, bias))

    def _library_gemm(
        self, group: Group, ins: dict[SSAValue, SSAValue], outs: dict[SSAValue, SSAValue], hint: str
    ) -> None:
        """`tile.gemm` for the group's matmul (with its bias add when the epilogue starts
        with one: `gemm_bias`), then a kernel for the rest of the epilogue, if any."""
        mms = [o for o in group.ops if isinstance(o, nn.MatmulOp)]
        if len(mms) != 1 or mms[0].lhs not in ins or mms[0].rhs not in ins:
            self._group(group, ins, outs, hint)
            return
        mm = mms[0]
        bias = match_gemm_bias(mm, group.inputs, group.outputs)
        product, absorbed = (bias.value, {mm, *bias.ops}) if bias else (mm.result, {mm})
        c = outs[product] if product in outs else self._temp(product)
        self._gemm(mm, ins, c, ins[bias.bias] if bias else None)
        rest = [o for o in group.ops if o not in absorbed]
        outputs = [v for v in group.outputs if v is not product]
        if not outputs:
            return
        used = {x for o in rest for x in o.operands} | set(outputs)
        inputs = [v for v in [*group.inputs, product] if v in used]
        epilogue_ins = {**ins, product: c}
        self._group(Group(rest, inputs, outputs), {v: epilogue_ins[v] for v in inputs}, outs, hint)


LOOKAHEAD = 8
"""How many ops past the end of a run `tileable_subgroups` tries to extend it by."""


def tileable_subgroups(group: Group) -> list[Group]:
    """`group` split, in program order, into runs of consecutive ops that each tile as
    one iteration space (greedy: the longest run that tiles, looking up to LOOKAHEAD ops
    past the last op that fitted; an op that does not tile alone is a run of its own).
    The fallback for a group that does not tile whole; values crossing runs become
    outputs of the run making them."""
    members = set(group.ops)
    leaving = set(group.outputs)

    def make(run: list[Operation]) -> Group:
        in_run = set(run)
        made = {r for op in run for r in op.results}
        inputs = list(dict.fromkeys(x for op in run for x in op.operands if x not in made))
        outputs = [
            r
            for op in run
            for r in op.results
            if r in leaving
            or any(u.operation in members and u.operation not in in_run for u in r.uses)
        ]
        return Group(list(run), inputs, outputs)

    ops, runs, start = group.ops, [], 0
    while start < len(ops):
        end = start + 1
        run = _GrowingRun(ops[start])
        if run.tiles(lambda first=start, last=end: make(ops[first:last])):
            # an op may only connect to the run a few ops later (a broadcast before
            # the multiply that uses it): look that far ahead for a longer run
            probe = end
            while probe < len(ops) and probe - end < LOOKAHEAD:
                run.extend(ops[probe])
                probe += 1
                if run.tiles(lambda first=start, last=probe: make(ops[first:last])):
                    end = probe
        runs.append(ops[start:end])
        start = end
    return [make(run) for run in runs]


class _GrowingRun:
    """Whether a run of ops that grows by one op at a time tiles (what `analyze` says
    of it), without analyzing the whole run again at each step (a run of n ops would
    cost n^2): its axes are kept in an `AxisSummary`. Runs with an op `analyze` rejects
    on sight, and runs whose domain only the values' order decides, are analyzed."""

    def __init__(self, op: Operation):
        self.summary = AxisSummary()
        self.matmuls: list[nn.MatmulOp] = []
        self.made: set[SSAValue] = set()
        self.plain = True
        self.extend(op)

    def extend(self, op: Operation) -> None:
        """Add `op`, the op after the run's last."""
        values = [*op.operands, *op.results]
        static = all(
            isinstance(v.type, TensorType) and all(d >= 0 for d in v.type.get_shape())
            for v in values
        )
        dense = isinstance(op, nn.ConstantOp) and op.splat_value is None
        self.plain = self.plain and static and not dense
        if not self.plain:
            return
        self.summary = AxisSummary.merge(self.summary, AxisSummary(op))
        if isinstance(op, nn.MatmulOp):
            self.matmuls.append(op)
        self.made.update(op.results)

    def tiles(self, group: Callable[[], Group]) -> bool:
        """Whether the run tiles; `group` makes it as a Group, if it must be analyzed."""
        if self.plain:
            try:
                space = self.summary.union_space(
                    AxisSummary(), self.matmuls, lambda v: v not in self.made
                )
                return not isinstance(space, Untileable)
            except AmbiguousDomain:
                pass
        return _tiles(group())


def _tiles(group: Group) -> bool:
    try:
        analyze(group)
    except Untileable:
        return False
    return True


def single_op_groups(group: Group) -> list[Group]:
    """`group` split into one group per op (the fallback when it is not tileable whole)."""
    out: list[Group] = []
    for op in group.ops:
        inputs = list(dict.fromkeys(op.operands))
        out.append(Group([op], inputs, list(op.results)))
    return out
